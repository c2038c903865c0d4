"""Why a workload is not running, in plain words: what `tpuplane workload why` (and `status`) prints.

Everything is read from objects as the API server returns them: the JobSet, its Kueue Workload (conditions,
admission checks), its pods, the ClusterQueues (for the quota numbers, `tpuplane.infra.batch.queue_usage`), the
other Workloads (who holds the quota, who preempted), and, when the nodes could be read, the scheduling check run
on the cluster's own queues and node pools (`tpuplane.infra.batch.cluster_facts`). Kueue's own messages are the
source: `QuotaReserved=False` carries one per pod set (read by `tpuplane.infra.batch.kueue_messages`), and
`LocalQueue X doesn't exist`, `ClusterQueue X is inactive`... when the queue itself is the problem.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field as dataclass_field
from decimal import Decimal

from tpuplane.infra.batch.api_objects import Obj, condition, field, is_true, items, labels, meta, quantity, text
from tpuplane.infra.batch.kueue import PROVISIONING_CONTROLLER
from tpuplane.infra.batch.kueue_messages import (
    EXCEEDS_MAX_QUOTA,
    NO_MATCHING_FLAVOR,
    TAINT,
    WAITING_FOR_QUOTA,
    PodSetMessage,
    Refusal,
    holding_refusals,
    pod_set_messages,
)
from tpuplane.infra.batch.queue_usage import QueueBook, amount_text
from tpuplane.infra.batch.schedule_check import NodePoolFacts, ScheduleCheck, selects
from tpuplane.infra.batch.workload import QUEUE_LABEL
from tpuplane.infra.batch.workload_state import Preemption, State, parse_preemption, preemptor_name, workload_standing

_PULL_ERRORS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
_EVICTION_HINTS = {
    "PodsReadyTimeout": "its pods were not all ready within Kueue's waitForPodsReady timeout; Kueue requeues it",
    "AdmissionCheck": "an admission check turned it down after admission (e.g. its ProvisioningRequest's capacity "
                      "was revoked)",
    "ClusterQueueStopped": "its ClusterQueue was stopped (spec.stopPolicy); it waits until the queue runs again",
    "LocalQueueStopped": "its LocalQueue was stopped (spec.stopPolicy); it waits until the queue runs again",
    "Deactivated": "its Workload was deactivated (spec.active: false, e.g. after too many requeues); it stays "
                   "evicted until reactivated or deleted",
    "NodeFailures": "nodes its pods ran on failed; Kueue requeues it",
}
_HOLDERS_SHOWN = 5


@dataclass(frozen=True)
class Reason:
    """One explanation: `kind` for scripts and tests, `text` for people."""

    kind: str  # quota, exceeds-quota, no-flavor, uncovered-resource, unschedulable, preempted, evicted,
    #            provisioning, admission-check, image-pull, crash-loop, queue, not-managed, no-workload, waiting,
    #            scheduling-check, not-pending
    text: str


@dataclass(frozen=True)
class WorkloadFacts:
    """What was read about one workload; the optional parts are None or empty when they could not be read."""

    jobset: Obj
    workload: Obj | None
    pods: Sequence[Obj] = ()
    book: QueueBook | None = None
    workloads: Sequence[Obj] = ()  # every Workload readable (holders of quota, preemptors)
    admission_checks: Mapping[str, str] = dataclass_field(default_factory=dict)  # name -> controllerName
    check: ScheduleCheck | None = None  # the scheduling check on the cluster's facts
    pools: Sequence[NodePoolFacts] = ()


# ---------------------------------------------------------------------------------------------------------------
# Quota


def _cluster_queue(facts: WorkloadFacts) -> str:
    """The workload's ClusterQueue: its admission's, else its LocalQueue's, else the check's."""
    local = (meta(facts.jobset, "namespace"), text(field(facts.workload, "spec", "queueName")))
    return (text(field(facts.workload, "status", "admission", "clusterQueue"))
            or next((lq.cluster_queue for lq in (facts.book.local_queues if facts.book else [])
                     if (lq.namespace, lq.name) == local), "")
            or (facts.check.cluster_queue or "" if facts.check is not None else ""))


def _queue_words(facts: WorkloadFacts) -> str:
    queue = _cluster_queue(facts)
    return f"ClusterQueue {queue}" if queue else "its ClusterQueue"


def _holders(facts: WorkloadFacts, queues: set[str], flavor: str, resource: str) -> list[str]:
    """Workloads holding `resource` quota of `flavor` in `queues`, the biggest first."""
    held = []
    for other in facts.workloads:
        if (meta(other, "uid") and meta(other, "uid") == meta(facts.workload or {}, "uid")) \
                or not is_true(other, "QuotaReserved") or is_true(other, "Finished"):
            continue
        queue = text(field(other, "status", "admission", "clusterQueue"))
        if queue not in queues:
            continue
        amount = sum((quantity(field(a, "resourceUsage", resource) or 0)
                      for a in items(field(other, "status", "admission", "podSetAssignments"))
                      if text(field(a, "flavors", resource)) == flavor), Decimal(0))
        if amount:
            owner = next((r for r in items(field(other, "metadata", "ownerReferences")) if r.get("controller")), {})
            priority = text(field(other, "spec", "priorityClassRef", "name")) or str(field(other, "spec", "priority") or 0)
            held.append((amount, f"{meta(other, 'namespace')}/{text(owner.get('name')) or meta(other, 'name')} "
                                 f"({amount_text(resource, amount)}, {priority}, ClusterQueue {queue})"))
    held.sort(key=lambda h: (-h[0], h[1]))
    shown = [h for _, h in held[:_HOLDERS_SHOWN]]
    return shown + ([f"and {len(held) - _HOLDERS_SHOWN} more"] if len(held) > _HOLDERS_SHOWN else [])


def _quota_reason(facts: WorkloadFacts, pod_set: str, found: re.Match[str]) -> Reason:
    resource, flavor, more = found.group("resource"), found.group("flavor"), found.group("more")
    queue = _cluster_queue(facts)
    lead = f"pod set {pod_set}: " if pod_set else ""
    words = [f"{lead}waiting for quota: it needs {more} more {resource} in flavor {flavor} than "
             f"{_queue_words(facts)} can give it now."]
    book = facts.book
    if book is not None and queue in book.cluster_queues:
        cq, key = book.cluster_queues[queue], (flavor, resource)
        quota = cq.quotas.get(key)
        if quota is not None:
            limit = f", borrowing limit {amount_text(resource, quota.borrowing_limit)}" \
                if quota.borrowing_limit is not None else ""
            words.append(f"{queue} has {amount_text(resource, quota.nominal)} nominal, "
                         f"{amount_text(resource, quota.used)} in use ({amount_text(resource, quota.borrowed)} "
                         f"borrowed){limit}.")
            if cq.cohort:
                lend = book.from_cohort(queue, key)
                others = book.free_in_others(queue, key)
                capped = f"; its borrowing limit allows {amount_text(resource, lend)}" if lend < others else ""
                words.append(f"Its cohort {cq.cohort} could lend {amount_text(resource, lend)} more now (the other "
                             f"ClusterQueues of the cohort have {amount_text(resource, others)} free{capped}).")
            else:
                words.append("It is in no cohort, so it cannot borrow.")
        members = {q.name for q in book.members(cq.cohort)} if cq.cohort else {queue}
        holders = _holders(facts, members, flavor, resource)
        if holders:
            words.append(f"Holding {flavor}: {', '.join(holders)}.")
    words.append("It is admitted once that much quota is released (a workload finishes or is preempted).")
    return Reason("quota", " ".join(words))


def _exceeds_reason(facts: WorkloadFacts, pod_set: str, found: re.Match[str]) -> Reason:
    resource, flavor = found.group("resource"), found.group("flavor")
    previous = found.group("previous")
    earlier = f" (plus {previous} for its earlier pod sets)" if quantity(previous) else ""
    lead = f"pod set {pod_set}" if pod_set else "it"
    return Reason("exceeds-quota", (
        f"{lead} asks for {found.group('request')} {resource} in flavor {flavor}{earlier}, more than "
        f"{_queue_words(facts)} could ever hold there ({found.group('most')}: its nominal quota "
        f"plus all its cohort could lend). It will never be admitted: ask for fewer slices or chips, or give the "
        f"queue more quota."))


# ---------------------------------------------------------------------------------------------------------------
# Node selectors: what a pod set asks for and what the pools offer


def _pod_templates(jobset: Obj) -> dict[str, Obj]:
    """Pod set name (the replicated job's) -> its pod spec."""
    return {text(r.get("name")): field(r, "template", "spec", "template", "spec") or {}
            for r in items(field(jobset, "spec", "replicatedJobs"))}


def _selector_keys(pod: Obj) -> list[str]:
    keys = list((pod.get("nodeSelector") or {}) if isinstance(pod.get("nodeSelector"), Mapping) else {})
    for term in items(field(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                            "nodeSelectorTerms")):
        keys += [text(e.get("key")) for e in items(term.get("matchExpressions"))]
    return list(dict.fromkeys(keys))


def _selector_text(pod: Obj) -> str:
    parts = [f"{k}={v}" for k, v in sorted(((pod.get("nodeSelector") or {}) if isinstance(pod.get("nodeSelector"),
                                                                                            Mapping) else {}).items())]
    for term in items(field(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                            "nodeSelectorTerms")):
        for e in items(term.get("matchExpressions")):
            values = ",".join(text(v) for v in (e.get("values") or []))
            parts.append(f"{text(e.get('key'))} {text(e.get('operator'))} {values}".rstrip())
    return "; ".join(parts) or "no node selector"


def selector_offer(pod: Obj, pools: Sequence[NodePoolFacts]) -> str:
    """`Its node selector: K=V. Node pools: a, b have K=V1; c has no K`: per pool, the labels it fails on."""
    keys = _selector_keys(pod)
    wanted = f"Its node selector: {_selector_text(pod)}."
    if not keys or not pools:
        return wanted
    offers: dict[str, list[str]] = {}
    for pool in pools:
        misses = [f"{k}={pool.labels[k]}" if k in pool.labels else f"no {k}" for k in keys
                  if not selects(pod, pool.labels, keys=[k])]
        offers.setdefault(", ".join(misses) or "every label it selects", []).append(pool.name)
    shown = "; ".join(f"{', '.join(names[:4])}{f' (+{len(names) - 4})' if len(names) > 4 else ''} "
                      f"{'has' if len(names) == 1 else 'have'} {labels_text}"
                      for labels_text, names in sorted(offers.items(), key=lambda o: o[1][0]))
    return f"{wanted} Node pools: {shown}."


def _no_flavor_reason(facts: WorkloadFacts, pod_set: str, refused: Sequence[Refusal]) -> Reason:
    words = [f"flavor {r.flavor} has taint {r.found.group('taint')}, which its pods do not tolerate"
             if r.found.re is TAINT else f"flavor {r.flavor} does not match its node selector/affinity"
             for r in refused]
    pod = _pod_templates(facts.jobset).get(pod_set) or next(iter(_pod_templates(facts.jobset).values()), {})
    lead = f"pod set {pod_set}: " if pod_set else ""
    return Reason("no-flavor", f"{lead}no flavor of {_queue_words(facts)} fits: {'; '.join(words)}. "
                               f"{selector_offer(pod, facts.pools)}")


def _uncovered_reason(facts: WorkloadFacts, pod_set: str, refusal: Refusal) -> Reason:
    return Reason("uncovered-resource", f"pod set {pod_set or '?'} requests {refusal.found.group('resource')}, for "
                                        f"which {_queue_words(facts)} has no quota: Kueue never admits it. Drop the "
                                        "request, or add the resource to a resource group of the queue.")


def _pod_set_reasons(facts: WorkloadFacts, part: PodSetMessage) -> list[Reason]:
    """What holds one pod set (`kueue_messages.holding_refusals`): the flavors that refuse it outright are left
    out while another flavor only lacks free quota."""
    holding = holding_refusals(part.text)
    found = [_exceeds_reason(facts, part.pod_set, r.found) for r in holding if r.reason == EXCEEDS_MAX_QUOTA]
    found += [_quota_reason(facts, part.pod_set, r.found) for r in holding if r.reason == WAITING_FOR_QUOTA]
    mismatched = [r for r in holding if r.reason == NO_MATCHING_FLAVOR and r.flavor]
    if mismatched:
        found.append(_no_flavor_reason(facts, part.pod_set, mismatched))
    return found + [_uncovered_reason(facts, part.pod_set, r) for r in holding if not r.flavor]


def _pending_reasons(facts: WorkloadFacts, reserved: Obj) -> list[Reason]:
    message = text(reserved.get("message"))
    reason = text(reserved.get("reason"))
    found = [r for part in pod_set_messages(message) for r in _pod_set_reasons(facts, part)]
    if found:
        return found
    if reason in ("Misconfigured", "Inadmissible") or "doesn't exist" in message or "not found" in message:
        return [Reason("queue", f"{message or reason}: Kueue cannot queue it. Submit to a LocalQueue that exists "
                                "and points to an existing ClusterQueue (`tpuplane queues` lists them).")]
    if reason == "Suspended" or "inactive" in message or "stopped" in message:
        return [Reason("queue", f"{message or reason}: its queue is stopped or inactive (a stopPolicy, or a "
                                "ClusterQueue whose flavors or admission checks are missing).")]
    if reason == "WaitingForPreemptedWorkloads":
        return [Reason("waiting", "Kueue preempted lower-priority workloads to make room for it and waits for them "
                                  "to release their quota.")]
    return [Reason("waiting", f"queued: {message or reason or 'waiting for Kueue to evaluate it'}.")]


def _queued_reason(facts: WorkloadFacts) -> Reason:
    """No QuotaReserved condition yet: Kueue has not tried it (it tries the head of each queue, and a BestEffortFIFO
    queue whose head cannot be admitted leaves the workloads behind it untried until quota frees up)."""
    queue = _cluster_queue(facts)
    book = facts.book
    pending = book.cluster_queues[queue].pending if book is not None and queue in book.cluster_queues else 0
    behind = (f" ClusterQueue {queue} has {pending} pending workloads; Kueue tries them in priority order, then "
              "oldest first, and tries the next ones when quota frees up.") if pending > 1 else ""
    return Reason("waiting", f"queued: Kueue has not tried to admit it yet.{behind}")


def _admission_check_reasons(facts: WorkloadFacts) -> list[Reason]:
    found = []
    for check in items(field(facts.workload, "status", "admissionChecks")):
        state = text(check.get("state"))
        if state == "Ready":
            continue
        name, message = text(check.get("name")), text(check.get("message"))
        if facts.admission_checks.get(name) == PROVISIONING_CONTROLLER:
            found.append(Reason("provisioning", (
                f"quota is reserved; admission check {name} ({state}) waits for its ProvisioningRequest: GKE "
                f"provisions the nodes of a queued (DWS) flavor when capacity is found, and Kueue admits the "
                f"workload then. {message or 'No capacity found yet.'}")))
        else:
            found.append(Reason("admission-check", f"quota is reserved; admission check {name} is {state}"
                                                   f"{': ' + message if message else ''}."))
    return found


# ---------------------------------------------------------------------------------------------------------------
# Pods


def _grouped(cases: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """(what, pod) pairs grouped by what."""
    grouped: dict[str, list[str]] = {}
    for what, pod in cases:
        grouped.setdefault(what, []).append(pod)
    return grouped


def _pods_text(pods: list[str]) -> str:
    return f"pod {pods[0]}" if len(pods) == 1 else f"{len(pods)} pods (e.g. {sorted(pods)[0]})"


def pod_reasons(facts: WorkloadFacts) -> list[Reason]:
    """Images that will not pull, crash loops, and pods kube-scheduler cannot place."""
    pulls, crashes, unplaced = [], [], []
    for pod in facts.pods:
        name = meta(pod, "name")
        images = {text(c.get("name")): text(c.get("image"))
                  for c in items(field(pod, "spec", "containers")) + items(field(pod, "spec", "initContainers"))}
        for status in items(field(pod, "status", "containerStatuses")) + items(field(pod, "status",
                                                                                     "initContainerStatuses")):
            waiting = field(status, "state", "waiting") or {}
            reason = text(field(waiting, "reason"))
            container = text(status.get("name"))
            if reason in _PULL_ERRORS:
                image = images.get(container) or text(status.get("image"))
                pulls.append((f"image {image} will not pull ({reason}: "
                              f"{' '.join(text(field(waiting, 'message')).split()) or 'no message'})", name))
            elif reason == "CrashLoopBackOff":
                last = field(status, "lastState", "terminated") or {}
                crashes.append((f"container {container} keeps crashing (last exit code "
                                f"{text(field(last, 'exitCode')) or '?'}, {text(field(last, 'reason')) or 'no reason'})",
                                name))
        scheduled = condition(pod, "PodScheduled")
        if text(field(scheduled, "status")) == "False" and text(field(scheduled, "reason")) == "Unschedulable":
            unplaced.append((" ".join(text(field(scheduled, "message")).split()), name))
    found = [Reason("image-pull", f"{what} on {_pods_text(pods)}. Check the image name and tag, and that the "
                                  "nodes' service account may read the registry.")
             for what, pods in _grouped(pulls).items()]
    found += [Reason("crash-loop", f"{what} on {_pods_text(pods)}: see `tpuplane workload logs`.")
              for what, pods in _grouped(crashes).items()]
    templates = _pod_templates(facts.jobset)
    for what, pods in _grouped(unplaced).items():
        pod = next(iter(templates.values()), {})
        found.append(Reason("unschedulable", f"kube-scheduler cannot place {_pods_text(pods)}: {what.rstrip('.')}. "
                                             f"{selector_offer(pod, facts.pools)}"))
    return found


# ---------------------------------------------------------------------------------------------------------------
# The whole explanation


def _check_reasons(facts: WorkloadFacts) -> list[Reason]:
    if facts.check is None or facts.check.ok:
        return []
    return [Reason("scheduling-check", f"the scheduling check on the cluster's queues and node pools: {problem}")
            for problem in facts.check.all_problems()]


def _preemption_reason(facts: WorkloadFacts, preemption: Preemption) -> Reason:
    known = {meta(w, "uid"): w for w in facts.workloads if meta(w, "uid")}
    by = preemptor_name(preemption, known)
    who = by or (f"a workload of ClusterQueue {preemption.cluster_queue}" if preemption.cluster_queue
                 else "another workload")
    uid = f" (Workload UID {preemption.uid})" if preemption.uid else ""
    return Reason("preempted", f"preempted by {who}{uid} due to {preemption.why or preemption.reason}; Kueue "
                               "requeued it and admits it again once quota is free.")


def explain(facts: WorkloadFacts) -> list[Reason]:
    """Why the workload is where it is; for a pending one, every reason found (never an empty list)."""
    standing = workload_standing(facts.jobset, facts.workload, facts.pods)
    state = standing.state
    if state in (State.FINISHED, State.FAILED):
        detail = f": {standing.reason}{' - ' + standing.message if standing.message else ''}" if standing.reason else ""
        return [Reason("not-pending", f"it has {'finished' if state is State.FINISHED else 'failed'}{detail}.")]
    found: list[Reason] = []
    if state is State.PREEMPTED:
        preemption = parse_preemption(facts.workload)
        if preemption is not None:
            found.append(_preemption_reason(facts, preemption))
    elif state is State.EVICTED:
        hint = _EVICTION_HINTS.get(standing.reason, "")
        found.append(Reason("evicted", f"evicted ({standing.reason}): {hint or standing.message or 'no message'}."))
    if facts.workload is None:
        if QUEUE_LABEL not in labels(facts.jobset):
            found.append(Reason("not-managed", f"it has no {QUEUE_LABEL} label, so Kueue does not manage it: no "
                                               "quota applies and kube-scheduler alone places its pods."))
        elif facts.check is not None and not facts.check.ok:
            found.append(Reason("no-workload", "Kueue has made no Workload for it: the scheduling check below says "
                                               "why."))
        else:
            found.append(Reason("no-workload", "Kueue has not created its Workload yet: if this lasts, check that "
                                               "the Kueue controller runs and manages JobSets in this namespace."))
    elif not is_true(facts.workload, "QuotaReserved") and state is not State.EVICTED:
        reserved = condition(facts.workload, "QuotaReserved")
        found += _pending_reasons(facts, reserved) if reserved is not None else [_queued_reason(facts)]
    elif not is_true(facts.workload, "Admitted"):
        found += _admission_check_reasons(facts)
    found += pod_reasons(facts)
    if state in (State.PENDING, State.PREEMPTED) or any(r.kind in ("unschedulable", "no-flavor") for r in found):
        found += _check_reasons(facts)
    if not found:
        pods = f" ({sum(1 for p in facts.pods if field(p, 'status', 'phase') == 'Running')} pods running)" \
            if state is State.RUNNING else ""
        found.append(Reason("not-pending", f"it is not waiting: it is {state.value}{pods}."))
    return found
