"""Objects as the API server returns them for a Kueue v1beta2 (0.19.2) + JobSet v1alpha2 (0.12.0) cluster.

Written from the two projects' API types, CRDs and controllers (the condition types, reasons and message formats
below are theirs, e.g. Kueue's pkg/scheduler/flavorassigner and pkg/scheduler/preemption), then held against a
running cluster: `test_recorded_objects.py` checks each one against the CRDs' schemas, and the e2e tier
(`tests/e2e/test_day_two.py`) against what `tpuplane sandbox`'s API server, Kueue and JobSet return for the same
situations. The world: a v6e fleet with four 4x4 slices (4 VMs of 4 chips each, 16 chips a slice) shared by two
teams in cohort `tpuplane`: team-a owns two slices (32 chips), team-b one (16), and `unassigned` lends the last
one (16). Each ClusterQueue is shaped as tpuplane renders it: one resource group covering chips, cpu and memory,
the CPU flavor first with no chips, so Kueue's message for a TPU pod set that waits names the CPU flavor's refusal
before the TPU flavor's.
"""

from __future__ import annotations

import copy
import hashlib
from datetime import datetime, timedelta, timezone
from typing import Any

from tpuplane.infra.batch.workload import TpuJob, TpuWorkloadSpec, render_tpu_jobset
from tpuplane.infra.fleet.catalog import resolve_tpu_type
from tpuplane.infra.fleet.scheduling import tpu_node_labels, tpu_tolerations

NOW = datetime(2027, 1, 15, 9, 0, 0, tzinfo=timezone.utc)
TPU = "google.com/tpu"
FLAVOR = "tpu-v6e-slice-4x4"
CPU_FLAVOR = "cpu"
HOST_CPU, HOST_MEMORY = "179480m", "665891Mi"  # what GKE leaves to pods on a ct6e-standard-4t, per VM
COHORT = "tpuplane"
PRIORITIES = {"low": 250, "medium": 500, "high": 750}
V6E_16_LABELS = tpu_node_labels(resolve_tpu_type("v6e-16"), "on-demand")  # what tpuplane's pools and flavor carry


