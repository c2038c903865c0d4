"""One state per workload, from its JobSet's and its Kueue Workload's conditions: what `workload list` shows.

A workload is a JobSet; Kueue gives it a Workload (`jobset-<name>-<hash>`, owned by the JobSet) that carries
admission. The first of `STATE_RULES` that holds names the state, and `PENDING_REASONS` says why a workload is
pending; both are published as they are here (docs/reference/day-two.md, written by docs/generate.py).

Kueue resets `Evicted` and `Preempted` to False when it admits the workload again, so a preempted workload stays
`preempted` while it waits to be readmitted and becomes `admitted`/`running` once it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from tpuplane.infra.batch.api_objects import (
    Obj,
    by_uid,
    condition,
    field,
    is_true,
    items,
    labels,
    meta,
    owned_by,
    text,
    timestamp,
)
from tpuplane.infra.batch.experiments import EXPERIMENT_LABEL, TRIAL_LABEL
from tpuplane.infra.batch.json_documents import JSON_API_VERSION, NULLABLE_STRING, closed_object, document_schema
from tpuplane.infra.batch.kueue_messages import granular_reason
from tpuplane.infra.batch.workload import JOBSET_NAME_LABEL, PRIORITY_LABEL, QUEUE_LABEL
from tpuplane.infra.fleet.scheduling import TPU_RESOURCE


class State(str, Enum):
    PENDING = "pending"
    ADMITTED = "admitted"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    EVICTED = "evicted"
    PREEMPTED = "preempted"


# The rules, in the order they are tried (the first that holds names the state): `workload_standing` applies them.
STATE_RULES: tuple[tuple[State, str], ...] = (
    (State.FINISHED, "JobSet `Completed=True`, or Workload `Finished=True` with reason `Succeeded`"),
    (State.FAILED, "JobSet `Failed=True` (reason `FailedJobs`, `ReachedMaxRestarts`...), or Workload "
                   "`Finished=True` with another reason (`Failed`, `OwnerNotFound`...)"),
    (State.PREEMPTED, "Workload `Evicted=True` with reason `Preempted`; the reason shown is its `Preempted` "
                      "condition's (`InClusterQueue`, `InCohortReclamation`, `InCohortFairSharing`, "
                      "`InCohortReclaimWhileBorrowing`), and its message's preemptor UID is looked up among the "
                      "Workloads the context may read: `preempted by <namespace>/<jobset> (<why>)`, else the "
                      "preemptor's ClusterQueue"),
    (State.EVICTED, "Workload `Evicted=True` with another reason, shown as given (`PodsReadyTimeout`, "
                    "`AdmissionCheck`, `ClusterQueueStopped`, `LocalQueueStopped`, `Deactivated`, `NodeFailures`...)"),
    (State.RUNNING, "Workload `Admitted=True` and a pod Running, `PodsReady=True`, or a child Job with all its pods "
                    "ready; a JobSet without a queue label (Kueue does not manage it) runs when its pods do"),
    (State.ADMITTED, "Workload `Admitted=True` (quota reserved and every admission check Ready), no pod running yet"),
    (State.PENDING, "anything else, with one of the reasons below"),
)

# Why a workload is pending, every reason tpuplane gives; a `QuotaReserved=False` reason Kueue writes that is none
# of these is shown as Kueue wrote it.
PENDING_REASONS: dict[str, str] = {
    "NoQueue": f"the JobSet has no `{QUEUE_LABEL}` label: Kueue does not manage it, and it has no pod running",
    "NoWorkload": "Kueue has not created its Workload yet (or never will, e.g. for a priority class that does not "
                  "exist: `why` says)",
    "Queued": "no `QuotaReserved` condition yet: Kueue has not tried to admit it. With `BestEffortFIFO` Kueue tries "
              "the head of a queue and, while it cannot be admitted, leaves the workloads behind it untried",
    "WaitingForQuota": "`QuotaReserved=False`: the quota is in use; it runs once enough is free (or lent)",
    "ExceedsMaxQuota": "`QuotaReserved=False`: more than the queue could ever hold, with all its cohort could lend",
    "NoMatchingFlavor": "`QuotaReserved=False`: no flavor of the ClusterQueue matches its node selector, affinity "
                        "or tolerations",
    "Misconfigured": "`QuotaReserved=False`: its LocalQueue or ClusterQueue does not exist",
    "Pending": "`QuotaReserved=False` with Kueue's catch-all reason and a message tpuplane reads no reason from "
               "(shown as plain `pending`; `why` quotes the message)",
    "AdmissionCheckPending": "quota reserved; an admission check (e.g. a DWS ProvisioningRequest looking for "
                             "capacity) has not said Ready yet",
    "AdmissionCheckRetry": "quota reserved; an admission check failed for now: Kueue releases the quota and tries "
                           "again",
    "AdmissionCheckRejected": "quota reserved; an admission check refused it for good: Kueue deactivates the "
                              "workload",
    "QuotaReserved": "quota reserved and every admission check Ready: Kueue has not marked it `Admitted` yet",
}
# Kueue's admission check states (Pending, Ready, Retry, Rejected) other than Ready, as pending reasons.
_CHECK_REASONS = {"Pending": "AdmissionCheckPending", "Retry": "AdmissionCheckRetry",
                  "Rejected": "AdmissionCheckRejected"}

# `list` shows active workloads first, waiting ones next, ended ones last.
STATE_ORDER = (State.RUNNING, State.ADMITTED, State.PREEMPTED, State.EVICTED, State.PENDING, State.FAILED,
               State.FINISHED)
ENDED = frozenset({State.FINISHED, State.FAILED})

# Kueue's preemption message (pkg/scheduler/preemption): "Preempted to accommodate a workload (UID: <uid>,
# JobUID: <uid>) due to <reason in words>; preemptor path: /<cohort>/<cq>; preemptee path: /<cohort>/<cq>"
_PREEMPTION = re.compile(r"UID: (?P<uid>[^,)]*), JobUID: (?P<job_uid>[^)]*)\) due to (?P<why>[^;]*)"
                         r"(?:; preemptor path: (?P<path>[^;]*))?")
_UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class Preemption:
    """Who preempted a workload and why, as Kueue recorded it; `by` is filled when the preemptor is known."""

    reason: str  # InClusterQueue, InCohortReclamation, ...
    why: str  # Kueue's words: "reclamation within the cohort"
    uid: str  # the preemptor's Workload UID
    path: str  # the preemptor's ClusterQueue path, /<cohort>/<cluster queue>
    by: str = ""  # namespace/name of the preemptor's JobSet (or Workload), when it could be looked up

    @property
    def cluster_queue(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1] if self.path else ""

    def describe(self) -> str:
        who = self.by or (f"a workload of ClusterQueue {self.cluster_queue}" if self.cluster_queue
                          else f"workload UID {self.uid or _UNKNOWN}")
        return f"preempted by {who} ({self.why or self.reason})"


def parse_preemption(workload: Obj | None) -> Preemption | None:
    """The Workload's preemption, from its `Preempted` condition (True), or None."""
    preempted = condition(workload, "Preempted")
    if text(field(preempted, "status")) != "True":
        return None
    message = text(field(preempted, "message"))
    found = _PREEMPTION.search(message)
    groups = {k: (v or "").strip() for k, v in found.groupdict().items()} if found else {}
    path = groups.get("path", "")
    return Preemption(reason=text(field(preempted, "reason")), why=groups.get("why", ""),
                      uid="" if groups.get("uid") == _UNKNOWN else groups.get("uid", ""),
                      path="" if path == _UNKNOWN else path)


