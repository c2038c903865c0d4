"""`tpuplane workload status`: a workload's conditions, admission, per-slice pods and recent events, as rows.

A slice is one child Job of a replicated job (`jobset.sigs.k8s.io/job-index`), with `parallelism` pods, one per
VM; its pods are counted by phase. Events are those about the JobSet, its Workload, its child Jobs and its pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tpuplane.infra.batch.api_objects import Obj, field, items, labels, meta, quantity, text, timestamp
from tpuplane.infra.batch.json_documents import JSON_API_VERSION, NULLABLE_STRING, closed_object, document_schema
from tpuplane.infra.batch.pending import Reason
from tpuplane.infra.batch.queue_usage import amount_json, amount_text
from tpuplane.infra.batch.workload import JOB_INDEX_LABEL, REPLICATED_JOB_LABEL
from tpuplane.infra.batch.workload_state import WORKLOAD_SCHEMA, WorkloadRow
from tpuplane.infra.durations import human_duration

_PHASES = ("Running", "Pending", "Succeeded", "Failed")


@dataclass(frozen=True)
class ConditionRow:
    object: str  # JobSet or Workload
    type: str
    status: str
    reason: str
    message: str
    since: str  # lastTransitionTime

    def age(self, now: float) -> str:
        moment = timestamp(self.since)
        return "-" if moment is None else human_duration(now - moment)

    def to_json(self) -> dict[str, Any]:
        return {"object": self.object, "type": self.type, "status": self.status, "reason": self.reason or None,
                "message": self.message or None, "lastTransitionTime": self.since or None}


def condition_rows(jobset: Obj, workload: Obj | None) -> list[ConditionRow]:
    """The Workload's conditions, then the JobSet's, each in the order the controller wrote them."""
    rows = []
    for kind, obj in (("Workload", workload), ("JobSet", jobset)):
        for c in items(field(obj, "status", "conditions")):
            rows.append(ConditionRow(kind, text(c.get("type")), text(c.get("status")), text(c.get("reason")),
                                     text(c.get("message")), text(c.get("lastTransitionTime"))))
    return rows


@dataclass(frozen=True)
class PodSetAdmission:
    name: str
    count: int | None
    flavors: dict[str, str]  # resource -> flavor
    usage: dict[str, Decimal]  # resource -> total of the pod set

    def describe(self) -> str:
        pods = f"{self.count} pods" if self.count is not None else "pods"
        parts = [f"{r} in {f}" + (f" ({amount_text(r, self.usage[r])})" if r in self.usage else "")
                 for r, f in sorted(self.flavors.items())]
        return f"pod set {self.name}: {pods}; " + (", ".join(parts) or "no flavor assigned")


def admission(workload: Obj | None) -> tuple[str, list[PodSetAdmission]] | None:
    """(ClusterQueue, pod sets) of the Workload's admission, or None while it holds none."""
    granted = field(workload, "status", "admission")
    if not isinstance(granted, dict):
        return None
    sets = []
    for a in items(granted.get("podSetAssignments")):
        flavors = a.get("flavors") if isinstance(a.get("flavors"), dict) else {}
        usage = a.get("resourceUsage") if isinstance(a.get("resourceUsage"), dict) else {}
        count = a.get("count")
        sets.append(PodSetAdmission(text(a.get("name")), count if isinstance(count, int) else None,
                                    {text(k): text(v) for k, v in flavors.items()},
                                    {text(k): quantity(v) for k, v in usage.items()}))
    return text(granted.get("clusterQueue")), sets


@dataclass(frozen=True)
class SliceRow:
    job: str  # the replicated job
    index: int  # the slice: its child Job's index
    expected: int
    phases: dict[str, int]  # pod phase -> pods
    restarts: int  # container restarts of its pods

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "slice": self.index, "expectedPods": self.expected,
                "pods": {p.lower(): self.phases.get(p, 0) for p in _PHASES}, "containerRestarts": self.restarts}


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def slice_rows(jobset: Obj, pods: Sequence[Obj]) -> list[SliceRow]:
    """One row per slice the JobSet asks for (replicas of each replicated job), with its pods by phase."""
    grouped: dict[tuple[str, str], list[Obj]] = {}
    for pod in pods:
        pod_labels = labels(pod)
        grouped.setdefault((text(pod_labels.get(REPLICATED_JOB_LABEL)), text(pod_labels.get(JOB_INDEX_LABEL))),
                           []).append(pod)
    rows = []
    for rjob in items(field(jobset, "spec", "replicatedJobs")):
        name = text(rjob.get("name"))
        per_slice = _int(field(rjob, "template", "spec", "parallelism"), 1)
        for index in range(min(_int(rjob.get("replicas"), 1), 10_000)):
            members = grouped.get((name, str(index)), [])
            phases: dict[str, int] = {}
            for pod in members:
                phase = text(field(pod, "status", "phase")) or "Pending"
                phases[phase] = phases.get(phase, 0) + 1
            restarts = sum(_int(s.get("restartCount"), 0) for p in members
                           for s in items(field(p, "status", "containerStatuses")))
            rows.append(SliceRow(name, index, per_slice, phases, restarts))
    return rows


