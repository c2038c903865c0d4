"""Reservations: the Args of the ones a program creates (`TpuReservationArgs`, a `tpuplane:reservations` entry),
Compute Engine's rules for them, and the pre-flight checks of the ones that live outside the stack (Cluster
Toolkit's and xpk's checks).

The stack program looks each outside reservation up (`gcp.compute.get_reservation`) before any pool exists; the
pure functions here judge what came back, so a wrong name, machine type, zone or a full reservation fails at
preview with the config path, not minutes into `pulumi up` with GKE's "incorrect for the requested resources".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Mapping, Sequence

from pydantic import Field

from tpuplane.infra.args import Source, read_checked, text
from tpuplane.infra.errors import Problem
from tpuplane.infra.fleet.catalog import TpuSpec, resolve_tpu_type
from tpuplane.infra.fleet.pools import Capacity, SlicePoolSpec, tpu_type_problem
from tpuplane.infra.model import ConfigModel, FromStack
from tpuplane.infra.naming import COMPUTE_NAME_MAX, DNS_LABEL, GKE_MAX_NODES, PROJECT_ID, RESERVATION_PATH, ZONE

RESERVATION_ARGS = "TpuReservationArgs"


class ReservationSpec(ConfigModel):
    """`TpuReservationArgs`, or a `tpuplane:reservations` entry: a Compute Engine specific reservation sized for
    whole slices. In a stack its zone defaults to the cluster's."""

    project: Annotated[text("a GCP project id, e.g. acme-ml", PROJECT_ID), FromStack("gcp:project")]
    zone: text("a zone, e.g. us-east5-b", ZONE) = Field(description="The zone of the reserved VMs: the cluster's "
                                                       "zone (the default in a stack config).")
    name: str = Field(description="The reservation's name, which pools name in `reservation`.")
    tpu_type: str
    slices: int = Field(1, ge=1, le=GKE_MAX_NODES, strict=True)
    machine_type: str | None = None
    maintenance_interval: str = Field("AS_NEEDED", pattern="^(AS_NEEDED|PERIODIC)$")  # must match its pools
    keep_on_delete: Annotated[bool, FromStack("tpuplane:cluster.production")] = False

    @cached_property
    def spec(self) -> TpuSpec:
        return resolve_tpu_type(self.tpu_type, machine_type=self.machine_type)

    @property
    def vms(self) -> int:
        """Machines the reservation holds: whole slices of its TPU type."""
        return self.slices * self.spec.vms_per_slice


def reservation_problems(res: ReservationSpec, source: Source) -> list[Problem]:
    """Compute Engine's rules for one reservation."""
    problems = []
    if not DNS_LABEL.fullmatch(res.name) or len(res.name) > COMPUTE_NAME_MAX:
        problems.append(Problem(source.path("name"), res.name,
                                f"a lowercase name of at most {COMPUTE_NAME_MAX} characters: a-z, 0-9, '-'"))
    bad_type = tpu_type_problem(source, res.tpu_type, res.machine_type)
    if bad_type:
        problems.append(bad_type)
    return problems


def read_reservation(raw: object, source: Source, *, supplied: Mapping[str, Any] | None = None) -> ReservationSpec:
    """`TpuReservationArgs` (the component's name supplied as `name`), or a `tpuplane:reservations` entry (its zone
    supplied as the cluster's, unless it names one)."""
    return read_checked(ReservationSpec, raw, source, reservation_problems, supplied=supplied)


def own_reservation_name(pool: SlicePoolSpec) -> str | None:
    """The reservation a pool consumes when it may be one its own program declares: named by name or by a path
    in the pool's own project, and not a block of it."""
    if pool.capacity is not Capacity.RESERVATION or not pool.reservation:
        return None
    match = RESERVATION_PATH.fullmatch(pool.reservation)
    if not match or match["project"] not in (None, pool.project) or match["block"]:
        return None
    return match["name"]