@dataclass(frozen=True)
class Standing:
    """A workload's state and the condition behind it."""

    state: State
    reason: str = ""  # the condition's reason (WaitingForQuota, PodsReadyTimeout, InCohortReclamation, ...)
    message: str = ""


def _running_pods(pods: Iterable[Obj]) -> int:
    return sum(1 for p in pods if field(p, "status", "phase") == "Running")


def workload_standing(jobset: Obj, workload: Obj | None, pods: Sequence[Obj] = ()) -> Standing:
    """The state of one JobSet and its Workload (None: Kueue has not made one, or the JobSet names no queue)."""
    for kind, state in (("Completed", State.FINISHED), ("Failed", State.FAILED)):
        if is_true(jobset, kind):
            found = condition(jobset, kind) or {}
            return Standing(state, text(found.get("reason")), text(found.get("message")))
    finished = condition(workload, "Finished")
    if is_true(workload, "Finished"):
        reason = text(field(finished, "reason"))
        return Standing(State.FINISHED if reason == "Succeeded" else State.FAILED, reason,
                        text(field(finished, "message")))
    if is_true(workload, "Evicted"):
        evicted = condition(workload, "Evicted") or {}
        if evicted.get("reason") == "Preempted":
            preempted = condition(workload, "Preempted") or evicted
            return Standing(State.PREEMPTED, text(preempted.get("reason")), text(preempted.get("message")))
        return Standing(State.EVICTED, text(evicted.get("reason")), text(evicted.get("message")))
    running = bool(_running_pods(pods) or is_true(workload, "PodsReady") or _ready_jobs(jobset))
    if workload is None and QUEUE_LABEL not in labels(jobset):  # not Kueue's: its pods alone say
        return Standing(State.RUNNING) if running else Standing(State.PENDING, "NoQueue",
                                                                f"no {QUEUE_LABEL} label: Kueue does not manage it")
    if is_true(workload, "Admitted"):
        return Standing(State.RUNNING) if running else Standing(State.ADMITTED)
    return _pending(workload)


