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
from typing import Annotated

from pydantic import Field, StrictInt

from tpuplane.infra.args import Source
from tpuplane.infra.errors import Problem
from tpuplane.infra.fleet.capacity import capacity_mode
from tpuplane.infra.fleet.catalog import GENERATIONS, TpuSpec
from tpuplane.infra.fleet.machines import machine_shape
from tpuplane.infra.model import Allowed, ConfigModel, Hint
from tpuplane.infra.naming import GKE_MAX_NODES

LOCATION_POLICY = "ANY"  # use any zone's stock or reservation; a slice lives in one zone anyway
# Generations whose NAP resource type is confirmed: the accelerator label value (tpu7's is not).
NAP_GENERATIONS = ("v4", "v5e", "v5p", "v6e", "tpu7x")
NAP_AUTOSCALING_PROFILE = "OPTIMIZE_UTILIZATION"  # xpk's: NAP removes idle TPU pools sooner


class SliceAutoscaling(ConfigModel):
    """`SliceAutoscalingArgs`, a pool group's `autoscaling`: `max_slices` pools, the first `min_slices` held."""

    min_slices: Annotated[int, Hint("slices held at full size; the others scale from zero")] = Field(
        ge=0, le=GKE_MAX_NODES)
    max_slices: Annotated[int, Hint("the group's node pools, one per slice")] = Field(ge=1, le=GKE_MAX_NODES)


class Autoprovisioning(ConfigModel):
    """`AutoprovisioningArgs`, the cluster's `autoprovisioning`: node auto-provisioning's limits."""

    cpu: Annotated[int, Hint("vCPUs of every node of the cluster together")] = Field(ge=1, le=10**9)
    memory_gb: Annotated[int, Hint("GB of every node of the cluster together")] = Field(ge=1, le=10**10)
    tpu_chips: Annotated[dict[str, Annotated[StrictInt, Field(ge=1, le=10**9)]],
                         Allowed("a mapping of TPU generations (v6e, v5p, ...) to chips")] = {}


@dataclass(frozen=True)
class PoolScaling:
    """One slice's node pool: created with `initial_node_count` nodes, autoscaled between min and max per zone (GKE
    validates a multi-host slice against the per-zone maximum, not the total)."""

    initial_node_count: int
    min_node_count: int
    max_node_count: int
    location_policy: str = LOCATION_POLICY

    @property
    def held(self) -> bool:
        return self.min_node_count > 0


def from_zero(spec: TpuSpec) -> PoolScaling:
    """A pool GKE fills per run (flex-start, queued): no node until a slice is wanted."""
    return PoolScaling(0, 0, spec.vms_per_slice)


@dataclass(frozen=True)
class SliceGroupScaling:
    """A group of `max_slices` pools, the first `min_slices` held at full size."""

    spec: TpuSpec
    min_slices: int
    max_slices: int

    @property
    def pools(self) -> list[PoolScaling]:
        vms = self.spec.vms_per_slice
        return [PoolScaling(vms, vms, vms) if i < self.min_slices else from_zero(self.spec)
                for i in range(self.max_slices)]


def slice_range_problems(scaling: SliceAutoscaling, source: Source, *, capacity: str,
                         spec: TpuSpec | None = None) -> list[Problem]:
    """The rules of a group's `autoscaling` (`source` is that field's source, `source.root` its path)."""
    if capacity_mode(capacity).scales_from_zero:
        return [Problem(source.root, {source.key("min_slices"): scaling.min_slices,
                                      source.key("max_slices"): scaling.max_slices},
                        "no autoscaling range on a flex-start or queued group",
                        f"{capacity} pools already scale from zero, every slice, as GKE provisions them; "
                        "remove autoscaling, or use on-demand, spot or reservation capacity")]
    problems = []
    if scaling.min_slices > scaling.max_slices:
        problems.append(Problem(source.path("min_slices"), scaling.min_slices,
                                f"at most {source.key('max_slices')} ({scaling.max_slices})",
                                f"{source.key('min_slices')} pools are held at full size, out of "
                                f"{source.key('max_slices')}"))
    if spec is not None and scaling.max_slices * spec.vms_per_slice > GKE_MAX_NODES:
        problems.append(Problem(source.path("max_slices"), scaling.max_slices,
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
    """The cluster's `cluster_autoscaling` block: limits, and where NAP may create pools."""

    resource_limits: tuple[ResourceLimit, ...]
    locations: tuple[str, ...]
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


def autoprovisioning_problems(nap: Autoprovisioning, source: Source, *, pools: list[PoolReach],
                              group_chips: dict[str, int]) -> list[Problem]:
    """The rules of the cluster's `autoprovisioning` (`source` is that field's source).

    `group_chips` maps a generation to the chips the stack's own slice groups of it reach at their maximum, which
    the limit must leave room for; `pools` every pool of the fleet, for the cpu and memory limits."""
    problems = []
    chips_path = source.path("tpu_chips")
    for generation, chips in nap.tpu_chips.items():
        if generation not in NAP_GENERATIONS:
            hint = ("GKE's NAP resource type for tpu7 is not confirmed" if generation == "tpu7"
                    else "generations as `tpuplane catalog` names them")
            problems.append(Problem(chips_path, generation, f"one of {', '.join(NAP_GENERATIONS)}", hint))
        elif chips < group_chips.get(generation, 0):
            problems.append(Problem(f"{chips_path}.{generation}", chips, f"at least {group_chips[generation]}",
                                    f"the stack's {generation} slice groups reach {group_chips[generation]} chips at "
                                    "their maximum, and NAP's limits count every node of the cluster"))
    vcpus, memory, _ = fleet_reach(pools)
    if nap.cpu < vcpus:
        problems.append(Problem(source.path("cpu"), nap.cpu, f"at least {vcpus}",
                                f"the fleet's own pools reach {vcpus} vCPUs at their maximum; NAP's limit counts them "
                                "and would stop their scale-up"))
    if nap.memory_gb < memory:
        problems.append(Problem(source.path("memory_gb"), nap.memory_gb, f"at least {memory}",
                                f"the fleet's own pools reach {memory} GB at their maximum; NAP's limit counts them"))
    return problems


def plan_autoprovisioning(nap: Autoprovisioning, locations: list[str]) -> AutoprovisioningPlan:
    """NAP's limits (checked: `autoprovisioning_problems`), TPU generations sorted by resource type."""
    limits = [ResourceLimit("cpu", 0, nap.cpu), ResourceLimit("memory", 0, nap.memory_gb)]
    limits += sorted((ResourceLimit(accelerator_of(g), 0, chips) for g, chips in nap.tpu_chips.items()),
                     key=lambda limit: limit.resource_type)
    return AutoprovisioningPlan(tuple(limits), tuple(sorted(locations)))
