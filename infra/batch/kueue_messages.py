"""Kueue's words for a workload it cannot admit, read back: which pod set, which flavor refused it, and why.

Kueue 0.19 writes `QuotaReserved=False` with reason `Pending` (the granular reasons `WaitingForQuota`,
`ExceedsMaxQuota`, `NoMatchingFlavor`... only behind its UnadmittedWorkloadsObservability gate, off by default) and
a message that names every pod set it could not place, and every flavor it tried for it (pkg/scheduler/flavorassigner):
  couldn't assign flavors to pod set <ps>: <refusal>, <refusal>; couldn't assign flavors to pod set <ps2>: ...
where each refusal is one of
- `insufficient unused quota for <resource> in flavor <flavor>, <amount> more needed`: it must wait;
- `insufficient quota for <resource> in flavor <flavor>, previously considered podsets requests (<a>) + current
  podset request (<b>) > maximum capacity (<c>)`: more than the queue could ever hold there;
- `untolerated taint <taint> in flavor <flavor>` and `flavor <flavor> doesn't match node affinity`;
- `resource <resource> unavailable in ClusterQueue`: no flavor has the resource at all.
The flavors named for one pod set are alternatives, so what holds the pod set is its least severe flavor (Kueue's
resolveNoFitReason: per flavor the most severe refusal, per pod set the least severe flavor, over pod sets the most
severe; WaitingForQuota < ExceedsMaxQuota < NoMatchingFlavor). One refinement: a flavor with no quota at all for
the resource (`maximum capacity (0)`) is no alternative and is set aside while any other flavor is named. Every
tpuplane ClusterQueue lists its CPU flavor first with zero TPU quota, so Kueue's message for a TPU pod set always
carries that refusal, and Kueue's own rule would call a TPU workload whose selector matches no flavor
ExceedsMaxQuota.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tpuplane.infra.batch.api_objects import quantity

_NAME = r"[^\s,;]+"
SHORT = re.compile(rf"insufficient unused quota for (?P<resource>{_NAME}) in flavor (?P<flavor>{_NAME}), "
                   rf"(?P<more>{_NAME}) more needed")
EXCEEDS = re.compile(rf"insufficient quota for (?P<resource>{_NAME}) in flavor (?P<flavor>{_NAME}), previously "
                     r"considered podsets requests \((?P<previous>[^)]*)\) \+ current podset request "
                     r"\((?P<request>[^)]*)\) > maximum capacity \((?P<most>[^)]*)\)")
TAINT = re.compile(rf"untolerated taint (?P<taint>.+?) in flavor (?P<flavor>{_NAME})")
AFFINITY = re.compile(rf"flavor (?P<flavor>{_NAME}) doesn't match node affinity")
UNCOVERED = re.compile(rf"resource (?P<resource>{_NAME}) unavailable in ClusterQueue")
_POD_SET = re.compile(r"couldn't assign flavors to pod set (?P<pod_set>[^:]+): ")

WAITING_FOR_QUOTA = "WaitingForQuota"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
_SEVERITY = {WAITING_FOR_QUOTA: 1, EXCEEDS_MAX_QUOTA: 2, NO_MATCHING_FLAVOR: 3}


@dataclass(frozen=True)
class PodSetMessage:
    pod_set: str  # "" when the message names none
    text: str


@dataclass(frozen=True)
class Refusal:
    """One flavor's refusal of a pod set (or, with no flavor, a resource the queue does not have)."""

    reason: str  # WaitingForQuota, ExceedsMaxQuota or NoMatchingFlavor
    flavor: str  # "" for an uncovered resource
    found: re.Match[str]

    @property
    def no_capacity(self) -> bool:
        """The flavor has no quota at all for the resource: it could never be the pod set's flavor."""
        return self.reason == EXCEEDS_MAX_QUOTA and quantity(self.found.group("most")) == 0


def pod_set_messages(message: str) -> list[PodSetMessage]:
    """The message split per pod set."""
    starts = list(_POD_SET.finditer(message))
    if not starts:
        return [PodSetMessage("", message)] if message else []
    ends = [m.start() for m in starts[1:]] + [len(message)]
    return [PodSetMessage(m.group("pod_set"), message[m.end():end].rstrip("; ")) for m, end in zip(starts, ends)]


def refusals(text: str) -> list[Refusal]:
    """Every refusal in one pod set's part of the message, in the order Kueue wrote them."""
    found = [Refusal(WAITING_FOR_QUOTA, m.group("flavor"), m) for m in SHORT.finditer(text)]
    found += [Refusal(EXCEEDS_MAX_QUOTA, m.group("flavor"), m) for m in EXCEEDS.finditer(text)]
    found += [Refusal(NO_MATCHING_FLAVOR, m.group("flavor"), m) for m in (*TAINT.finditer(text),
                                                                          *AFFINITY.finditer(text))]
    found += [Refusal(NO_MATCHING_FLAVOR, "", m) for m in UNCOVERED.finditer(text)]
    return sorted(found, key=lambda r: r.found.start())


def holding_refusals(text: str) -> list[Refusal]:
    """What holds the pod set: the refusals of its least severe flavors (after setting aside flavors with no
    quota for the resource), plus any resource no flavor covers, which no flavor can make up for."""
    found = refusals(text)
    uncovered = [r for r in found if not r.flavor]
    by_flavor: dict[str, list[Refusal]] = {}
    for refusal in found:
        if refusal.flavor:
            by_flavor.setdefault(refusal.flavor, []).append(refusal)
    candidates = {f: rs for f, rs in by_flavor.items() if not all(r.no_capacity for r in rs)} or by_flavor
    if not candidates:
        return uncovered
    severity = {f: max(_SEVERITY[r.reason] for r in rs) for f, rs in candidates.items()}
    least = min(severity.values())
    return [r for r in found if r.flavor in candidates and severity[r.flavor] == least] + uncovered


def _pod_set_reason(text: str) -> str:
    holding = holding_refusals(text)
    if any(not r.flavor for r in holding):
        return NO_MATCHING_FLAVOR
    return max((r.reason for r in holding), key=_SEVERITY.__getitem__, default="")


def granular_reason(reason: str, message: str) -> str:
    """Kueue's granular reason for `QuotaReserved=False`, recovered from the message when the condition says only
    `Pending`: the most severe over the pod sets (WaitingForQuota, ExceedsMaxQuota, NoMatchingFlavor), or
    Misconfigured for a queue that does not exist; else the reason as given."""
    if reason not in ("Pending", ""):
        return reason
    found = [r for part in pod_set_messages(message) if (r := _pod_set_reason(part.text))]
    if found:
        return max(found, key=_SEVERITY.__getitem__)
    if "doesn't exist" in message or "not found" in message:
        return "Misconfigured"
    return reason
