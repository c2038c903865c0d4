"""Slice groups that scale, and node auto-provisioning (NAP) for TPUs: pure plans and their rules.

A slice group with `autoscaling: {minSlices, maxSlices}` keeps one node pool per slice, as every group does, and
creates `maxSlices` of them. GKE scales a multi-host TPU pool atomically: it holds no node or all of the slice's
("If GKE can't deploy one node in the slice, no nodes in the TPU slice node get deployed",
https://cloud.google.com/kubernetes-engine/docs/concepts/tpus), so each pool autoscales between 0 and its full size,
with per-zone limits (GKE validates a slice against the per-zone maximum) and `location_policy = "ANY"`. The first
`minSlices` pools are held at full size: their floor is their size. Kueue's quota follows the maximum, so jobs are
admitted for slices that do not exist yet and the cluster autoscaler creates them for the pending pods.

Flex-start and queued groups already scale from zero with every pool (GKE's Dynamic Workload Scheduler decides), so
they take no autoscaling range.

NAP (`gcp.container.Cluster.cluster_autoscaling`): GKE creates node pools for pending pods within resource limits.
`cpu` and `memory` limits are required, and the limits count every node of the cluster, not only the pools NAP made
(pulumi-gcp `ClusterClusterAutoscalingArgs`): a limit below what the fleet's own pools reach at their maximum blocks
their scale-up too. TPUs are limited per generation in chips, under the resource type that equals the node label
`cloud.google.com/gke-tpu-accelerator`: `tpu-v4-podslice`, `tpu-v5-lite-podslice`, `tpu-v5p-slice`, `tpu-v6e-slice`
and `tpu7x` are confirmed (Terraform modules and xpk's NAP output); tpu7 is not, so it is refused rather than guessed.
https://cloud.google.com/kubernetes-engine/docs/how-to/node-auto-provisioning
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tpuplane.infra.errors import Problem
from tpuplane.infra.fleet.capacity import capacity_mode
from tpuplane.infra.fleet.catalog import GENERATIONS, TpuSpec
from tpuplane.infra.fleet.machines import machine_shape
from tpuplane.infra.naming import GKE_MAX_NODES

LOCATION_POLICY = "ANY"  # use any zone's stock or reservation; a slice lives in one zone anyway
# Generations whose NAP resource type is confirmed: the accelerator label value (tpu7's is not).
NAP_GENERATIONS = ("v4", "v5e", "v5p", "v6e", "tpu7x")
NAP_AUTOSCALING_PROFILE = "OPTIMIZE_UTILIZATION"  # xpk's: NAP removes idle TPU pools sooner


@dataclass(frozen=True)
class PoolScaling:
    """One slice's node pool: created with `initial_node_count` nodes, autoscaled between min and max per zone."""

    initial_node_count: int
    min_node_count: int
    max_node_count: int
    location_policy: str = LOCATION_POLICY

    @property
    def held(self) -> bool:
        return self.min_node_count > 0


@dataclass(frozen=True)
class SliceGroupScaling:
    """A group of `max_slices` pools, the first `min_slices` held at full size."""

    spec: TpuSpec
    min_slices: int
    max_slices: int

    @property
    def pools(self) -> list[PoolScaling]:
        vms = self.spec.vms_per_slice
        return [PoolScaling(vms if i < self.min_slices else 0, vms if i < self.min_slices else 0, vms)
                for i in range(self.max_slices)]

    @property
    def quota_slices(self) -> int:
        """Kueue admits up to the maximum: the autoscaler brings the missing slices for admitted pods."""
        return self.max_slices

    @property
    def min_chips(self) -> int:
        return self.min_slices * self.spec.chips

    @property
    def max_chips(self) -> int:
        return self.max_slices * self.spec.chips


