"""Groups of identical TPU slices: their Args (`TpuSlicePoolArgs`, `KueuePoolArgs`, a `tpuplane:tpuPools` entry),
GKE's rules for them, and their reader.

A pool group is one GKE node pool per slice, named `<group>-<i>`. `TpuPoolShape` holds the fields Kueue reads of a
group (TPU type, slices, capacity); `KueuePool` is a group as `BatchStack` and `SharedPathwaysService` see it, by
name; `SlicePoolSpec` is everything `TpuSlicePool` creates. Each field is declared once, here.
"""

from __future__ import annotations

import re
from enum import Enum
from functools import cached_property
from typing import Annotated, Any, ClassVar, Mapping

from pydantic import Field, model_validator

from tpuplane.infra.args import Source, read_checked, text
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.fleet.autoscaling import SliceAutoscaling, slice_range_problems
from tpuplane.infra.fleet.capacity import capacity_mode
from tpuplane.infra.fleet.catalog import TpuSpec, resolve_tpu_type
from tpuplane.infra.model import Allowed, ConfigModel, FromStack, Hint
from tpuplane.infra.naming import (
    COMPUTE_NAME_MAX,
    DNS_LABEL,
    GKE_MAX_NODES,
    GKE_NAME,
    GKE_NAME_MAX,
    PROJECT_ID,
    REGION,
    RESERVATION_PATH,
    SERVICE_ACCOUNT_EMAIL,
    ZONE,
    node_pool_name,
    workload_policy_name,
)

POOL_ARGS = "TpuSlicePoolArgs"
MAX_RUN_DURATION_SECONDS = 7 * 24 * 3600  # flex-start and queued nodes live at most 7 days
# Stands in, while the Args are checked, for a reservation name that is another resource's output (a
# `TpuReservation` of the same program): a valid name, so only the rules that do not depend on it judge.
PENDING_RESERVATION = "pending-reservation"
_LOCATION = re.compile(f"{REGION.pattern}(-[a-z])?")


class Capacity(str, Enum):
    """How a pool obtains TPU VMs. Exactly one per pool: GKE rejects most combinations."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    FLEX_START = "flex-start"
    QUEUED = "queued"
    RESERVATION = "reservation"


class TpuPoolShape(ConfigModel):
    """What Kueue's flavors and quotas read of a pool group: its slices, of which TPU type, on what capacity."""

    NAME_FIELD: ClassVar[str] = "name"

    tpu_type: Annotated[str, Allowed("a TPU type, e.g. v6e-16")]
    slices: Annotated[int, Hint("a slice is one node pool; use 1 or more")] = Field(1, ge=1, le=GKE_MAX_NODES,
                                                                                    strict=True)
    capacity: Annotated[Capacity, Hint("pick exactly one capacity mode per pool")] = Capacity.ON_DEMAND
    machine_type: str | None = None  # e.g. ct6e-standard-8t: the single-host 2x4 machine
    max_run_duration: str | None = Field(None, pattern=r"^[1-9][0-9]{0,9}s$")
    dedicated_slices: Annotated[int, FromStack("tpuplane:pathways.slices")] = Field(0, ge=0, le=GKE_MAX_NODES)

    @property
    def group_name(self) -> str:
        """The group's name: its node pools are `<name>-<i>`."""
        return getattr(self, self.NAME_FIELD)

    @cached_property
    def spec(self) -> TpuSpec:
        """The catalog entry; valid once the pool was read."""
        return resolve_tpu_type(self.tpu_type, machine_type=self.machine_type)

    @property
    def node_pool_names(self) -> list[str]:
        return [node_pool_name(self.group_name, i) for i in range(self.slices)]

    @property
    def vms(self) -> int:
        """TPU VMs (GKE nodes) of all the group's slices: the one count quotas, limits and reservations use."""
        return self.slices * self.spec.vms_per_slice

    @property
    def queued_slices(self) -> int:
        """Slices Kueue admits workloads to: all but the first `dedicated_slices` a service holds."""
        return self.slices - self.dedicated_slices


