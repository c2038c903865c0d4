"""What real Kueue and the real scheduler do with a workload: submit it to a sandbox, then read the outcome the way
a user would (the Kueue Workload's conditions and admission, where the pods landed).

An outcome is one of:
- `admitted`: Kueue admitted it to some flavors; `pools` says on which node pools each pod set's pods run;
- `held`: quota reserved in some flavors, but an admission check (a ProvisioningRequest) holds it;
- `unschedulable`: admitted, but the scheduler finds no node for some pod (its message says why);
- `pending`: Kueue keeps it waiting (its message says why: quota, flavors, queue).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client import ApiException

from tpuplane.infra.fleet.scheduling import NODEPOOL_LABEL

JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
WORKLOAD = ("kueue.x-k8s.io", "v1beta2", "workloads")
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOB_POD_SET = "main"  # Kueue's one pod set of a batch/v1 Job
SETTLE = 4.0  # seconds a workload stays pending, or a pod unscheduled, before that is its outcome


@dataclass
class Outcome:
    state: str  # admitted | unschedulable | pending
    flavors: dict[str, str] = field(default_factory=dict)  # pod set -> the flavor of its TPUs (or its one flavor)
    pools: dict[str, set[str]] = field(default_factory=dict)  # pod set -> node pools its pods run on
    message: str = ""


def submit(api: client.ApiClient, document: dict[str, Any]) -> tuple[str, str]:
    """Create a JobSet (or Job) in its namespace, making the namespace if needed. Returns (namespace, name)."""
    namespace = document["metadata"].get("namespace", "default")
    try:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    if document["kind"] == "JobSet":
        client.CustomObjectsApi(api).create_namespaced_custom_object(*JOBSET[:2], namespace, JOBSET[2], document)
    else:
        client.BatchV1Api(api).create_namespaced_job(namespace, document)
    return namespace, document["metadata"]["name"]


def workload_of(api: client.ApiClient, namespace: str, owner: str) -> dict[str, Any] | None:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(*WORKLOAD[:2], namespace, WORKLOAD[2])["items"]
    return next((w for w in items if any(o.get("name") == owner for o in w["metadata"].get("ownerReferences", []))),
                None)


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), {})


def observe(api: client.ApiClient, namespace: str, name: str, kind: str = "JobSet", timeout: float = 90.0) -> Outcome:
    """Wait until the workload's outcome is clear, and return it."""
    deadline = time.monotonic() + timeout
    pending_since: float | None = None
    while time.monotonic() < deadline:
        workload = workload_of(api, namespace, name)
        admission = (workload or {}).get("status", {}).get("admission")
        if admission and _condition(workload, "Admitted").get("status") == "True":
            return _placed(api, namespace, name, kind, admission, deadline)
        if admission:
            pending_since = pending_since or time.monotonic()
            if time.monotonic() - pending_since > SETTLE:
                checks = workload["status"].get("admissionChecks", [])
                return Outcome("held", _flavors(admission), message="; ".join(
                    f"{c['name']}: {c.get('state')} {c.get('message', '')}".strip() for c in checks))
        if workload is not None:
            pending_since = pending_since or time.monotonic()
            message = _condition(workload, "QuotaReserved").get("message", "")
            if message and time.monotonic() - pending_since > SETTLE:
                return Outcome("pending", message=message)
        time.sleep(0.5)
    raise AssertionError(f"{namespace}/{name}: no Kueue outcome within {timeout:.0f} s")


def _placed(api: client.ApiClient, namespace: str, name: str, kind: str, admission: dict[str, Any],
            deadline: float) -> Outcome:
    assignments = admission["podSetAssignments"]
    flavors = _flavors(admission)
    expected = sum(a.get("count", 0) for a in assignments)
    core = client.CoreV1Api(api)
    unscheduled_since: float | None = None
    while time.monotonic() < deadline:
        owner_label = JOBSET_NAME_LABEL if kind == "JobSet" else JOB_NAME_LABEL
        pods = core.list_namespaced_pod(namespace, label_selector=f"{owner_label}={name}").items
        unscheduled = [p for p in pods if not p.spec.node_name]
        if len(pods) >= expected and not unscheduled or kind != "JobSet" and pods and not unscheduled:
            nodes = {n.metadata.name: n.metadata.labels.get(NODEPOOL_LABEL, "")
                     for n in core.list_node().items}
            pools: dict[str, set[str]] = {}
            for pod in pods:
                pod_set = pod.metadata.labels.get(REPLICATED_JOB_LABEL, JOB_POD_SET)
                pools.setdefault(pod_set, set()).add(
                    nodes[pod.spec.node_name])
            return Outcome("admitted", flavors, pools)
        refused = [c.message for p in unscheduled for c in p.status.conditions or []
                   if c.type == "PodScheduled" and c.reason == "Unschedulable"]
        if refused:
            unscheduled_since = unscheduled_since or time.monotonic()
            if time.monotonic() - unscheduled_since > SETTLE:
                return Outcome("unschedulable", flavors, message=refused[0])
        time.sleep(0.5)
    raise AssertionError(f"{namespace}/{name}: admitted, but its pods neither ran nor were refused in time")


def _flavors(admission: dict[str, Any]) -> dict[str, str]:
    """Pod set -> the flavor of its TPUs (or of its one resource)."""
    return {a["name"]: a["flavors"].get("google.com/tpu") or next(iter(a["flavors"].values()))
            for a in admission["podSetAssignments"]}


def remove(api: client.ApiClient, namespace: str, name: str, kind: str = "JobSet", timeout: float = 60.0) -> None:
    """Delete it (foreground) and wait until its Workload is gone, so its quota is free again."""
    body = client.V1DeleteOptions(propagation_policy="Foreground")
    try:
        if kind == "JobSet":
            client.CustomObjectsApi(api).delete_namespaced_custom_object(*JOBSET[:2], namespace, JOBSET[2], name,
                                                                         body=body)
        else:
            client.BatchV1Api(api).delete_namespaced_job(name, namespace, body=body)
    except ApiException as exc:
        if exc.status != 404:
            raise
    deadline = time.monotonic() + timeout
    while workload_of(api, namespace, name) is not None:
        if time.monotonic() > deadline:
            raise AssertionError(f"{namespace}/{name}: its Workload is still there after {timeout:.0f} s")
        time.sleep(0.3)