def slice_range_problems(path: str, *, capacity: str, min_slices: object, max_slices: object,
                         spec: TpuSpec | None = None) -> list[Problem]:
    """The rules of a group's `autoscaling` entry; `path` is that entry's config path or Args field."""
    problems = []
    if capacity_mode(capacity).scales_from_zero:
        return [Problem(path, {"minSlices": min_slices, "maxSlices": max_slices},
                        "no autoscaling range on a flex-start or queued group",
                        f"{capacity} pools already scale from zero, every slice, as GKE provisions them; "
                        "remove autoscaling, or use on-demand, spot or reservation capacity")]
    for key, value, least in (("minSlices", min_slices, 0), ("maxSlices", max_slices, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            problems.append(Problem(f"{path}.{key}", value, f"a whole number of slices, {least} or more"))
    if problems:
        return problems
    assert isinstance(min_slices, int) and isinstance(max_slices, int)
    if min_slices > max_slices:
        problems.append(Problem(f"{path}.minSlices", min_slices, f"at most maxSlices ({max_slices})",
                                "minSlices pools are held at full size, out of maxSlices"))
    if spec is not None and max_slices * spec.vms_per_slice > GKE_MAX_NODES:
        problems.append(Problem(f"{path}.maxSlices", max_slices,
                                f"at most {GKE_MAX_NODES // spec.vms_per_slice} slices of {spec.name} "
                                f"({spec.vms_per_slice} VMs each)", f"a GKE Standard cluster holds {GKE_MAX_NODES} "
                                "nodes by default"))
    return problems


# ---- node auto-provisioning ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceLimit:
    resource_type: str
    minimum: int
    maximum: int


@dataclass(frozen=True)
class PoolReach:
    """What one pool of the fleet can grow to: its machine type and maximum node count (for NAP's cpu and memory
    limits, which count it)."""

    name: str
    machine_type: str
    max_nodes: int


@dataclass(frozen=True)
class AutoprovisioningPlan:
    """The cluster's `cluster_autoscaling` block: limits, where NAP may create pools, and what they run as."""

    resource_limits: tuple[ResourceLimit, ...]
    locations: tuple[str, ...]
    service_account: str
    autoscaling_profile: str = NAP_AUTOSCALING_PROFILE


def accelerator_of(generation: str) -> str:
    return next(g.accelerator for g in GENERATIONS if g.generation == generation)


def fleet_reach(pools: list[PoolReach]) -> tuple[int, int, list[str]]:
    """(vCPUs, memory in GB as NAP counts it, pools whose machine has no known shape) of every pool at its maximum."""
    vcpus = memory_mib = 0
    unknown = []
    for pool in pools:
        shape = machine_shape(pool.machine_type)
        if shape is None:
            unknown.append(pool.name)
            continue
        vcpus += shape.vcpus * pool.max_nodes
        memory_mib += shape.memory_mib * pool.max_nodes
    return vcpus, math.ceil(memory_mib * 2**20 / 10**9), unknown


def autoprovisioning_problems(path: str, *, cpu: object, memory_gb: object, tpu_chips: dict[str, object],
                              pools: list[PoolReach], group_chips: dict[str, int]) -> list[Problem]:
    """The rules of the cluster's `autoprovisioning` entry.

    `tpu_chips` maps a generation (v6e, v5p, ...) to its NAP maximum in chips; `group_chips` the chips the stack's
    own slice groups of each generation reach at their maximum, which the limit must leave room for; `pools` every
    pool of the fleet, for the cpu and memory limits."""
    problems = []
    for key, value in (("cpu", cpu), ("memoryGb", memory_gb)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(Problem(f"{path}.{key}", value, "a whole number, 1 or more",
                                    "GKE requires cpu and memory limits when node auto-provisioning is on; they count "
                                    "every node of the cluster"))
    for generation, chips in tpu_chips.items():
        where = f"{path}.tpuChips.{generation}"
        if generation not in NAP_GENERATIONS:
            hint = ("GKE's NAP resource type for tpu7 is not confirmed" if generation == "tpu7"
                    else "generations as `tpuplane catalog` names them")
            problems.append(Problem(f"{path}.tpuChips", generation, f"one of {', '.join(NAP_GENERATIONS)}", hint))
        elif isinstance(chips, bool) or not isinstance(chips, int) or chips < 1:
            problems.append(Problem(where, chips, "a whole number of chips, 1 or more"))
        elif chips < group_chips.get(generation, 0):
            problems.append(Problem(where, chips, f"at least {group_chips[generation]}",
                                    f"the stack's {generation} slice groups reach {group_chips[generation]} chips at "
                                    "their maximum, and NAP's limits count every node of the cluster"))
    if problems:
        return problems
    vcpus, memory, _ = fleet_reach(pools)
    assert isinstance(cpu, int) and isinstance(memory_gb, int)
    if cpu < vcpus:
        problems.append(Problem(f"{path}.cpu", cpu, f"at least {vcpus}",
                                f"the fleet's own pools reach {vcpus} vCPUs at their maximum; NAP's limit counts them "
                                "and would stop their scale-up"))
    if memory_gb < memory:
        problems.append(Problem(f"{path}.memoryGb", memory_gb, f"at least {memory}",
                                f"the fleet's own pools reach {memory} GB at their maximum; NAP's limit counts them"))
    return problems


def plan_autoprovisioning(*, cpu: int, memory_gb: int, tpu_chips: dict[str, int], locations: list[str],
                          service_account: str) -> AutoprovisioningPlan:
    """NAP's limits (checked inputs: `autoprovisioning_problems`), TPU generations sorted by resource type."""
    limits = [ResourceLimit("cpu", 0, cpu), ResourceLimit("memory", 0, memory_gb)]
    limits += sorted((ResourceLimit(accelerator_of(g), 0, chips) for g, chips in tpu_chips.items()),
                     key=lambda limit: limit.resource_type)
    return AutoprovisioningPlan(tuple(limits), tuple(sorted(locations)), service_account)