@dataclass(frozen=True)
class ExternalReservation:
    """Where to look a pool's reservation up: GKE resolves a bare name in the cluster's project and zone."""

    pool_index: int
    project: str
    name: str
    zone: str
    block: str | None = None  # `reservationBlocks/B[/reservationSubBlocks/S]`: the pool takes one block
    consumer: str = ""  # the project whose cluster consumes it (a shared reservation must be shared with it)


@dataclass(frozen=True)
class ReservationFacts:
    """What Compute Engine says about a reservation (the `getReservation` answer, as GKE sees it).

    A specific reservation states its machine type and counts. An aggregate reservation (TPU "All Capacity"
    mode, `aggregateReservation` with accelerator counts) states none of them in this answer: it is judged on
    status, sharing and blocks only. `shared_with` lists the projects of a SPECIFIC_PROJECTS share."""

    status: str
    zone: str
    specific: bool = True
    machine_type: str = ""
    count: int = 0
    in_use: int = 0
    share_type: str = "LOCAL"
    shared_with: tuple[str, ...] = ()
    blocks: tuple[str, ...] = ()


def external_reservations(pools: Sequence[SlicePoolSpec], declared: set[str]) -> list[ExternalReservation]:
    """The reservations pools consume that their program does not declare (blocks are looked up by their
    reservation), in each pool's zone."""
    lookups = []
    for i, pool in enumerate(pools):
        if pool.reservation and own_reservation_name(pool) not in declared:
            match = RESERVATION_PATH.fullmatch(pool.reservation)
            if match:
                block = match["block"].lstrip("/") if match["block"] else None
                lookups.append(ExternalReservation(i, match["project"] or pool.project, match["name"], pool.zone,
                                                   block=block, consumer=pool.project))
    return lookups


def lookup_problems(lookup: ExternalReservation, pool: SlicePoolSpec, facts: ReservationFacts | None,
                    source: Source) -> list[Problem]:
    """The pool (read from `source`) fits the reservation: it exists in the pool's zone, is READY, holds the pool's
    machine type and has room for every VM of its slices. `facts` None means the reservation was not found."""
    path = source.path("reservation")
    where = f"projects/{lookup.project}/zones/{lookup.zone}/reservations/{lookup.name}"
    if facts is None:
        return [Problem(path, pool.reservation, f"an existing reservation ({where} was not found)",
                        "check the name and project, or declare it in tpuplane:reservations")]
    spec = pool.spec
    problems = []
    if facts.status != "READY":
        problems.append(Problem(path, pool.reservation, "a READY reservation", f"{where} is {facts.status}"))
    if lookup.consumer and lookup.project != lookup.consumer and not _shared_with(facts, lookup.consumer):
        problems.append(Problem(path, pool.reservation, f"a reservation shared with project {lookup.consumer}",
                                f"{where} is shared {_sharing(facts)}: add {lookup.consumer} to its share settings"))
    if lookup.block and facts.blocks and lookup.block.split("/")[1] not in facts.blocks:
        problems.append(Problem(path, pool.reservation, "a block of the reservation",
                                f"{where} has the blocks {', '.join(facts.blocks)}"))
    if not facts.specific:
        return problems  # an aggregate reservation: machine type and free VMs are not in the answer
    if facts.machine_type != spec.machine_type:
        problems.append(Problem(path, pool.reservation, f"a reservation of {spec.machine_type} machines",
                                f"{where} holds {facts.machine_type or 'no machine type'}"))
    needed, free = pool.vms, facts.count - facts.in_use
    if needed > free:
        problems.append(Problem(path, pool.reservation, f"a reservation with {needed} free VMs for {pool.slices} "
                                f"slices of {pool.tpu_type}", f"{where} has {free} of {facts.count} free"))
    return problems


def _shared_with(facts: ReservationFacts, project: str) -> bool:
    return facts.share_type == "ORGANIZATION" or (facts.share_type == "SPECIFIC_PROJECTS"
                                                  and project in facts.shared_with)


def _sharing(facts: ReservationFacts) -> str:
    if facts.share_type == "SPECIFIC_PROJECTS":
        return "with " + (", ".join(facts.shared_with) or "no project")
    return "with no other project" if facts.share_type == "LOCAL" else facts.share_type