def _ready_jobs(jobset: Obj) -> int:
    """Child Jobs whose pods are all ready or done, per the JobSet's own status (pods may not be readable)."""
    return sum(int(s.get("ready") or 0) for s in items(field(jobset, "status", "replicatedJobsStatus"))
               if isinstance(s.get("ready"), int))


def _pending(workload: Obj | None) -> Standing:
    if workload is None:
        return Standing(State.PENDING, "NoWorkload", "Kueue has not created its Workload yet")
    reserved = condition(workload, "QuotaReserved")
    if is_true(workload, "QuotaReserved"):
        waiting = [c for c in items(field(workload, "status", "admissionChecks")) if c.get("state") != "Ready"]
        if waiting:
            check = waiting[0]
            return Standing(State.PENDING, _CHECK_REASONS.get(text(check.get("state")), "AdmissionCheckPending"),
                            f"admission check {text(check.get('name'))}: {text(check.get('message'))}".rstrip(": "))
        return Standing(State.PENDING, "QuotaReserved", text(field(condition(workload, "Admitted"), "message")))
    if reserved is None:
        return Standing(State.PENDING, "Queued", "Kueue has not tried to admit it yet: it waits its turn in the "
                                                 "ClusterQueue")
    message = text(reserved.get("message"))
    return Standing(State.PENDING, granular_reason(text(reserved.get("reason")), message), message)


# ---------------------------------------------------------------------------------------------------------------
# `workload list`: one row per JobSet


@dataclass(frozen=True)
class WorkloadRow:
    name: str
    namespace: str
    workload: str  # the Kueue Workload's name, "" without one
    local_queue: str
    cluster_queue: str  # the team: tpuplane gives each team a ClusterQueue of its name
    priority_class: str
    priority: int | None
    standing: Standing
    preemption: Preemption | None
    flavors: tuple[str, ...]
    pods_running: int
    pods_total: int
    restarts: int
    created: str  # RFC 3339, as the API server wrote it
    age_seconds: float | None
    experiment: str = ""
    trial: str = ""

    @property
    def state(self) -> State:
        return self.standing.state

    def state_text(self) -> str:
        """`pending (WaitingForQuota)`, `preempted by team-b/urgent (reclamation within the cohort)`."""
        if self.preemption is not None and self.state is State.PREEMPTED:
            return self.preemption.describe()
        shown = self.standing.reason not in ("", "Pending")  # Kueue's catch-all says nothing the state does not
        return f"{self.state.value} ({self.standing.reason})" if shown else self.state.value

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "namespace": self.namespace, "workload": self.workload or None,
            "team": self.cluster_queue or None, "clusterQueue": self.cluster_queue or None,
            "localQueue": self.local_queue or None,
            "priority": {"class": self.priority_class or None, "value": self.priority},
            "state": self.state.value, "reason": self.standing.reason or None,
            "message": self.standing.message or None,
            "preemptedBy": None if self.preemption is None or self.state is not State.PREEMPTED else {
                "jobset": self.preemption.by or None, "workloadUID": self.preemption.uid or None,
                "clusterQueue": self.preemption.cluster_queue or None, "reason": self.preemption.reason or None},
            "flavors": list(self.flavors), "pods": {"running": self.pods_running, "total": self.pods_total},
            "restarts": self.restarts, "createdAt": self.created or None,
            "ageSeconds": None if self.age_seconds is None else int(self.age_seconds),
            "experiment": self.experiment or None, "trial": self.trial or None,
        }


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def pods_expected(jobset: Obj) -> int:
    """Pods the JobSet runs at once: replicas x parallelism over its replicated jobs."""
    total = 0
    for rjob in items(field(jobset, "spec", "replicatedJobs")):
        parallelism = _int(field(rjob, "template", "spec", "parallelism"), 1)
        total += _int(rjob.get("replicas"), 1) * parallelism
    return total


