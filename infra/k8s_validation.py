"""Check rendered manifests before anything reaches a cluster.

- Core kinds (Namespace, DaemonSet, PriorityClass, Job, ...) against the Kubernetes OpenAPI schemas of a pinned
  version, strictly (unknown fields are errors), with kubernetes-validate.
- Kueue and JobSet kinds against the project's own strict schemas in `tpuplane.infra.schemas`
  (`<group>_<version>_<Kind>.json`), which list only the fields tpuplane emits and their close siblings.
- A JobSet's Job templates are checked as batch/v1 Jobs, so the pod specs inside are held to the same standard.
- The ClusterQueue rules the API server enforces beyond the schema (CEL and Kueue's webhook) that tpuplane's
  renderers could break: one quota per covered resource, in order; borrowingLimit only in a cohort;
  lendingLimit at most nominalQuota.
- A PodMonitoring against its CRD (Managed Prometheus, `monitoring.googleapis.com/v1`), and the CRD's CEL rules:
  a scrape timeout within its interval, one authentication method per endpoint, no Basic `authorization`, and
  Secrets of the PodMonitoring's own namespace only.
- The API server's own rules on every pod template beyond the schema (core/v1 `ValidatePodSpec`): at least one
  container; a container's requests not above its limits; extended resources (`google.com/tpu`) not overcommitted:
  given a limit, and a request (when given) equal to it.
- The JobSet webhook's create rules beyond the schema (JobSet v0.12 `ValidateCreate`) that a JobSet can break:
  the child Job and pod names it generates are DNS-1035 labels, replicas x parallelism fits an int32,
  failure-policy rule names are unique, and the replicated jobs it refers to exist (dependsOn: an earlier one).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any, Iterable

import jsonschema
import kubernetes_validate

from tpuplane.infra.naming import DNS_LABEL, INT32_MAX, K8S_LABEL_VALUE_MAX, POD_NAME_SUFFIX
from tpuplane.infra.quantity import QUANTITY_ALLOWED, parse_quantity

K8S_VERSION = "1.32.0"
_OWN_SCHEMA_GROUPS = ("kueue.x-k8s.io", "jobset.x-k8s.io", "monitoring.googleapis.com")
# A Prometheus duration: 1h30m, 30s, 500ms ...
_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h|d|w|y)")
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000,
                "y": 31_536_000_000}


class InvalidManifest(ValueError):
    """A rendered object the API server would reject: a bug in a renderer, never user input."""


@cache
def own_schema(api_version: str, kind: str) -> dict[str, Any]:
    group, _, version = api_version.partition("/")
    name = f"{group}_{version}_{kind}.json"
    path = resources.files("tpuplane.infra.schemas") / name
    if not path.is_file():
        raise InvalidManifest(f"{kind} {api_version}: tpuplane has no schema {name}")
    return json.loads(path.read_text())


def _where(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name')}".replace(" /", " ")


def _own_schema_errors(obj: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(own_schema(obj["apiVersion"], obj["kind"]),
                                                format_checker=jsonschema.FormatChecker())
    return [f"{_where(obj)}: {'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
            for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))]


def _core_errors(obj: dict[str, Any]) -> list[str]:
    """A core kind against its schema, then (when it holds a pod template) the pod rules."""
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path) or "(root)"
        return [f"{_where(obj)}: {path}: {exc.message}"]
    return _pod_rule_errors(obj)


def _extended_resource(name: str) -> bool:
    """Kubernetes' IsExtendedResourceName: a resource outside the kubernetes.io namespace, such as google.com/tpu;
    the API server never overcommits one."""
    return "/" in name and not name.startswith(("kubernetes.io/", "requests."))


def _container_errors(container: dict[str, Any], where: str) -> list[str]:
    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    errors = []
    for name in sorted({*requests, *limits}):
        try:
            request = parse_quantity(requests[name]) if name in requests else None
            limit = parse_quantity(limits[name]) if name in limits else None
        except ValueError:
            errors.append(f"{where}.resources: {name}: must be {QUANTITY_ALLOWED}")
            continue
        if _extended_resource(name) and limit is None:
            errors.append(f"{where}.resources.limits.{name}: Required value: Limit must be set for non "
                          "overcommitable resources")
        elif _extended_resource(name) and request is not None and request != limit:
            errors.append(f"{where}.resources.requests.{name}: Invalid value: {requests[name]}: must be equal to "
                          f"{name} limit of {limits[name]}")
        elif request is not None and limit is not None and request > limit:
            errors.append(f"{where}.resources.requests.{name}: Invalid value: {requests[name]}: must be less than or "
                          f"equal to {name} limit of {limits[name]}")
    return errors


def _pod_spec_errors(pod: dict[str, Any], where: str) -> list[str]:
    """The API server's pod rules the schema does not express (core/v1 validation of a PodSpec)."""
    containers = pod.get("containers") or []
    errors = [] if containers else [f"{where}.containers: Required value: a pod has at least one container"]
    for group in ("initContainers", "containers"):
        for i, container in enumerate(pod.get(group) or []):
            errors += _container_errors(container, f"{where}.{group}.{i}")
    return errors


