"""Specification of the pre-flight check of reservations outside the stack: looked up before any pool exists.

Compute Engine cannot exist here: mocks answer the `getReservation` invoke (said where they do).
"""

from __future__ import annotations

import pulumi
import pytest
from conftest import STACKS

from tpuplane.components.offline import PlanMocks, run_program_file
from tpuplane.infra.config import load_stack_config
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.fleet.reservations import ExternalReservation, ReservationFacts, external_reservations, \
    reservation_problems

GET_RESERVATION = "gcp:compute/getReservation:getReservation"


@pytest.fixture
def external(raw_config):
    """The minimal config with its v5p pool on a reservation the stack does not declare."""
    raw_config["tpuplane:tpuPools"][1]["reservation"] = "projects/shared-tpu/reservations/team-res"
    raw_config.pop("tpuplane:reservations")
    return raw_config


def facts(**changes) -> ReservationFacts:
    base = dict(status="READY", zone="us-east5-b", machine_type="ct5p-hightpu-4t", count=32, in_use=0)
    return ReservationFacts(**{**base, **changes})


def test_external_reservations_look_up_the_named_project_in_the_cluster_zone(external):
    assert external_reservations(load_stack_config(external)) == [
        ExternalReservation(pool_index=1, project="shared-tpu", name="team-res", zone="us-east5-b")]


def test_external_reservations_skip_the_stacks_own(raw_config):
    assert external_reservations(load_stack_config(raw_config)) == []


@pytest.mark.parametrize(("found", "allowed"), [
    (None, "an existing reservation"),
    (facts(machine_type="ct6e-standard-4t"), "a reservation of ct5p-hightpu-4t machines"),
    (facts(status="CREATING"), "a READY reservation"),
    (facts(in_use=1), "a reservation with 32 free VMs for 2 slices of v5p-128"),
])
def test_reservation_problems_name_what_does_not_fit(external, found, allowed):
    cfg = load_stack_config(external)
    [lookup] = external_reservations(cfg)

    [problem] = reservation_problems(lookup, cfg.tpu_pools[1], found)

    assert (problem.path, allowed in problem.allowed) == ("tpuplane:tpuPools[1].reservation", True)


def test_reservation_problems_accept_a_reservation_that_fits_exactly(external):
    cfg = load_stack_config(external)
    [lookup] = external_reservations(cfg)

    assert reservation_problems(lookup, cfg.tpu_pools[1], facts()) == []


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
