"""`TpuSlicePool` as a library component: one typed Args class, any cluster (also one tpuplane did not create),
every check before it registers anything. Pulumi's mocks stand in for GCP (which cannot exist here)."""

from __future__ import annotations

import pulumi
import pytest

from tpuplane.components import offline
from tpuplane.components.errors import InvalidInput
from tpuplane.components import TpuReservation, TpuReservationArgs, TpuSlicePool, TpuSlicePoolArgs
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.review.plan import Plan

NODE_POOL = "gcp:container/nodePool:NodePool"


def existing_cluster_args(**changes) -> TpuSlicePoolArgs:
    fields = dict(project="acme-ml", location="us-east5", zone="us-east5-b", cluster="their-cluster",
                  tpu_type="v6e-16", slices=2, capacity="spot", service_account="nodes@acme-ml.iam.gserviceaccount.com")
    return TpuSlicePoolArgs(**{**fields, **changes})


def plan(program) -> Plan:
    return offline.run_under_mocks(program, {"gcp:project": "acme-ml"}, project="byo", stack="test")


def test_tpu_slice_pool_adds_slices_to_a_cluster_it_did_not_create():
    result = plan(lambda: TpuSlicePool("train", existing_cluster_args()))

    pools = result.of_type(NODE_POOL)
    assert [p.name for p in pools] == ["train-0", "train-1"]
    assert {p.inputs["cluster"] for p in pools} == {"their-cluster"}
    assert {p.inputs["location"] for p in pools} == {"us-east5"}
    assert pools[0].inputs["nodeConfig"]["spot"] is True
    assert pools[0].inputs["placementPolicy"]["tpuTopology"] == "4x4"


@pytest.mark.parametrize("changes, path", [
    ({"slices": 0}, "TpuSlicePoolArgs.slices"),
    ({"capacity": "cheap"}, "TpuSlicePoolArgs.capacity"),
    ({"tpu_type": "v6e-17"}, "TpuSlicePoolArgs.tpu_type"),
    ({"capacity": "reservation"}, "TpuSlicePoolArgs.reservation"),
    ({"max_run_duration": "3600s"}, "TpuSlicePoolArgs.max_run_duration"),
    ({"project": 7}, "TpuSlicePoolArgs.project"),
    ({"zone": "nozone"}, "TpuSlicePoolArgs.zone"),
    ({"zone": "europe-west4-a"}, "TpuSlicePoolArgs.zone"),  # outside the cluster's region
    ({"location": "us-central1-a"}, "TpuSlicePoolArgs.zone"),
    ({"cluster": object()}, "TpuSlicePoolArgs.cluster"),
    ({"location": ""}, "TpuSlicePoolArgs.location"),
    ({"cluster": ["their-cluster"]}, "TpuSlicePoolArgs.cluster"),
    ({"cluster_name": 123}, "TpuSlicePoolArgs.cluster_name"),
    ({"service_account": {"email": "x"}}, "TpuSlicePoolArgs.service_account"),
    ({"group": "Bad_Group"}, "TpuSlicePoolArgs.group"),
    ({"dedicated_slices": 1}, "TpuSlicePoolArgs.dedicated_owner"),
    ({"dedicated_slices": 1, "dedicated_owner": "Bad Owner!"}, "TpuSlicePoolArgs.dedicated_owner"),
    ({"colour": "blue"}, "TpuSlicePoolArgs.colour"),
])
def test_tpu_slice_pool_bad_args_name_the_field_and_register_nothing(changes, path, registrations):
    with pytest.raises(ConfigError) as raised:
        plan(lambda: TpuSlicePool("train", existing_cluster_args(**changes)))
    assert path in [p.path for p in raised.value.problems]
    assert registrations == []


def test_tpu_slice_pool_workload_policy_needs_the_clusters_name_as_text():
    with pytest.raises(ConfigError) as raised:
        plan(lambda: TpuSlicePool("big", existing_cluster_args(
            tpu_type="tpu7x-128", capacity="on-demand", cluster=pulumi.Output.from_input("their-cluster"))))
    assert [p.path for p in raised.value.problems] == ["TpuSlicePoolArgs.cluster_name"]


def test_tpu_slice_pool_waits_for_a_reservation_given_by_its_name_output():
    def program():
        reservation = TpuReservation("v5p-res", TpuReservationArgs(project="acme-ml", zone="us-east5-b",
                                                                   tpu_type="v5p-128"))
        TpuSlicePool("train", existing_cluster_args(tpu_type="v5p-128", capacity="reservation",
                                                    reservation=reservation.reservation_name))

    result = plan(program)
    [reservation] = result.of_type("gcp:compute/reservation:Reservation")
    for pool in result.of_type(NODE_POOL):
        assert reservation.urn in pool.depends_on
        assert pool.inputs["nodeConfig"]["reservationAffinity"]["values"] == ["v5p-res"]


def test_tpu_slice_pool_judges_a_reservation_name_output_once_it_is_known():
    """From other Pulumi languages every Input is an Output: its value meets the same rules when it resolves, and
    Pulumi reports it as a RunError (printed without a traceback) carrying the ConfigError."""
    with pytest.raises(InvalidInput) as raised:
        plan(lambda: TpuSlicePool("train", existing_cluster_args(
            tpu_type="v5p-128", capacity="reservation",
            reservation=pulumi.Output.from_input("projects/other-proj/reservations/r/reservationBlocks/b"))))

    assert [p.path for p in raised.value.error.problems] == ["TpuSlicePoolArgs.reservation"]