def at(minutes_ago: float) -> str:
    return (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def uid(name: str) -> str:
    digest = hashlib.sha256(name.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def condition(kind: str, status: bool, reason: str, message: str, minutes_ago: float = 5,
              generation: int = 1) -> dict[str, Any]:
    return {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message,
            "lastTransitionTime": at(minutes_ago), "observedGeneration": generation}


# ---------------------------------------------------------------------------------------------------------------
# JobSets: rendered by tpuplane, then as the API server stores them (webhook defaults, uid, status)


def jobset(name: str, namespace: str, *, queue: str, priority: str = "medium", slices: int = 1,
           created: float = 10, suspend: bool = False, conditions: tuple = (), restarts: int = 0,
           ready: int = 0, node_selector: dict[str, str] | None = None, experiment: str | None = None,
           image: str = "us-docker.pkg.dev/acme/train:1") -> dict[str, Any]:
    spec = TpuWorkloadSpec(name=name, namespace=namespace, queue=queue, priority=priority,
                           jobs=[TpuJob(tpu_type="v6e-16", slices=slices, image=image, command="python train.py")])
    system = {"tpuplane.dev/experiment": experiment} if experiment else None
    obj = render_tpu_jobset(spec, system_labels=system)
    pod = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    if node_selector is not None:
        pod["nodeSelector"] = node_selector
    for container in pod["containers"]:  # the API server writes quantities as strings
        resources = container.get("resources") or {}
        for kind in ("limits", "requests"):
            resources[kind] = {k: str(v) for k, v in (resources.get(kind) or {}).items()}
    obj["metadata"].update(uid=uid(f"jobset/{namespace}/{name}"), resourceVersion="4711", generation=1,
                           creationTimestamp=at(created))
    # the JobSet webhook's defaults, and Kueue's: a queued JobSet is created suspended until admitted
    obj["spec"]["network"]["subdomain"] = name
    obj["spec"]["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
    obj["spec"]["failurePolicy"]["restartStrategy"] = "Recreate"
    obj["spec"]["suspend"] = suspend
    for rjob in obj["spec"]["replicatedJobs"]:
        rjob["template"]["spec"]["completionMode"] = "Indexed"
    obj["status"] = {
        "restarts": restarts,
        "replicatedJobsStatus": [{"name": r["name"], "ready": ready, "succeeded": 0, "failed": 0,
                                  "active": 0 if suspend else r["replicas"], "suspended": r["replicas"] if suspend else 0}
                                 for r in obj["spec"]["replicatedJobs"]],
        "conditions": list(conditions) or ([condition("Suspended", True, "SuspendedJobs", "jobset is suspended",
                                                      created)] if suspend else []),
    }
    return obj


def completed() -> dict[str, Any]:
    return condition("Completed", True, "AllJobsCompleted", "jobset completed successfully", 1)


def failed() -> dict[str, Any]:
    return condition("Failed", True, "FailedJobs", "jobset failed due to one or more job failures", 1)


# ---------------------------------------------------------------------------------------------------------------
# Kueue Workloads


def pod_count(js: dict[str, Any]) -> int:
    return sum(r["replicas"] * r["template"]["spec"]["parallelism"] for r in js["spec"]["replicatedJobs"])


def workload(js: dict[str, Any], *, conditions: list[dict[str, Any]], cluster_queue: str | None = None,
             admission_checks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Kueue's Workload for a JobSet; admitted to `cluster_queue` when given (flavor FLAVOR for every chip)."""
    meta = js["metadata"]
    priority = meta["labels"]["kueue.x-k8s.io/priority-class"]
    suffix = hashlib.sha256(meta["uid"].encode()).hexdigest()[:5]
    pod_sets = []
    for rjob in js["spec"]["replicatedJobs"]:
        template = copy.deepcopy(rjob["template"]["spec"]["template"])
        pod_sets.append({"name": rjob["name"], "count": rjob["replicas"] * rjob["template"]["spec"]["parallelism"],
                         "template": template})
    obj: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"jobset-{meta['name']}-{suffix}", "namespace": meta["namespace"],
                     "uid": uid(f"workload/{meta['namespace']}/{meta['name']}"), "resourceVersion": "4712",
                     "generation": 1, "creationTimestamp": meta["creationTimestamp"],
                     "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
                     "finalizers": ["kueue.x-k8s.io/resource-in-use"],
                     "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                          "name": meta["name"], "uid": meta["uid"], "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {"active": True, "queueName": meta["labels"]["kueue.x-k8s.io/queue-name"],
                 "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": priority},
                 "priority": PRIORITIES[priority], "podSets": pod_sets},
        "status": {"conditions": conditions},
    }
    chips = {p["name"]: p["count"] * 4 for p in pod_sets}
    if cluster_queue is not None:
        obj["status"]["admission"] = {"clusterQueue": cluster_queue, "podSetAssignments": [
            {"name": p["name"], "flavors": {TPU: FLAVOR}, "resourceUsage": {TPU: str(chips[p["name"]])},
             "count": p["count"]} for p in pod_sets]}
    else:
        obj["status"]["resourceRequests"] = [{"name": n, "resources": {TPU: str(c)}} for n, c in chips.items()]
    if admission_checks is not None:
        obj["status"]["admissionChecks"] = admission_checks
    return obj


def admitted_conditions(cluster_queue: str, minutes_ago: float = 8, *, pods_ready: bool = True) -> list[dict]:
    found = [condition("QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {cluster_queue}",
                       minutes_ago),
             condition("Admitted", True, "Admitted", "The workload is admitted", minutes_ago)]
    if pods_ready:
        found.append(condition("PodsReady", True, "Started", "All pods reached readiness and the workload is running",
                               minutes_ago - 1))
    return found


def refused(pod_set: str, chips: int, tpu_flavor_refusal: str) -> str:
    """Kueue's message for a TPU pod set it cannot place in a tpuplane ClusterQueue: the CPU flavor (no chips)
    refuses it first, then the TPU flavor as `tpu_flavor_refusal` says."""
    return (f"couldn't assign flavors to pod set {pod_set}: insufficient quota for {TPU} in flavor {CPU_FLAVOR}, "
            f"previously considered podsets requests (0) + current podset request ({chips}) > maximum capacity (0), "
            f"{tpu_flavor_refusal}")


def short_of_quota(pod_set: str, chips: int, more: int, flavor: str = FLAVOR) -> str:
    return refused(pod_set, chips, f"insufficient unused quota for {TPU} in flavor {flavor}, {more} more needed")


def beyond_quota(pod_set: str, chips: int, most: int, flavor: str = FLAVOR) -> str:
    return refused(pod_set, chips, f"insufficient quota for {TPU} in flavor {flavor}, previously considered podsets "
                                   f"requests (0) + current podset request ({chips}) > maximum capacity ({most})")


def pending_conditions(message: str) -> list[dict]:
    """Kueue 0.19's default (UnadmittedWorkloadsObservability off): reason Pending, the flavor assigner's words."""
    return [condition("QuotaReserved", False, "Pending", message, 3)]


def preempted_conditions(preemptor: dict[str, Any], preemptor_cq: str, preemptee_cq: str) -> list[dict]:
    """Evicted by Kueue's preemptor (pkg/scheduler/preemption), then requeued and pending again."""
    message = (f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, JobUID: "
               f"{preemptor['metadata']['labels']['kueue.x-k8s.io/job-uid']}) due to reclamation within the cohort; "
               f"preemptor path: /{COHORT}/{preemptor_cq}; preemptee path: /{COHORT}/{preemptee_cq}")
    return [
        condition("QuotaReserved", False, "Pending", short_of_quota("slice", 32, 16), 1),
        condition("Admitted", False, "NoReservation", "The workload has no reservation", 2),
        condition("Evicted", True, "Preempted", message, 2),
        condition("Preempted", True, "InCohortReclamation", message, 2),
        condition("Requeued", True, "Preempted", message, 2),
    ]


# ---------------------------------------------------------------------------------------------------------------
# Pods


def pod(js: dict[str, Any], slice_index: int, worker: int, *, phase: str = "Running",
        waiting: dict[str, str] | None = None, unschedulable: str | None = None) -> dict[str, Any]:
    meta = js["metadata"]
    rjob = js["spec"]["replicatedJobs"][0]
    template = rjob["template"]["spec"]["template"]
    job = f"{meta['name']}-{rjob['name']}-{slice_index}"
    name = f"{job}-{worker}-{hashlib.sha256(f'{job}{worker}'.encode()).hexdigest()[:5]}"
    container = template["spec"]["containers"][0]
    status: dict[str, Any] = {"phase": phase, "qosClass": "BestEffort", "startTime": at(5)}
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": unschedulable, "lastTransitionTime": at(4), "lastProbeTime": None}]
    else:
        status["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at(5),
                                 "lastProbeTime": None}]
        state = {"waiting": waiting} if waiting else {"running": {"startedAt": at(4)}}
        status["containerStatuses"] = [{"name": container["name"], "image": container["image"],
                                        "imageID": "" if waiting else "sha256:0f1e", "ready": not waiting,
                                        "restartCount": 0, "started": not waiting, "state": state}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": meta["namespace"], "uid": uid(f"pod/{name}"),
                     "creationTimestamp": at(5),
                     # the JobSet controller's labels, then the Job controller's
                     "labels": {**template["metadata"]["labels"], "jobset.sigs.k8s.io/jobset-name": meta["name"],
                                "jobset.sigs.k8s.io/replicatedjob-name": rjob["name"],
                                "jobset.sigs.k8s.io/replicatedjob-replicas": str(rjob["replicas"]),
                                "jobset.sigs.k8s.io/job-index": str(slice_index),
                                "jobset.sigs.k8s.io/job-key": hashlib.sha1(job.encode()).hexdigest(),
                                "batch.kubernetes.io/job-completion-index": str(worker),
                                "batch.kubernetes.io/job-name": job, "job-name": job},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                                          "uid": uid(f"job/{job}"), "controller": True, "blockOwnerDeletion": True}]},
        "spec": {**copy.deepcopy(template["spec"]), "nodeName": None if unschedulable else f"gke-train-{slice_index}-{worker}"},
        "status": status,
    }