def admitted_flavors(workload: Obj | None) -> tuple[str, ...]:
    """The flavors Kueue admitted the workload to: TPU flavors first, then the others, each once."""
    tpu, other = [], []
    for assignment in items(field(workload, "status", "admission", "podSetAssignments")):
        flavors = assignment.get("flavors")
        for resource, flavor in (flavors.items() if isinstance(flavors, Mapping) else ()):
            (tpu if resource == TPU_RESOURCE else other).append(text(flavor))
    return tuple(dict.fromkeys(tpu + other))


def find_workload(jobset: Obj, workloads: Iterable[Obj]) -> Obj | None:
    """The JobSet's Workload: the one it owns (the newest, should Kueue hold two during a re-creation)."""
    owned = [w for w in workloads if meta(w, "namespace") == meta(jobset, "namespace") and owned_by(w, jobset)]
    return max(owned, key=lambda w: meta(w, "creationTimestamp"), default=None)


def preemptor_name(preemption: Preemption, workloads_by_uid: Mapping[str, Obj]) -> str:
    """namespace/name of the preemptor's JobSet (its Workload's owner), when its Workload is among those read."""
    found = workloads_by_uid.get(preemption.uid)
    if found is None:
        return ""
    owner = next((r for r in items(field(found, "metadata", "ownerReferences")) if r.get("controller")), None)
    name = text((owner or {}).get("name")) or meta(found, "name")
    return f"{meta(found, 'namespace')}/{name}"


def workload_row(jobset: Obj, workload: Obj | None, pods: Sequence[Obj], local_queues: Mapping[tuple[str, str], str],
                 workloads_by_uid: Mapping[str, Obj], now: float) -> WorkloadRow:
    namespace, name = meta(jobset, "namespace"), meta(jobset, "name")
    job_labels = labels(jobset)
    local_queue = text(field(workload, "spec", "queueName")) or text(job_labels.get(QUEUE_LABEL))
    cluster_queue = (text(field(workload, "status", "admission", "clusterQueue"))
                     or local_queues.get((namespace, local_queue), ""))
    priority_class = text(field(workload, "spec", "priorityClassRef", "name")) or text(job_labels.get(PRIORITY_LABEL))
    priority = field(workload, "spec", "priority")
    preemption = parse_preemption(workload)
    if preemption is not None:
        preemption = replace(preemption, by=preemptor_name(preemption, workloads_by_uid))
    created = meta(jobset, "creationTimestamp")
    born = timestamp(created)
    return WorkloadRow(
        name=name, namespace=namespace, workload=meta(workload, "name") if workload else "",
        local_queue=local_queue, cluster_queue=cluster_queue, priority_class=priority_class,
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else None,
        standing=workload_standing(jobset, workload, pods), preemption=preemption,
        flavors=admitted_flavors(workload), pods_running=_running_pods(pods), pods_total=pods_expected(jobset),
        restarts=max(0, _int(field(jobset, "status", "restarts"))), created=created,
        age_seconds=None if born is None else max(0.0, now - born),
        experiment=text(job_labels.get(EXPERIMENT_LABEL)), trial=text(job_labels.get(TRIAL_LABEL)))