class KueuePool(TpuPoolShape):
    """`KueuePoolArgs`: a pool group as Kueue (and a Shared Pathways Service) sees it, by name."""

    name: Annotated[str, Allowed("the group's name")]


class SlicePoolSpec(TpuPoolShape):
    """`TpuSlicePoolArgs`, or one `tpuplane:tpuPools` entry: a pool group on a cluster, and how it gets its VMs."""

    NAME_FIELD: ClassVar[str] = "group"

    project: Annotated[text("a GCP project id, e.g. acme-ml", PROJECT_ID), FromStack("gcp:project")]
    location: Annotated[text("the cluster's region or zone", _LOCATION),
                        FromStack("tpuplane:cluster.regional")]
    zone: Annotated[text("a zone, e.g. us-east5-b", ZONE), FromStack("tpuplane:cluster.zone")]
    cluster: Annotated[text("a GKE cluster name", GKE_NAME, output_ok=True), FromStack("tpuplane:cluster.name")]
    cluster_name: Annotated[text("a GKE cluster name", GKE_NAME), FromStack("tpuplane:cluster.name")] = None
    service_account: Annotated[text("a service account email", SERVICE_ACCOUNT_EMAIL, output_ok=True),
                               FromStack("tpuplane:cluster")] = None
    group: str = Field(alias="name", description="The group's name: slice i is node pool `<name>-<i>` (at most 40 "
                       "characters with the suffix).")
    reservation: str | None = None
    maintenance_interval: str = Field("AS_NEEDED", pattern="^(AS_NEEDED|PERIODIC)$")
    disk_size_gb: int | None = Field(None, ge=10, le=65536)
    disk_type: str | None = Field(None, pattern="^(pd-standard|pd-balanced|pd-ssd|hyperdisk-balanced|"
                                                "hyperdisk-extreme|hyperdisk-throughput)$")
    # GKE's automated accelerator networking (extra NICs, managed DRANET); None: on for v6e, off otherwise.
    accelerator_network: bool | None = None
    dedicated_owner: Annotated[text("the name of the service that holds the dedicated slices (a DNS label)",
                                    DNS_LABEL), FromStack("tpuplane:pathways.name")] = None
    autoscaling: SliceAutoscaling | None = Field(None, description="Scale the group: `maxSlices` node pools, the "
                                                 "first `minSlices` held at full size, the others scaling from zero.")

    @model_validator(mode="before")
    @classmethod
    def _slices_follow_autoscaling(cls, data: Any) -> Any:
        """An autoscaled group has `max_slices` pools: `slices` says so unless given (then it must agree)."""
        scaling = data.get("autoscaling") if isinstance(data, Mapping) else None
        if not isinstance(scaling, Mapping) or data.get("slices") is not None:
            return data
        top = scaling.get("maxSlices", scaling.get("max_slices"))
        return {**data, "slices": top} if isinstance(top, int) and not isinstance(top, bool) and top >= 1 else data

    @property
    def name(self) -> str:
        return self.group

    @property
    def plain_cluster_name(self) -> str | None:
        """The cluster's name as text: `cluster_name`, or `cluster` when it is not another resource's output."""
        return self.cluster_name or (self.cluster if isinstance(self.cluster, str) else None)

    @property
    def kueue_pool(self) -> KueuePool:
        """This group as Kueue sees it: its name and the fields of `TpuPoolShape`, already read."""
        return KueuePool.model_construct(name=self.group, **{field: getattr(self, field)
                                                                  for field in TpuPoolShape.model_fields})


# ---- rules ------------------------------------------------------------------------------------------------------