def event(obj: dict[str, Any], kind: str, reason: str, message: str, minutes_ago: float = 3,
          event_type: str = "Normal", count: int = 1) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{abs(hash(message)) % 10**16:016x}", "namespace": meta["namespace"],
                         "creationTimestamp": at(minutes_ago)},
            "involvedObject": {"kind": kind, "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
            "reason": reason, "message": message, "type": event_type, "count": count,
            "firstTimestamp": at(minutes_ago), "lastTimestamp": at(minutes_ago),
            "source": {"component": "kueue-admission"}}


# ---------------------------------------------------------------------------------------------------------------
# Queues, flavors, nodes


def priority_classes() -> list[dict[str, Any]]:
    """The WorkloadPriorityClasses of the world, as the API server returns them (cluster-scoped, no status)."""
    return [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
             "metadata": {"name": name, "uid": uid(f"wpc/{name}"), "creationTimestamp": at(600), "generation": 1,
                          "resourceVersion": "431"},
             "value": value, "description": f"tpuplane priority {name}"} for name, value in PRIORITIES.items()]


def resource_flavor() -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR, "uid": uid("rf"), "creationTimestamp": at(600), "generation": 1,
                         "finalizers": ["kueue.x-k8s.io/resource-in-use"]},
            "spec": {"nodeLabels": dict(V6E_16_LABELS), "tolerations": tpu_tolerations("on-demand")}}


def _quota(name: str, nominal: str, borrowing_limit: int | None = None,
           lending_limit: int | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "nominalQuota": nominal}
    if borrowing_limit is not None:
        entry["borrowingLimit"] = str(borrowing_limit)
    if lending_limit is not None:
        entry["lendingLimit"] = str(lending_limit)
    return entry