def workload_rows(jobsets: Iterable[Obj], workloads: Sequence[Obj], pods: Iterable[Obj], local_queues: Iterable[Obj],
                  now: float, *, known_workloads: Iterable[Obj] = ()) -> list[WorkloadRow]:
    """A row per JobSet, sorted for reading (see `sort_rows`). `known_workloads` are more Workloads (e.g. of other
    namespaces) in which to look preemptors up."""
    by_jobset: dict[tuple[str, str], list[Obj]] = {}
    for pod in pods:
        owner = labels(pod).get(JOBSET_NAME_LABEL)
        if owner:
            by_jobset.setdefault((meta(pod, "namespace"), text(owner)), []).append(pod)
    queue_targets = {(meta(q, "namespace"), meta(q, "name")): text(field(q, "spec", "clusterQueue"))
                     for q in local_queues}
    uids = {**by_uid(known_workloads), **by_uid(workloads)}
    rows = [workload_row(js, find_workload(js, workloads), by_jobset.get((meta(js, "namespace"), meta(js, "name")), []),
                         queue_targets, uids, now) for js in jobsets]
    return sort_rows(rows)


def sort_rows(rows: Iterable[WorkloadRow]) -> list[WorkloadRow]:
    """By namespace; then running, admitted, preempted, evicted, pending, failed, finished; then oldest first."""
    return sorted(rows, key=lambda r: (r.namespace, STATE_ORDER.index(r.state), r.created or "~", r.name))


def select_rows(rows: Iterable[WorkloadRow], *, team: str | None = None, queue: str | None = None,
                states: Iterable[State] = (), experiment: str | None = None) -> list[WorkloadRow]:
    """The rows every given filter keeps: team is the ClusterQueue, queue the LocalQueue."""
    wanted = set(states)
    return [r for r in rows
            if (team is None or r.cluster_queue == team) and (queue is None or r.local_queue == queue)
            and (not wanted or r.state in wanted) and (experiment is None or r.experiment == experiment)]


# ---------------------------------------------------------------------------------------------------------------
# `workload list -f json`: its schema (JSON Schema 2020-12), part of the documented interface

WORKLOAD_SCHEMA = closed_object({
    "name": {"type": "string", "description": "the JobSet"},
    "namespace": {"type": "string"},
    "workload": {**NULLABLE_STRING, "description": "Kueue's Workload for the JobSet"},
    "team": {**NULLABLE_STRING, "description": "the ClusterQueue (a team's, in a tpuplane stack)"},
    "clusterQueue": NULLABLE_STRING,
    "localQueue": NULLABLE_STRING,
    "priority": closed_object({"class": NULLABLE_STRING, "value": {"type": ["integer", "null"]}}),
    "state": {"enum": [s.value for s in State]},
    "reason": {**NULLABLE_STRING, "description": "the reason of the condition behind the state (for pending, one of "
                                                 "the pending reasons, or Kueue's own)"},
    "message": NULLABLE_STRING,
    "preemptedBy": {**closed_object({"jobset": {**NULLABLE_STRING, "description": "namespace/name"},
                                     "workloadUID": NULLABLE_STRING, "clusterQueue": NULLABLE_STRING,
                                     "reason": NULLABLE_STRING}), "type": ["object", "null"]},
    "flavors": {"type": "array", "items": {"type": "string"}, "description": "the admitted flavors, TPU first"},
    "pods": closed_object({"running": {"type": "integer", "minimum": 0}, "total": {"type": "integer", "minimum": 0}}),
    "restarts": {"type": "integer", "minimum": 0},
    "createdAt": NULLABLE_STRING,
    "ageSeconds": {"type": ["integer", "null"], "minimum": 0},
    "experiment": NULLABLE_STRING,
    "trial": NULLABLE_STRING,
}, "one workload: a JobSet with its Kueue Workload")
LIST_SCHEMA = document_schema("workload list", "WorkloadList", {"items": {"type": "array", "items": WORKLOAD_SCHEMA}})


def list_json(rows: Iterable[WorkloadRow]) -> dict[str, Any]:
    return {"apiVersion": JSON_API_VERSION, "kind": "WorkloadList", "items": [r.to_json() for r in rows]}