def tpu_type_problem(source: Source, tpu_type: str, machine_type: str | None) -> Problem | None:
    """The catalog's own error, at the field it names (`tpu_type` or `machine_type`) as `source` spells it."""
    try:
        resolve_tpu_type(tpu_type, machine_type=machine_type)
    except ConfigError as exc:
        problem = exc.problems[0]
        field = "machine_type" if problem.path == "machineType" else "tpu_type"
        return Problem(source.path(field), problem.given, problem.allowed, problem.hint)
    return None


def pool_problems(pool: TpuPoolShape, source: Source, *, cluster_name: str, project: str,
                  names_reservation: bool = True) -> list[Problem]:
    """GKE's rules for one pool group. `names_reservation=False`: a description that leaves out which
    reservation the pools consume (Kueue's)."""
    problems = []
    name, name_path = pool.group_name, source.path(pool.NAME_FIELD)
    longest = node_pool_name(name, pool.slices - 1)
    if not DNS_LABEL.fullmatch(name):
        problems.append(Problem(name_path, name, "lowercase letters, digits and '-', starting with a letter"))
    elif len(longest) > GKE_NAME_MAX:
        problems.append(Problem(name_path, name,
                                f"at most {GKE_NAME_MAX - len(longest) + len(name)} characters with "
                                f"{pool.slices} slices", f"node pool names such as '{longest}' must fit in "
                                                         f"{GKE_NAME_MAX} characters"))
    problems += _capacity_problems(pool, source, project, names_reservation)  # these need no catalog entry
    bad_type = tpu_type_problem(source, pool.tpu_type, pool.machine_type)
    if bad_type:
        return problems + [bad_type]
    policy = workload_policy_name(cluster_name, name)
    if pool.spec.needs_workload_policy and len(policy) > COMPUTE_NAME_MAX:
        problems.append(Problem(name_path, name, f"a shorter name: the workload policy '{policy}' has "
                                f"{len(policy)} characters", f"Compute resource names allow at most {COMPUTE_NAME_MAX}"))
    if pool.dedicated_slices > pool.slices:
        problems.append(Problem(source.path("dedicated_slices"), pool.dedicated_slices,
                                f"0 to slices ({pool.slices})"))
    return problems


def reservation_name_problems(reservation: object, source: Source, project: str) -> list[Problem]:
    """The reservation a `capacity: reservation` pool group names: given, a name or path, a block of `project`."""
    path = source.path("reservation")
    if not reservation:
        return [Problem(path, None, "a reservation name, or projects/P/reservations/R[/reservationBlocks/B]",
                        "capacity: reservation consumes a specific reservation")]
    if not isinstance(reservation, str) or not (match := RESERVATION_PATH.fullmatch(reservation)):
        return [Problem(path, reservation,
                        "NAME or projects/P/reservations/R[/reservationBlocks/B[/reservationSubBlocks/S]]")]
    if match["block"] and match["project"] not in (None, project):
        return [Problem(path, reservation, f"a reservation block of project {project}",
                        "GKE does not support shared extended reservations (blocks of another project)")]
    return []


def _capacity_problems(pool: TpuPoolShape, source: Source, project: str, names_reservation: bool) -> list[Problem]:
    """GKE's rules between capacity modes and pool fields (Cluster Toolkit's preconditions, as errors)."""
    problems = []
    reservation = getattr(pool, "reservation", None)
    interval = getattr(pool, "maintenance_interval", "AS_NEEDED")
    if pool.capacity is Capacity.RESERVATION:
        if names_reservation:
            problems += reservation_name_problems(reservation, source, project)
    elif reservation:
        problems.append(Problem(source.path("reservation"), reservation,
                                f"no reservation with capacity {pool.capacity.value}",
                                "set capacity: reservation to consume it, or remove the key "
                                "(GKE rejects spot, flex-start and queued pools with a reservation affinity)"))
    mode = capacity_mode(pool.capacity.value)
    if pool.max_run_duration and not mode.run_duration:
        problems.append(Problem(source.path("max_run_duration"), pool.max_run_duration,
                                "only with capacity flex-start or queued",
                                "other capacity modes keep nodes until you remove them"))
    elif pool.max_run_duration and int(pool.max_run_duration[:-1]) > MAX_RUN_DURATION_SECONDS:
        problems.append(Problem(source.path("max_run_duration"), pool.max_run_duration,
                                f"at most {MAX_RUN_DURATION_SECONDS}s (7 days)", "GKE's limit for flex-start and queued"))
    if not mode.periodic_maintenance and interval == "PERIODIC":
        problems.append(Problem(source.path("maintenance_interval"), "PERIODIC", "AS_NEEDED with capacity "
                                f"{pool.capacity.value}", "PERIODIC maintenance needs a reservation that has it"))
    return problems