def _usage(chips: int, borrowed: int | None) -> list[dict[str, Any]]:
    """`flavorsReservation` as Kueue writes it: every flavor and resource of the queue, sorted by resource name
    (a LocalQueue's has no `borrowed`)."""
    def entry(name: str, total: int = 0, lent: int = 0) -> dict[str, Any]:
        return {"name": name, "total": str(total)} | ({} if borrowed is None else {"borrowed": str(lent)})

    return [{"name": CPU_FLAVOR, "resources": [entry("cpu"), entry(TPU), entry("memory")]},
            {"name": FLAVOR, "resources": [entry("cpu"), entry(TPU, chips, borrowed or 0), entry("memory")]}]


def cluster_queue(name: str, nominal: int, *, used: int = 0, borrowed: int = 0, admitted: int = 0,
                  pending: int = 0, borrowing_limit: int | None = None, lending_limit: int | None = None,
                  cohort: str | None = COHORT) -> dict[str, Any]:
    """A team's ClusterQueue as tpuplane renders it and Kueue stores it (limits on the chips only)."""
    vms = nominal // 4
    flavors = [{"name": CPU_FLAVOR, "resources": [_quota(TPU, "0"), _quota("cpu", "48"), _quota("memory", "192Gi")]},
               {"name": FLAVOR, "resources": [
                   _quota(TPU, str(nominal), borrowing_limit, lending_limit),
                   _quota("cpu", f"{vms * int(HOST_CPU[:-1])}m"),
                   _quota("memory", f"{vms * int(HOST_MEMORY[:-2])}Mi")]}]
    spec: dict[str, Any] = {
        "resourceGroups": [{"coveredResources": [TPU, "cpu", "memory"], "flavors": flavors}],
        "queueingStrategy": "BestEffortFIFO", "stopPolicy": "None",
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                       "borrowWithinCohort": {"policy": "Never"}},
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}},
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": name, "uid": uid(f"cq/{name}"), "creationTimestamp": at(600), "generation": 1,
                         "finalizers": ["kueue.x-k8s.io/resource-in-use"], "resourceVersion": "967"},
            "spec": spec,
            "status": {"conditions": [condition("Active", True, "Ready", "Can admit new workloads", 600)],
                       "flavorsReservation": _usage(used, borrowed), "flavorsUsage": _usage(used, borrowed),
                       "pendingWorkloads": pending, "reservingWorkloads": admitted, "admittedWorkloads": admitted}}


def local_queue(namespace: str, name: str, cq: str, *, used: int = 0, admitted: int = 0,
                pending: int = 0) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace, "uid": uid(f"lq/{namespace}/{name}"),
                         "creationTimestamp": at(600), "generation": 1, "resourceVersion": "970"},
            "spec": {"clusterQueue": cq, "stopPolicy": "None"},
            "status": {"conditions": [condition("Active", True, "Ready", "Can submit new workloads to localQueue",
                                                600)],
                       "pendingWorkloads": pending, "reservingWorkloads": admitted, "admittedWorkloads": admitted,
                       "flavorsReservation": _usage(used, None), "flavorsUsage": _usage(used, None)}}


def node(name: str, pool: str, *, topology: str = "4x4", chips: int = 4, cordoned: bool = False) -> dict[str, Any]:
    tpu = chips > 0
    node_labels = {"kubernetes.io/hostname": name, "cloud.google.com/gke-nodepool": pool,
                   "node.kubernetes.io/instance-type": "ct6e-standard-4t" if tpu else "e2-standard-8"}
    if tpu:
        node_labels |= {**V6E_16_LABELS, "cloud.google.com/gke-tpu-topology": topology}
    allocatable = {"cpu": "179500m" if tpu else "7910m", "memory": "702Gi" if tpu else "29Gi", "pods": "110"}
    if tpu:
        allocatable[TPU] = str(chips)
    spec: dict[str, Any] = {"taints": [{"key": TPU, "value": "present", "effect": "NoSchedule"}] if tpu else []}
    if cordoned:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": uid(f"node/{name}"), "labels": node_labels, "creationTimestamp": at(600)},
            "spec": spec,
            "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


def fleet_nodes() -> list[dict[str, Any]]:
    """Four 4x4 slices (train-0..3, 4 VMs each) and three CPU nodes."""
    return ([node(f"gke-train-{s}-{w}", f"train-{s}") for s in range(4) for w in range(4)]
            + [node(f"gke-cpu-{i}", "cpu-np", chips=0) for i in range(3)])


def team_queues(*, a_used: int = 32, b_used: int = 32, b_borrowed: int = 16, a_pending: int = 1) -> list[dict]:
    """team-a (32 chips), team-b (16) and unassigned (16) in one cohort; by default team-b borrows a slice."""
    return [cluster_queue("team-a", 32, used=a_used, admitted=1, pending=a_pending),
            cluster_queue("team-b", 16, used=b_used, borrowed=b_borrowed, admitted=1),
            cluster_queue("unassigned", 16)]
