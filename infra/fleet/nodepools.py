"""Planning of TPU slice pools: every GKE node pool field decided as data, before any resource exists.

One pool per slice, named by slice index, so resizing 4 -> 8 adds pools 4..7 and 8 -> 6 removes the last two;
nothing else is touched. The capacity-mode rules follow GKE (and Cluster Toolkit's preconditions): each plan
here is valid by construction, and `TpuSlicePool` turns it into `gcp.container.NodePool` arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from tpuplane.infra.fleet.autoscaling import PoolScaling, SliceGroupScaling, from_zero
from tpuplane.infra.fleet.capacity import capacity_mode
from tpuplane.infra.fleet.catalog import TpuSpec
from tpuplane.infra.fleet.pools import Capacity, SlicePoolSpec
from tpuplane.infra.naming import workload_policy_name
from tpuplane.infra.fleet.networking import ACCELERATOR_NETWORK_PROFILE, accelerator_networking, networking_labels
from tpuplane.infra.fleet.scheduling import DEDICATED_KEY, dedicated_taint, pool_node_labels, pool_taints, slice_chips

RESERVATION_KEY = "compute.googleapis.com/reservation-name"
TPU_MAX_PODS_PER_NODE = 15  # one workload pod per TPU VM plus daemons; saves pod IP space at scale (xpk)


@dataclass(frozen=True)
class UpgradePlan:
    """A slice cannot surge: its reservation or stock has no spare VM, and COMPACT rules out blue-green.
    Upgrade one node at a time in place (Cluster Toolkit's setting for TPU pools)."""

    strategy: str = "SURGE"
    max_surge: int | None = 0
    max_unavailable: int | None = 1


# Flex-start and queued nodes live for one run and are never upgraded in place: GKE's dedicated strategy for
# them is SHORT_LIVED (new nodes come up on the new version), which takes no surge settings.
SHORT_LIVED_UPGRADE = UpgradePlan(strategy="SHORT_LIVED", max_surge=None, max_unavailable=None)


@dataclass(frozen=True)
class ReservationAffinity:
    consume_reservation_type: str  # NO_RESERVATION | SPECIFIC_RESERVATION
    key: str | None = None
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkloadPolicyPlan:
    """tpu7/tpu7x multi-host slices: a HIGH_THROUGHPUT workload policy instead of COMPACT placement."""

    name: str
    accelerator_topology: str


@dataclass(frozen=True)
class SlicePoolPlan:
    """One GKE node pool = one TPU slice."""

    group: str
    index: int
    name: str
    machine_type: str
    node_count: int | None  # static size; None when the pool autoscales
    autoscaling: PoolScaling | None  # flex-start and queued pools, and the pools of an autoscaled group
    placement_type: str | None  # COMPACT for v4/v5e/v5p/v6e multi-host
    tpu_topology: str | None  # multi-host only: single-host pools must carry none
    workload_policy: WorkloadPolicyPlan | None
    spot: bool
    flex_start: bool
    max_run_duration: str | None
    queued_provisioning: bool
    reservation_affinity: ReservationAffinity | None
    labels: dict[str, str]
    taints: list[dict[str, str]]
    auto_repair: bool
    auto_upgrade: bool
    upgrade: UpgradePlan
    maintenance_interval: str
    max_pods_per_node: int
    disk_size_gb: int | None
    disk_type: str | None
    chips: int
    accelerator_network_profile: str | None = None  # "auto": GKE attaches the machine's extra NICs


@dataclass(frozen=True)
class PoolGroupPlan:
    """A pool group: its slices' pools and the policy they share."""

    config: SlicePoolSpec
    spec: TpuSpec
    workload_policy: WorkloadPolicyPlan | None
    pools: list[SlicePoolPlan] = field(default_factory=list)

    @property
    def chips(self) -> int:
        return slice_chips(self.spec, self.config.slices)


def _reservation_affinity(pool: SlicePoolSpec) -> ReservationAffinity | None:
    """None is GKE's default (any matching reservation); spot, flex-start and queued must say NO_RESERVATION."""
    affinity = capacity_mode(pool.capacity.value).reservation_affinity
    if affinity == "SPECIFIC_RESERVATION":
        return ReservationAffinity(affinity, RESERVATION_KEY, (pool.reservation or "",))
    return ReservationAffinity(affinity) if affinity else None


def plan_slice_group(pool: SlicePoolSpec) -> PoolGroupPlan:
    """Every pool of one group of slices, on any cluster: what `TpuSlicePool` creates. Pure: the same Args give
    the same plan. The first `dedicated_slices` are held by `dedicated_owner` (a Shared Pathways Service) outside
    Kueue."""
    spec, dedicated_owner = pool.spec, pool.dedicated_owner
    policy = (WorkloadPolicyPlan(workload_policy_name(pool.plain_cluster_name or "", pool.name), spec.topology)
              if spec.needs_workload_policy else None)
    mode = capacity_mode(pool.capacity.value)
    per_run = mode.scales_from_zero  # GKE fills the pool per run, and never repairs its nodes
    scaling = (SliceGroupScaling(spec, pool.autoscaling.min_slices, pool.autoscaling.max_slices).pools
               if pool.autoscaling is not None else [from_zero(spec) if per_run else None] * pool.slices)
    dedicated = pool.dedicated_slices if dedicated_owner else 0

    def labels(i: int) -> dict[str, str]:
        own = {DEDICATED_KEY: dedicated_owner} if i < dedicated else {}
        return dict(sorted({**pool_node_labels(pool.capacity.value), **networking_labels(pool), **own}.items()))

    def taints(i: int) -> list[dict[str, str]]:
        return pool_taints() + ([dedicated_taint(dedicated_owner)] if i < dedicated else [])

    pools = [
        SlicePoolPlan(
            group=pool.name,
            index=i,
            name=name,
            machine_type=spec.machine_type,
            node_count=None if scaling[i] else spec.vms_per_slice,
            autoscaling=scaling[i],
            placement_type="COMPACT" if spec.multi_host and policy is None else None,
            tpu_topology=spec.topology if spec.multi_host else None,
            workload_policy=policy,
            spot=pool.capacity is Capacity.SPOT,
            flex_start=pool.capacity is Capacity.FLEX_START,
            max_run_duration=pool.max_run_duration,
            queued_provisioning=pool.capacity is Capacity.QUEUED,
            reservation_affinity=_reservation_affinity(pool),
            labels=labels(i),
            taints=taints(i),
            # Flex-start and queued nodes are released, not repaired (GKE rejects auto-repair on them).
            auto_repair=not per_run,
            auto_upgrade=True,  # required by release channels; freeze upgrades with a maintenance exclusion
            upgrade=SHORT_LIVED_UPGRADE if mode.upgrade_strategy == "SHORT_LIVED" else UpgradePlan(),
            maintenance_interval=pool.maintenance_interval,
            max_pods_per_node=TPU_MAX_PODS_PER_NODE,
            disk_size_gb=pool.disk_size_gb,
            disk_type=pool.disk_type,
            chips=slice_chips(spec, 1),
            accelerator_network_profile=ACCELERATOR_NETWORK_PROFILE if accelerator_networking(pool) else None,
        )
        for i, name in enumerate(pool.node_pool_names)
    ]
    return PoolGroupPlan(pool, spec, policy, pools)


def plan_tpu_pools(pools: Iterable[SlicePoolSpec]) -> list[PoolGroupPlan]:
    return [plan_slice_group(pool) for pool in pools]


def chips_by_generation(groups: list[PoolGroupPlan]) -> dict[str, int]:
    """Total TPU chips per generation: the stack output platform teams watch."""
    totals: dict[str, int] = {}
    for group in groups:
        totals[group.spec.generation] = totals.get(group.spec.generation, 0) + group.chips
    return dict(sorted(totals.items()))
