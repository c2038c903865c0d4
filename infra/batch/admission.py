"""What the API server stores when a workload is applied: defaults first, then validation.

kube-apiserver admits a JobSet in this order, and `tpuplane workload check` follows it:
1. the CRD's structural defaults (JobSet v0.12 CRD): `replicatedJobs[].replicas` 1, `replicatedJobs[].groupName`
   "default", `failurePolicy.restartStrategy` Recreate;
2. the mutating webhooks. JobSet's: `successPolicy` {operator: All}, `startupPolicy` {startupPolicyOrder:
   AnyOrder}, each Job template Indexed with pod `restartPolicy` OnFailure, `network` with DNS hostnames and
   `publishNotReadyAddresses` on, and an unnamed failure-policy rule i named `failurePolicyRule<i>` (xpk writes
   its rule without a name). Kueue's: the namespace's LocalQueue named `default`, when the workload names no
   queue and that LocalQueue exists; `suspend: true` once a queue is named, whatever it was (Kueue unsuspends it
   at admission);
3. validation: the schema and the webhooks' rules (`tpuplane.infra.k8s_validation`).
A Job (batch/v1) gets Kueue's defaults, then validation. `kubectl apply -f` puts an object without a namespace in
the current one: `default` here. Defaults touch only well-typed parts: anything else is left for validation to
name, as the API server would.
"""

from __future__ import annotations

import copy
from typing import Any, Collection, Mapping

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError, ValidationInfo, field_validator

from tpuplane.infra.args import Source, validation_problems
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.model import camel

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_DEFAULT_LOCAL_QUEUE = "default"  # Kueue's LocalQueue defaulting: the namespace's queue of this name
DEFAULT_RULE_NAME = "failurePolicyRule{index}"  # JobSet's webhook: the name of an unnamed failure-policy rule
API_VERSIONS = {"JobSet": "jobset.x-k8s.io/v1alpha2", "Job": "batch/v1"}  # the versions the check knows
WORKLOAD_KINDS = tuple(API_VERSIONS)


class _Envelope(BaseModel):
    model_config = ConfigDict(alias_generator=camel, populate_by_name=True, extra="allow", frozen=True)


class _Metadata(_Envelope):
    name: StrictStr
    namespace: StrictStr | None = None
    labels: dict[StrictStr, StrictStr] | None = None
    annotations: dict[StrictStr, StrictStr] | None = None


class WorkloadEnvelope(_Envelope):
    """What the check reads of a workload document before the schemas judge the rest: its kind, the version
    of it the check knows, and metadata of the shape the API server takes."""

    kind: StrictStr
    api_version: StrictStr
    metadata: _Metadata
    spec: dict[str, Any] | None = None

    @field_validator("api_version")
    @classmethod
    def _known_version(cls, value: str, info: ValidationInfo) -> str:
        known = API_VERSIONS.get(info.data.get("kind", ""))
        if known is not None and value != known:
            raise ValueError(f"{known}, the {info.data['kind']} version tpuplane checks")
        return value


def _dict(parent: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = parent.get(key)
    return value if isinstance(value, dict) else None


def _default(obj: dict[str, Any], key: str, value: Any) -> Any:
    """Set `key` when absent or null (the API server decodes null as unset), and return what `key` holds."""
    if obj.get(key) is None:
        obj[key] = value
    return obj[key]


def _jobset_defaults(spec: dict[str, Any]) -> None:
    """The JobSet CRD's structural defaults and JobSet's mutating webhook, in place."""
    _default(spec, "successPolicy", {"operator": "All"})
    _default(spec, "startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    network = _default(spec, "network", {})
    if isinstance(network, dict):
        _default(network, "enableDNSHostnames", True)
        _default(network, "publishNotReadyAddresses", True)
    rjobs = spec.get("replicatedJobs")
    for rjob in rjobs if isinstance(rjobs, list) else []:
        if not isinstance(rjob, dict):
            continue
        _default(rjob, "replicas", 1)
        _default(rjob, "groupName", "default")
        job_spec = _dict(_dict(rjob, "template") or {}, "spec")
        if job_spec is None:
            continue
        _default(job_spec, "completionMode", "Indexed")
        pod_spec = _dict(_dict(job_spec, "template") or {}, "spec")
        if pod_spec is not None and not pod_spec.get("restartPolicy"):
            pod_spec["restartPolicy"] = "OnFailure"
    policy = _dict(spec, "failurePolicy")
    if policy is None:
        return
    _default(policy, "restartStrategy", "Recreate")
    rules = policy.get("rules")
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        if isinstance(rule, dict) and rule.get("name") in (None, ""):
            rule["name"] = DEFAULT_RULE_NAME.format(index=i)


def _kueue_defaults(manifest: dict[str, Any], queues: Collection[tuple[str, str]]) -> None:
    """Kueue's webhook for JobSets and Jobs, in place: the default LocalQueue, then suspend."""
    metadata = manifest["metadata"]
    labels = _default(metadata, "labels", {})
    if not isinstance(labels, dict):
        return
    namespace = metadata.get("namespace")
    if not labels.get(QUEUE_LABEL) and isinstance(namespace, str) and (namespace, KUEUE_DEFAULT_LOCAL_QUEUE) in queues:
        labels[QUEUE_LABEL] = KUEUE_DEFAULT_LOCAL_QUEUE
    spec = _dict(manifest, "spec")
    if labels.get(QUEUE_LABEL) and spec is not None and isinstance(spec.get("suspend"), (bool, type(None))):
        spec["suspend"] = True


def admitted(manifest: Mapping[str, Any], queues: Collection[tuple[str, str]] = ()) -> dict[str, Any]:
    """The JobSet or Job as the API server would store it, given the stack's LocalQueues as (namespace, name).
    Raises ConfigError naming each path the API server would refuse."""
    from tpuplane.infra.k8s_validation import manifest_errors  # jsonschema, kubernetes-validate: infra extra

    kind = manifest.get("kind")
    if kind not in WORKLOAD_KINDS:
        raise ConfigError.at("kind", kind, "JobSet (jobset.x-k8s.io/v1alpha2) or Job (batch/v1)",
                             "the check simulates the workloads Kueue manages in a tpuplane stack")
    obj = copy.deepcopy(dict(manifest))
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        raise ConfigError.at("metadata.name", name, f"the {kind}'s name", "the API server needs one to create it")
    try:
        WorkloadEnvelope.model_validate(obj)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc, Source.config("", WorkloadEnvelope))) from None
    _default(metadata, "namespace", "default")
    spec = _dict(obj, "spec")
    if kind == "JobSet" and spec is not None:
        _jobset_defaults(spec)
    _kueue_defaults(obj, queues)
    errors = manifest_errors(obj)
    if errors:
        where = f"{kind} {name}" if name.isprintable() else f"{kind} {name!r}"  # the error names it on one line
        raise ConfigError([Problem(where, error.split(": ", 1)[1] if error.startswith(f"{kind} ") else error,
                                   "an object the API server accepts", "fix the field the message names")
                           for error in errors[:10]])
    return obj
