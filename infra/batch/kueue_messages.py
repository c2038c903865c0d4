"""Kueue's words for a workload it cannot admit, read back: which pod set, which reason, which numbers.

Kueue 0.19 writes `QuotaReserved=False` with reason `Pending` (the granular reasons `WaitingForQuota`,
`ExceedsMaxQuota`, `NoMatchingFlavor`... only behind its UnadmittedWorkloadsObservability gate, off by default) and
a message that names every pod set it could not place (pkg/scheduler/flavorassigner):
  couldn't assign flavors to pod set <ps>: <reason>, <reason>; couldn't assign flavors to pod set <ps2>: ...
where each reason is one of
- `insufficient unused quota for <resource> in flavor <flavor>, <amount> more needed`: it must wait;
- `insufficient quota for <resource> in flavor <flavor>, previously considered podsets requests (<a>) + current
  podset request (<b>) > maximum capacity (<c>)`: more than the queue could ever hold;
- `untolerated taint <taint> in flavor <flavor>` and `flavor <flavor> doesn't match node affinity`;
- `resource <resource> unavailable in ClusterQueue`.
So the granular reason is recovered from the message whatever the gate says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


@dataclass(frozen=True)
class PodSetMessage:
    pod_set: str  # "" when the message names none
    text: str


def pod_set_messages(message: str) -> list[PodSetMessage]:
    """The message split per pod set."""
    starts = list(_POD_SET.finditer(message))
    if not starts:
        return [PodSetMessage("", message)] if message else []
    ends = [m.start() for m in starts[1:]] + [len(message)]
    return [PodSetMessage(m.group("pod_set"), message[m.end():end].rstrip("; ")) for m, end in zip(starts, ends)]


def granular_reason(reason: str, message: str) -> str:
    """Kueue's granular reason for `QuotaReserved=False`, recovered from the message when the condition says only
    `Pending`: ExceedsMaxQuota, WaitingForQuota, NoMatchingFlavor or Misconfigured; else the reason as given."""
    if reason not in ("Pending", ""):
        return reason
    if EXCEEDS.search(message):
        return "ExceedsMaxQuota"
    if UNCOVERED.search(message) or TAINT.search(message) or AFFINITY.search(message):
        return "NoMatchingFlavor"
    if SHORT.search(message):
        return "WaitingForQuota"
    if "doesn't exist" in message or "not found" in message:
        return "Misconfigured"
    return reason