def event_time(event: Obj) -> str:
    return text(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
                or field(event, "metadata", "creationTimestamp"))


def workload_events(events: Iterable[Obj], jobset: Obj, workload: Obj | None, pods: Sequence[Obj]) -> list[Obj]:
    """Events about the JobSet, its Workload, its child Jobs (`<jobset>-<job>-<index>`) and its pods, oldest
    first."""
    name = meta(jobset, "name")
    names = {("JobSet", name), ("Workload", meta(workload, "name") if workload else "")}
    names |= {("Pod", meta(p, "name")) for p in pods}
    jobs = {f"{name}-{text(r.get('name'))}-" for r in items(field(jobset, "spec", "replicatedJobs"))}
    chosen = []
    for event in events:
        kind, obj = text(field(event, "involvedObject", "kind")), text(field(event, "involvedObject", "name"))
        if (kind, obj) in names or (kind == "Job" and any(obj.startswith(j) and obj[len(j):].isdigit() for j in jobs)):
            chosen.append(event)
    return sorted(chosen, key=event_time)


def event_json(event: Obj) -> dict[str, Any]:
    return {"type": text(event.get("type")) or None, "reason": text(event.get("reason")) or None,
            "object": f"{text(field(event, 'involvedObject', 'kind'))}/{text(field(event, 'involvedObject', 'name'))}",
            "message": " ".join(text(event.get("message")).split()) or None,
            "count": _int(event.get("count"), 1), "time": event_time(event) or None}


_AMOUNT = {"type": ["number", "null"], "description": "in the resource's base unit: chips, cores, bytes"}
_COUNT = {"type": "integer", "minimum": 0}
STATUS_SCHEMA = document_schema("workload status", "WorkloadStatus", {
    "workload": WORKLOAD_SCHEMA,
    "conditions": {"type": "array", "description": "the Workload's conditions, then the JobSet's", "items": closed_object({
        "object": {"enum": ["Workload", "JobSet"]}, "type": {"type": "string"}, "status": {"type": "string"},
        "reason": NULLABLE_STRING, "message": NULLABLE_STRING, "lastTransitionTime": NULLABLE_STRING})},
    "admission": {**closed_object({
        "clusterQueue": {"type": "string"},
        "podSets": {"type": "array", "items": closed_object({
            "name": {"type": "string"}, "count": {"type": ["integer", "null"]},
            "flavors": {"type": "object", "additionalProperties": {"type": "string"},
                        "description": "resource -> flavor"},
            "resourceUsage": {"type": "object", "additionalProperties": _AMOUNT,
                              "description": "resource -> the pod set's total"}})}},
        "null while the workload holds no quota"), "type": ["object", "null"]},
    "slices": {"type": "array", "items": closed_object({
        "job": {"type": "string", "description": "the replicated job"},
        "slice": {**_COUNT, "description": "the child Job's index"}, "expectedPods": _COUNT,
        "pods": closed_object({p.lower(): _COUNT for p in _PHASES}, "its pods by phase"),
        "containerRestarts": _COUNT})},
    "events": {"type": "array", "description": "about the JobSet, its Workload, child Jobs and pods, oldest first",
               "items": closed_object({"type": NULLABLE_STRING, "reason": NULLABLE_STRING,
                                       "object": {"type": "string", "description": "Kind/name"},
                                       "message": NULLABLE_STRING, "count": {"type": "integer"},
                                       "time": NULLABLE_STRING})},
    "why": {"type": "array", "description": "what holds the workload, as `workload why` says it",
            "items": closed_object({"kind": {"type": "string", "description": "quota, no-flavor, preempted, "
                                                                              "provisioning, image-pull, ..."},
                                    "text": {"type": "string"}})},
})


def status_json(row: WorkloadRow, jobset: Obj, workload: Obj | None, pods: Sequence[Obj], events: Sequence[Obj],
                reasons: Sequence[Reason]) -> dict[str, Any]:
    granted = admission(workload)
    return {
        "apiVersion": JSON_API_VERSION, "kind": "WorkloadStatus",
        "workload": row.to_json(),
        "conditions": [c.to_json() for c in condition_rows(jobset, workload)],
        "admission": None if granted is None else {
            "clusterQueue": granted[0],
            "podSets": [{"name": p.name, "count": p.count, "flavors": p.flavors,
                         "resourceUsage": {r: amount_json(v) for r, v in p.usage.items()}} for p in granted[1]]},
        "slices": [s.to_json() for s in slice_rows(jobset, pods)],
        "events": [event_json(e) for e in events],
        "why": [{"kind": r.kind, "text": r.text} for r in reasons],
    }
