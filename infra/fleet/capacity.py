"""Every capacity mode in one table: what GKE requires of its node pools and what tpuplane derives from it (node
labels and taints, Kueue flavor name and order, config rules, upgrades). A new capacity mode is one new row.

Keyed by the config value (`tpuplane:tpuPools[].capacity`); the fields say why they differ between modes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

QUEUED_LABEL = "cloud.google.com/gke-queued"
SPOT_LABEL = "cloud.google.com/gke-spot"
FLEX_START_LABEL = "cloud.google.com/gke-flex-start"  # GKE sets it on flex-start nodes; tpuplane selects by capacity


@dataclass(frozen=True)
class CapacityMode:
    name: str
    kueue_order: int  # Kueue tries a shape's flavors in this order: paid for first, what may be taken back last
    gke_labels: Mapping[str, str] = field(default_factory=dict)  # GKE sets them on the nodes; pods select them
    pool_labels: Mapping[str, str] = field(default_factory=dict)  # the pool must declare them for pods to select
    node_taints: tuple[Mapping[str, str], ...] = ()  # besides the TPU taint (pod-side effect names)
    scales_from_zero: bool = False  # nodes come per run: autoscaling 0..VMs per slice, never repaired
    reservation_affinity: str | None = "NO_RESERVATION"  # None: GKE's default (any matching reservation)
    run_duration: bool = False  # `maxRunDuration` may bound a node's life
    periodic_maintenance: bool = False  # may take PERIODIC maintenance (a reservation that has it)
    upgrade_strategy: str = "SURGE"
    provisioning_request: bool = False  # admitted through Kueue's ProvisioningRequest check (DWS)

    @property
    def flavor_suffix(self) -> str:
        """On-demand flavors carry the bare shape name (xpk's); the others name their mode."""
        return "" if self.name == "on-demand" else f"-{self.name}"


CAPACITY_MODES: dict[str, CapacityMode] = {mode.name: mode for mode in (
    CapacityMode("reservation", kueue_order=0, reservation_affinity="SPECIFIC_RESERVATION",
                 periodic_maintenance=True),
    CapacityMode("on-demand", kueue_order=1, reservation_affinity=None, periodic_maintenance=True),
    CapacityMode("flex-start", kueue_order=2, scales_from_zero=True, run_duration=True,
                 upgrade_strategy="SHORT_LIVED"),
    CapacityMode("spot", kueue_order=3, gke_labels={SPOT_LABEL: "true"}),
    CapacityMode("queued", kueue_order=4, gke_labels={QUEUED_LABEL: "true"}, pool_labels={QUEUED_LABEL: "true"},
                 node_taints=({"key": QUEUED_LABEL, "value": "true", "effect": "NoSchedule"},),
                 scales_from_zero=True, run_duration=True, upgrade_strategy="SHORT_LIVED",
                 provisioning_request=True),
)}


def capacity_mode(name: str) -> CapacityMode:
    """The row of a capacity mode; KeyError for a name config validation has already refused."""
    return CAPACITY_MODES[name]