# ---- readers ----------------------------------------------------------------------------------------------------


def read_kueue_pool(raw: object, source: Source, *, cluster_name: str) -> KueuePool:
    """One `KueuePoolArgs`: GKE's rules for the group, but not which reservation it consumes."""
    return read_checked(KueuePool, raw, source, lambda pool, source: pool_problems(
        pool, source, cluster_name=cluster_name, project="", names_reservation=False))


def read_slice_pool(raw: object, source: Source, *, supplied: Mapping[str, Any] | None = None) -> SlicePoolSpec:
    """`TpuSlicePoolArgs` (the component's name supplied as `group`), or a `tpuplane:tpuPools` entry."""
    return read_checked(SlicePoolSpec, raw, source, slice_pool_problems, supplied=supplied)


def slice_pool_problems(pool: SlicePoolSpec, source: Source) -> list[Problem]:
    """GKE's rules for a pool group on a cluster: its names, its capacity, what names derive from the cluster's."""
    cluster_name = pool.plain_cluster_name
    problems = pool_problems(pool, source, cluster_name=cluster_name or "", project=pool.project)
    if not problems and pool.spec.needs_workload_policy and not cluster_name:
        problems.append(Problem(source.path("cluster_name"), None, "the cluster's name as plain text",
                                f"{pool.tpu_type} slices need a workload policy named after the cluster"))
    if pool.autoscaling is not None:
        problems += _autoscaling_problems(pool, source)
    if pool.dedicated_slices and not pool.dedicated_owner:
        problems.append(Problem(source.path("dedicated_owner"), None,
                                "the name of the service that holds the dedicated slices (a DNS label)",
                                "this field is required"))
    region = pool.location if REGION.fullmatch(pool.location) else pool.location.rsplit("-", 1)[0]
    if pool.zone.rsplit("-", 1)[0] != region:
        problems.append(Problem(source.path("zone"), pool.zone, f"a zone of the cluster's region, {region}",
                                f"GKE puts a cluster's nodes in its own region (location {pool.location})"))
    return problems


def _autoscaling_problems(pool: SlicePoolSpec, source: Source) -> list[Problem]:
    scaling = pool.autoscaling
    assert scaling is not None
    try:
        spec = pool.spec
    except ConfigError:
        spec = None  # reported by pool_problems
    problems = slice_range_problems(scaling, source.at("autoscaling"), capacity=pool.capacity.value, spec=spec)
    if pool.slices != scaling.max_slices:
        maximum = source.path("autoscaling", "max_slices")
        problems.append(Problem(source.path("slices"), pool.slices, f"{scaling.max_slices}, as {maximum} says, or "
                                "no value", f"an autoscaled group has {maximum} node pools: leave "
                                f"{source.key('slices')} out"))
    return problems


def pending_reservation_problems(pool: SlicePoolSpec, value: object, source: Source) -> list[Problem]:
    """The reservation rules for a name known only once another resource exists (`PENDING_RESERVATION` stood in
    while the rest of the Args was checked)."""
    if not isinstance(value, str):
        return [Problem(source.path("reservation"), value, "a reservation name")]
    return reservation_name_problems(value, source, pool.project)