# Where each kind holds its pod template's spec.
_POD_SPECS = {"Pod": ("spec",), "CronJob": ("spec", "jobTemplate", "spec", "template", "spec")}
_POD_TEMPLATE_KINDS = ("Job", "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet")


def _pod_rule_errors(obj: dict[str, Any]) -> list[str]:
    kind = obj.get("kind")
    path = _POD_SPECS.get(kind) or (("spec", "template", "spec") if kind in _POD_TEMPLATE_KINDS else None)
    if path is None:
        return []
    pod: Any = obj
    for key in path:
        pod = pod.get(key) if isinstance(pod, dict) else None
    return _pod_spec_errors(pod, f"{_where(obj)}: {'.'.join(path)}") if isinstance(pod, dict) else []


def _jobset_template_errors(obj: dict[str, Any]) -> list[str]:
    errors = []
    for rjob in obj.get("spec", {}).get("replicatedJobs", []):
        template = rjob.get("template", {})
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {**template.get("metadata", {}), "name": f"{obj['metadata']['name']}-{rjob.get('name')}-0",
                            "namespace": obj["metadata"].get("namespace", "default")},
               "spec": template.get("spec", {})}
        errors += [f"{_where(obj)} replicatedJob {rjob.get('name')}: {e}" for e in _core_errors(job)]
    return errors


