"""Specification of the pre-flight check of reservations outside the stack: looked up before any pool exists.

Compute Engine cannot exist here: mocks answer the `getReservation` invoke (said where they do).
"""

from __future__ import annotations

import pulumi
import pytest
from conftest import STACKS

from tpuplane.components.offline import PlanMocks, run_program_file
from tpuplane.infra.stack import load_stack_config
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.args import Source
from tpuplane.infra.fleet.pools import SlicePoolSpec
from tpuplane.infra.fleet.reservations import ExternalReservation, ReservationFacts, external_reservations, \
    lookup_problems

SECOND_POOL = Source.config("tpuplane:tpuPools[1]", SlicePoolSpec)


def externals(cfg):
    return external_reservations(cfg.tpu_pools, {res.name for res in cfg.reservations})

GET_RESERVATION = "gcp:compute/getReservation:getReservation"


@pytest.fixture
def external(raw_config):
    """The minimal config with its v5p pool on a reservation the stack does not declare."""
    raw_config["tpuplane:tpuPools"][1]["reservation"] = "projects/shared-tpu/reservations/team-res"
    raw_config.pop("tpuplane:reservations")
    return raw_config


def facts(**changes) -> ReservationFacts:
    base = dict(status="READY", zone="us-east5-b", machine_type="ct5p-hightpu-4t", count=32, in_use=0,
                share_type="SPECIFIC_PROJECTS", shared_with=("acme-ml",))
    return ReservationFacts(**{**base, **changes})


def test_external_reservations_look_up_the_named_project_in_the_cluster_zone(external):
    assert externals(load_stack_config(external)) == [
        ExternalReservation(pool_index=1, project="shared-tpu", name="team-res", zone="us-east5-b",
                            consumer="acme-ml")]


def test_external_reservations_skip_the_stacks_own(raw_config):
    assert externals(load_stack_config(raw_config)) == []


@pytest.mark.parametrize(("found", "allowed"), [
    (None, "an existing reservation"),
    (facts(machine_type="ct6e-standard-4t"), "a reservation of ct5p-hightpu-4t machines"),
    (facts(status="CREATING"), "a READY reservation"),
    (facts(in_use=1), "a reservation with 32 free VMs for 2 slices of v5p-128"),
    (facts(share_type="LOCAL", shared_with=()), "a reservation shared with project acme-ml"),
    (facts(shared_with=("other",)), "a reservation shared with project acme-ml"),
])
def test_lookup_problems_name_what_does_not_fit(external, found, allowed):
    cfg = load_stack_config(external)
    [lookup] = externals(cfg)

    [problem] = lookup_problems(lookup, cfg.tpu_pools[1], found, SECOND_POOL)

    assert (problem.path, allowed in problem.allowed) == ("tpuplane:tpuPools[1].reservation", True)


def test_lookup_problems_accept_a_reservation_that_fits_exactly(external):
    cfg = load_stack_config(external)
    [lookup] = externals(cfg)

    assert lookup_problems(lookup, cfg.tpu_pools[1], facts(), SECOND_POOL) == []


class ReservationMocks(PlanMocks):
    """Answers getReservation as Compute Engine would, with a reservation of the wrong machine type."""

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == GET_RESERVATION:
            return {"name": args.args["name"], "status": "READY", "zone": args.args["zone"],
                    "specificReservations": [{"count": 32, "inUseCount": 0, "assuredCount": 32,
                                              "instanceProperties": [{"machineType": "ct6e-standard-4t"}]}]}
        return super().call(args)


def test_stack_program_stops_before_any_pool_when_the_reservation_does_not_fit(external):
    with pytest.raises(pulumi.RunError) as raised:
        run_program_file(STACKS / "__main__.py", external, project="tpuplane", stack="test",
                         mocks=ReservationMocks())

    assert isinstance(raised.value.__cause__, ConfigError)
    assert "a reservation of ct5p-hightpu-4t machines" in str(raised.value)


def test_lookup_problems_judge_an_aggregate_reservation_on_status_and_sharing_only(external):
    """An All Capacity (aggregate) TPU reservation has no specificReservation: no machine type or VM count to
    compare, so it is never refused as holding "no machine type" with "0 of 0 free"."""
    cfg = load_stack_config(external)
    [lookup] = externals(cfg)

    assert lookup_problems(lookup, cfg.tpu_pools[1], facts(specific=False, machine_type="", count=0), SECOND_POOL) == []


def test_lookup_problems_organization_share_reaches_every_project(external):
    cfg = load_stack_config(external)
    [lookup] = externals(cfg)

    assert lookup_problems(lookup, cfg.tpu_pools[1], facts(share_type="ORGANIZATION", shared_with=()), SECOND_POOL) == []


def test_lookup_problems_block_the_reservation_lacks_lists_its_blocks(raw_config):
    raw_config["tpuplane:tpuPools"][1]["reservation"] = "projects/acme-ml/reservations/team-res/reservationBlocks/b9"
    raw_config.pop("tpuplane:reservations")
    cfg = load_stack_config(raw_config)
    [lookup] = externals(cfg)

    [problem] = lookup_problems(lookup, cfg.tpu_pools[1], facts(blocks=("b1", "b2")), SECOND_POOL)

    assert (lookup.block, problem.allowed) == ("reservationBlocks/b9", "a block of the reservation")
    assert "has the blocks b1, b2" in problem.hint


class ApiShapeMocks(PlanMocks):
    """Answers getReservation with one of the shapes Compute Engine returns (camelCase, as the provider passes it)."""

    def __init__(self, answer: dict):
        self.answer = answer

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == GET_RESERVATION:
            return {"name": args.args["name"], "status": "READY", "zone": args.args["zone"], **self.answer}
        return super().call(args)


AGGREGATE = {"specificReservations": [], "shareSettings": [{"shareType": "SPECIFIC_PROJECTS",
                                                              "projectMaps": [{"id": "acme-ml", "projectId": "acme-ml"}]}]}
SHARED_SPECIFIC = {"specificReservations": [{"count": 32, "inUseCount": 0, "assuredCount": 32,
                                             "instanceProperties": [{"machineType": "ct5p-hightpu-4t"}]}],
                   "shareSettings": [{"shareType": "SPECIFIC_PROJECTS", "projects": ["acme-ml"]}],
                   "blockNames": ["b1"]}
NOT_SHARED = {**SHARED_SPECIFIC, "shareSettings": [{"shareType": "LOCAL"}]}


@pytest.mark.parametrize("answer", [AGGREGATE, SHARED_SPECIFIC], ids=["aggregate", "shared-specific"])
def test_stack_program_accepts_reservations_in_the_shapes_compute_engine_returns(external, answer):
    plan = run_program_file(STACKS / "__main__.py", external, project="tpuplane", stack="test",
                            mocks=ApiShapeMocks(answer))

    assert len(plan.of_type("gcp:container/nodePool:NodePool")) > 2


def test_stack_program_stops_before_any_pool_when_the_reservation_is_not_shared_with_the_project(external):
    with pytest.raises(pulumi.RunError) as raised:
        run_program_file(STACKS / "__main__.py", external, project="tpuplane", stack="test",
                         mocks=ApiShapeMocks(NOT_SHARED))

    assert "a reservation shared with project acme-ml" in str(raised.value)
