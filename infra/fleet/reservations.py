"""Pre-flight checks of reservations that live outside the stack (Cluster Toolkit's and xpk's checks).

The stack program looks each one up (`gcp.compute.get_reservation`) before any pool exists; these pure
functions judge what came back, so a wrong name, machine type, zone or a full reservation fails at preview
with the config path, not minutes into `pulumi up` with GKE's "incorrect for the requested resources".
"""

from __future__ import annotations

from dataclasses import dataclass

from tpuplane.infra.config import RESERVATION_PATH, StackConfig, TpuPoolConfig
from tpuplane.infra.errors import Problem


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


def external_reservations(cfg: StackConfig) -> list[ExternalReservation]:
    """The reservations pools consume that this stack does not create (blocks are looked up by their reservation)."""
    lookups = []
    for i, pool in enumerate(cfg.tpu_pools):
        if pool.reservation and cfg.stack_reservation(pool) is None:
            match = RESERVATION_PATH.fullmatch(pool.reservation)
            if match:
                block = match["block"].lstrip("/") if match["block"] else None
                lookups.append(ExternalReservation(i, match["project"] or cfg.project, match["name"], cfg.cluster.zone,
                                                   block=block, consumer=cfg.project))
    return lookups


def reservation_problems(lookup: ExternalReservation, pool: TpuPoolConfig, facts: ReservationFacts | None
                         ) -> list[Problem]:
    """The pool fits the reservation: it exists in the pool's zone, is READY, holds the pool's machine type and
    has room for every VM of its slices. `facts` None means the reservation was not found."""
    path = f"tpuplane:tpuPools[{lookup.pool_index}].reservation"
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