def _cluster_queue_rule_errors(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec", {})
    errors = []
    for g, group in enumerate(spec.get("resourceGroups", [])):
        covered = group.get("coveredResources", [])
        for f, flavor in enumerate(group.get("flavors", [])):
            where = f"{_where(obj)}: spec.resourceGroups.{g}.flavors.{f}"
            resources = flavor.get("resources", [])
            if [r.get("name") for r in resources] != covered:
                errors.append(f"{where}.resources: flavors must have the same resources as coveredResources "
                              f"{covered}, in order")
            for r, resource in enumerate(resources):
                if "borrowingLimit" in resource and "cohortName" not in spec:
                    errors.append(f"{where}.resources.{r}.borrowingLimit: must be nil when cohortName is empty")
                if "lendingLimit" in resource and (parse_quantity(resource["lendingLimit"])
                                                   > parse_quantity(resource["nominalQuota"])):
                    errors.append(f"{where}.resources.{r}.lendingLimit: must be less than or equal to "
                                  f"nominalQuota ({resource['nominalQuota']})")
    return errors


def _dns_1035(name: str) -> bool:
    return len(name) <= K8S_LABEL_VALUE_MAX and DNS_LABEL.fullmatch(name) is not None


def _jobset_rule_errors(obj: dict[str, Any]) -> list[str]:
    name, spec, where = obj["metadata"]["name"], obj["spec"], _where(obj)
    errors, earlier = [], []
    for i, rjob in enumerate(spec["replicatedJobs"]):
        path = f"{where}: spec.replicatedJobs.{i}"
        replicas, job = rjob.get("replicas", 1), rjob["template"]["spec"]
        parallelism = job.get("parallelism", 1)
        if isinstance(parallelism, int) and replicas * parallelism > INT32_MAX:
            errors.append(f"{path}: the product of replicas and parallelism must not exceed {INT32_MAX} for "
                          f"replicatedJob '{rjob['name']}'")
        last_job = f"{name}-{rjob['name']}-{replicas - 1}"
        if not _dns_1035(last_job):
            errors.append(f"{path}.name: JobSet name is too long, job names generated for this JobSet will exceed "
                          f"63 characters ({last_job})")
        if job.get("completionMode") == "Indexed" and isinstance(job.get("completions"), int):
            last_pod = f"{last_job}-{job['completions'] - 1}{POD_NAME_SUFFIX}"
            if not _dns_1035(last_pod):
                errors.append(f"{path}.name: JobSet name is too long, pod names generated for this JobSet will "
                              f"exceed 63 characters ({last_pod})")
        if i == 0 and rjob.get("dependsOn"):
            errors.append(f"{path}.dependsOn: DependsOn can't be set for the first ReplicatedJob")
        errors += [f"{path}.dependsOn: replicatedJob {rjob['name']} cannot depend on replicatedJob {d['name']}"
                   for d in rjob.get("dependsOn", []) if i and d["name"] not in earlier]
        earlier.append(rjob["name"])
    errors += [f"{where}: spec.successPolicy.targetReplicatedJobs: invalid replicatedJob name '{target}' does not "
               "appear in .spec.replicatedJobs"
               for target in spec.get("successPolicy", {}).get("targetReplicatedJobs", []) if target not in earlier]
    rules = spec.get("failurePolicy", {}).get("rules", [])
    for i, rule in enumerate(rules):
        errors += [f"{where}: spec.failurePolicy.rules.{i}.targetReplicatedJobs: invalid replicatedJob name "
                   f"'{target}' in failure policy does not appear in .spec.replicatedJobs"
                   for target in rule.get("targetReplicatedJobs", []) if target not in earlier]
        same = [j for j, other in enumerate(rules) if other["name"] == rule["name"]]
        if len(same) > 1 and same[0] == i:
            errors.append(f"{where}: spec.failurePolicy.rules.{i}.name: rule names are not unique, rules with "
                          f"indices {same} all have the same name '{rule['name']}'")
    return errors


def _duration_ms(text: str) -> int | None:
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(int(n) * _DURATION_MS[u] for n, u in parts)


def _secret_refs(endpoint: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    auth, basic, tls = endpoint.get("authorization", {}), endpoint.get("basicAuth", {}), endpoint.get("tls", {})
    refs = [("authorization.credentials", auth.get("credentials", {})), ("basicAuth.password", basic.get("password", {})),
            ("oauth2.clientSecret", endpoint.get("oauth2", {}).get("clientSecret", {}))]
    refs += [(f"tls.{key}", tls.get(key, {})) for key in ("ca", "cert", "key")]
    return [(path, ref["secret"]) for path, ref in refs if "secret" in ref]


def _pod_monitoring_rule_errors(obj: dict[str, Any]) -> list[str]:
    errors = []
    for i, endpoint in enumerate(obj["spec"]["endpoints"]):
        where = f"{_where(obj)}: spec.endpoints.{i}"
        interval, timeout = _duration_ms(endpoint["interval"]), _duration_ms(endpoint.get("timeout", "0s"))
        if interval is None or timeout is None:
            errors.append(f"{where}: interval and timeout must be Prometheus durations such as 30s")
        elif "timeout" in endpoint and timeout > interval:
            errors.append(f"{where}: scrape timeout ({endpoint['timeout']}) must not be greater than scrape interval "
                          f"({endpoint['interval']})")
        if sum(key in endpoint for key in ("authorization", "basicAuth", "oauth2")) > 1:
            errors.append(f"{where}: at most one of authorization, basicAuth and oauth2")
        if endpoint.get("authorization", {}).get("type") == "Basic":
            errors.append(f'{where}.authorization.type: authorization type cannot be set to "basic", use "basicAuth"')
        errors += [f"{where}.{path}.secret.namespace: Namespace not allowed on PodMonitoring secret references."
                   for path, secret in _secret_refs(endpoint) if "namespace" in secret]
    return errors


def manifest_errors(obj: dict[str, Any]) -> list[str]:
    """Every violation found in one object (empty when valid)."""
    group = obj.get("apiVersion", "").rpartition("/")[0]
    if group in _OWN_SCHEMA_GROUPS:
        errors = _own_schema_errors(obj)
        if obj.get("kind") == "JobSet" and not errors:  # the templates and rules are read from a well-formed spec
            errors += _jobset_template_errors(obj)
            if not errors:
                errors += _jobset_rule_errors(obj)
        if obj.get("kind") == "ClusterQueue" and not errors:  # the rules read a well-formed spec
            errors += _cluster_queue_rule_errors(obj)
        if obj.get("kind") == "PodMonitoring" and not errors:
            errors += _pod_monitoring_rule_errors(obj)
        return errors
    return _core_errors(obj)


def validate_manifests(objs: Iterable[dict[str, Any]]) -> None:
    """Raise InvalidManifest listing every violation in `objs`."""
    errors = [e for obj in objs for e in manifest_errors(obj)]
    if errors:
        raise InvalidManifest("\n".join(errors))
