"""Specification of the foundation components (TpuCluster, TpuSlicePool, TpuReservation) as the stack program
composes them: the exact inputs each GCP resource would receive, the component tree and the stack outputs.

GCP cannot exist here: the real program in stacks/ runs under Pulumi's mocks (fixture `plan_stack`), which
record every registration. All assertions run on the returned Plan, after the program finished.
"""

from __future__ import annotations

import json
import runpy
from typing import Any, Callable

import pulumi
import pytest

from conftest import MINIMAL_CONFIG, STACKS, stack_file_config
from tpuplane.components.offline import PlanMocks, run_under_mocks
from tpuplane.infra.review.plan import Plan
from tpuplane.infra.errors import ConfigError

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
RESERVATION = "gcp:compute/reservation:Reservation"
RESOURCE_POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
SERVICE_ACCOUNT = "gcp:serviceaccount/account:Account"
IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
TPU_CLUSTER = "tpuplane:index:TpuCluster"
SLICE_POOL = "tpuplane:index:TpuSlicePool"

NODE_SA_EMAIL = "fleet-nodes@acme-ml.iam.gserviceaccount.com"
TPU_TAINT = {"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}
NO_RESERVATION = {"consumeReservationType": "NO_RESERVATION"}

# One pool group per capacity mode and TPU shape, so that a single plan covers every branch.
FLEET_CONFIG: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "gcp:region": "us-east5",
    "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b",
                         "maintenanceExclusion": {"startTime": "2026-12-01T00:00:00Z"}},
    "tpuplane:reservations": [{"name": "v5p-res", "tpuType": "v5p-128", "slices": 3}],
    "tpuplane:tpuPools": [
        {"name": "ondemand", "tpuType": "v6e-16"},
        {"name": "spot", "tpuType": "v6e-16", "slices": 2, "capacity": "spot"},
        {"name": "flex", "tpuType": "v6e-16", "capacity": "flex-start", "maxRunDuration": "3600s"},
        {"name": "queued", "tpuType": "v6e-16", "capacity": "queued"},
        {"name": "reserved", "tpuType": "v5p-128", "slices": 2, "capacity": "reservation", "reservation": "v5p-res"},
        {"name": "iron", "tpuType": "tpu7x-16", "slices": 2},
        {"name": "ironhost", "tpuType": "tpu7x-8"},
        {"name": "eval", "tpuType": "v6e-8", "machineType": "ct6e-standard-8t"},
    ],
}
TPU_POOL_NAMES = ["ondemand-0", "spot-0", "spot-1", "flex-0", "queued-0", "reserved-0", "reserved-1",
                  "iron-0", "iron-1", "ironhost-0", "eval-0"]

_plans: dict[str, Plan] = {}


@pytest.fixture
def planned(plan_stack) -> Callable[[dict[str, Any]], Plan]:
    """`plan_stack`, run once per distinct config for the whole module: each plan costs about a second."""

    def plan(config: dict[str, Any]) -> Plan:
        key = json.dumps(config, sort_keys=True)
        if key not in _plans:
            _plans[key] = plan_stack(config)
        return _plans[key]

    return plan


@pytest.fixture
def fleet(planned) -> Plan:
    return planned(FLEET_CONFIG)


@pytest.fixture
def minimal(planned) -> Plan:
    return planned(MINIMAL_CONFIG)


def tpu_node_pools(plan: Plan) -> list:
    """Every NodePool but the cluster's CPU system pool."""
    return [r for r in plan.of_type(NODE_POOL) if r.inputs["name"] != "cpu"]


def node_pool(plan: Plan, name: str) -> dict[str, Any]:
    (pool,) = [r for r in plan.of_type(NODE_POOL) if r.inputs["name"] == name]
    return pool.inputs


def only(plan: Plan, type_token: str):
    (resource,) = plan.of_type(type_token)
    return resource


# --- NodePool inputs per capacity mode -------------------------------------------------------------------


def test_tpu_slice_pool_on_demand_has_a_static_node_count_and_no_reservation_affinity(fleet):
    pool = node_pool(fleet, "ondemand-0")

    assert pool["nodeCount"] == 4
    assert "autoscaling" not in pool
    assert {"reservationAffinity", "spot", "flexStart"}.isdisjoint(pool["nodeConfig"])
    assert pool["management"] == {"autoRepair": True, "autoUpgrade": True}


def test_tpu_slice_pool_spot_sets_spot_and_no_reservation(fleet):
    pool = node_pool(fleet, "spot-1")

    assert pool["nodeConfig"]["spot"] is True
    assert pool["nodeConfig"]["reservationAffinity"] == NO_RESERVATION
    assert pool["nodeCount"] == 4


def test_tpu_slice_pool_flex_start_autoscales_from_zero_without_repair(fleet):
    pool = node_pool(fleet, "flex-0")

    assert pool["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"}
    assert pool["initialNodeCount"] == 0
    assert "nodeCount" not in pool
    assert pool["management"] == {"autoRepair": False, "autoUpgrade": True}
    assert (pool["nodeConfig"]["flexStart"], pool["nodeConfig"]["maxRunDuration"]) == (True, "3600s")
    assert pool["nodeConfig"]["reservationAffinity"] == NO_RESERVATION
    assert "spot" not in pool["nodeConfig"]


def test_tpu_slice_pool_queued_enables_queued_provisioning_with_its_node_label(fleet):
    pool = node_pool(fleet, "queued-0")

    assert pool["queuedProvisioning"] == {"enabled": True}
    assert pool["nodeConfig"]["labels"] == {"cloud.google.com/gke-queued": "true", "tpuplane.dev/capacity": "queued",
                                            "cloud.google.com/gke-networking-dra-driver": "true"}
    assert pool["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"}
    assert "nodeCount" not in pool
    assert pool["nodeConfig"]["reservationAffinity"] == NO_RESERVATION


def test_tpu_slice_pool_reservation_consumes_the_specific_reservation(fleet):
    pool = node_pool(fleet, "reserved-1")

    assert pool["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["v5p-res"],
    }
    assert pool["nodeCount"] == 16


def test_tpu_slice_pool_sizes_are_integers(fleet):
    sizes = [node_pool(fleet, "ondemand-0")["nodeCount"], node_pool(fleet, "flex-0")["autoscaling"]["maxNodeCount"],
             node_pool(fleet, "reserved-0")["maxPodsPerNode"]]

    assert [type(size) for size in sizes] == [int, int, int]


# --- NodePool inputs per TPU shape -----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "topology"), [("ondemand-0", "4x4"), ("reserved-0", "4x4x4")])
def test_tpu_slice_pool_multi_host_is_compact_with_its_topology(fleet, name, topology):
    assert node_pool(fleet, name)["placementPolicy"] == {"type": "COMPACT", "tpuTopology": topology}


@pytest.mark.parametrize(("name", "machine_type"), [("ironhost-0", "tpu7x-standard-4t"),
                                                    ("eval-0", "ct6e-standard-8t")])
def test_tpu_slice_pool_single_host_has_no_placement_policy(fleet, name, machine_type):
    pool = node_pool(fleet, name)

    assert "placementPolicy" not in pool
    assert (pool["nodeConfig"]["machineType"], pool["nodeCount"]) == (machine_type, 1)


def test_tpu_slice_pool_tpu7x_multi_host_creates_a_high_throughput_workload_policy(fleet):
    policy = only(fleet, RESOURCE_POLICY)

    assert policy.inputs == {"name": "fleet-iron-wp", "project": "acme-ml", "region": "us-east5",
                             "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "2x2x2"}}
    assert policy.parent.endswith(f"{SLICE_POOL}::iron")


@pytest.mark.parametrize("name", ["iron-0", "iron-1"])
def test_tpu_slice_pool_tpu7x_multi_host_references_the_policy_with_an_empty_type(fleet, name):
    policy = only(fleet, RESOURCE_POLICY)
    pool = fleet.named(name)

    assert pool.inputs["placementPolicy"] == {"type": "", "policyName": "fleet-iron-wp", "tpuTopology": "2x2x2"}
    assert policy.urn in pool.depends_on


# --- every TPU NodePool --------------------------------------------------------------------------------


def test_tpu_slice_pool_creates_one_node_pool_per_slice(fleet):
    assert sorted(r.inputs["name"] for r in tpu_node_pools(fleet)) == sorted(TPU_POOL_NAMES)


def test_tpu_slice_pool_every_pool_runs_as_the_node_service_account_with_workload_identity(fleet):
    for pool in tpu_node_pools(fleet):
        node_config = pool.inputs["nodeConfig"]
        assert node_config["serviceAccount"] == NODE_SA_EMAIL, pool.name
        assert node_config["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}, pool.name


def test_tpu_slice_pool_every_pool_is_tainted_for_tpu_pods_only(fleet):
    assert {pool.name: pool.inputs["nodeConfig"]["taints"] for pool in tpu_node_pools(fleet)} == {
        name: [TPU_TAINT] for name in TPU_POOL_NAMES}


def test_tpu_slice_pool_every_pool_sits_in_the_cluster_zone_of_the_regional_cluster(fleet):
    for pool in tpu_node_pools(fleet):
        assert (pool.inputs["cluster"], pool.inputs["location"], pool.inputs["nodeLocations"]) == (
            "fleet", "us-east5", ["us-east5-b"]), pool.name


def test_tpu_slice_pool_pools_depend_on_the_reservation_they_consume(fleet):
    reservation = only(fleet, RESERVATION)

    consumers = sorted(p.name for p in tpu_node_pools(fleet) if reservation.urn in p.depends_on)

    assert consumers == ["reserved-0", "reserved-1"]


# --- TpuReservation -------------------------------------------------------------------------------------


def test_tpu_reservation_reserves_whole_slices_of_vms_in_the_cluster_zone(fleet):
    assert only(fleet, RESERVATION).inputs == {
        "name": "v5p-res",
        "project": "acme-ml",
        "zone": "us-east5-b",
        "specificReservationRequired": True,
        "specificReservation": {"count": 3 * 16, "instanceProperties": {"machineType": "ct5p-hightpu-4t"}},
    }


# --- TpuCluster -----------------------------------------------------------------------------------------


def test_tpu_cluster_settings_for_tpu_fleets(minimal):
    cluster = only(minimal, CLUSTER).inputs

    assert (cluster["name"], cluster["location"], cluster["nodeLocations"]) == ("fleet", "us-east5", ["us-east5-b"])
    assert (cluster["removeDefaultNodePool"], cluster["initialNodeCount"]) == (True, 1)
    assert (cluster["networkingMode"], cluster["datapathProvider"]) == ("VPC_NATIVE", "ADVANCED_DATAPATH")
    assert cluster["workloadIdentityConfig"] == {"workloadPool": "acme-ml.svc.id.goog"}
    assert cluster["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}
    assert cluster["releaseChannel"] == {"channel": "REGULAR"}
    assert cluster["deletionProtection"] is True


def test_tpu_cluster_has_no_maintenance_exclusion_unless_configured(minimal):
    assert "maintenanceExclusions" not in only(minimal, CLUSTER).inputs["maintenancePolicy"]


def test_tpu_cluster_freezes_minor_and_node_upgrades_when_configured(fleet):
    assert only(fleet, CLUSTER).inputs["maintenancePolicy"]["maintenanceExclusions"] == [{
        "exclusionName": "training-freeze",
        "startTime": "2026-12-01T00:00:00Z",
        "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"},
    }]


def test_tpu_cluster_creates_a_dedicated_node_service_account(minimal):
    account = only(minimal, SERVICE_ACCOUNT).inputs

    assert (account["accountId"], account["project"]) == ("fleet-nodes", "acme-ml")
    assert only(minimal, CLUSTER).inputs["nodeConfig"]["serviceAccount"] == NODE_SA_EMAIL


def test_tpu_cluster_grants_the_node_service_account_least_privilege_roles_only(minimal):
    grants = {(r.inputs["role"], r.inputs["member"], r.inputs["project"]) for r in minimal.of_type(IAM_MEMBER)}

    assert grants == {
        ("roles/container.defaultNodeServiceAccount", f"serviceAccount:{NODE_SA_EMAIL}", "acme-ml"),
        ("roles/artifactregistry.reader", f"serviceAccount:{NODE_SA_EMAIL}", "acme-ml"),
    }


def test_tpu_cluster_is_created_after_its_node_roles_are_granted(minimal):
    cluster = only(minimal, CLUSTER)

    assert {r.urn for r in minimal.of_type(IAM_MEMBER)} <= set(cluster.depends_on)


def test_tpu_cluster_cpu_pool_runs_as_the_node_service_account(minimal):
    cpu = node_pool(minimal, "cpu")

    assert cpu["nodeConfig"]["serviceAccount"] == NODE_SA_EMAIL
    assert cpu["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert cpu["autoscaling"] == {"minNodeCount": 1, "maxNodeCount": 10}


# --- component tree and outputs -------------------------------------------------------------------------


def test_stack_every_tpu_node_pool_is_a_child_of_its_slice_pool_under_the_cluster(fleet):
    tpu_cluster = only(fleet, TPU_CLUSTER)
    slice_pools = {r.urn: r for r in fleet.of_type(SLICE_POOL)}

    for pool in tpu_node_pools(fleet):
        parent = slice_pools[pool.parent]
        assert pool.inputs["name"].startswith(f"{parent.name}-")
        assert parent.parent == tpu_cluster.urn


def test_stack_cpu_pool_is_a_child_of_the_cluster(fleet):
    assert fleet.named("fleet-cpu").parent == only(fleet, TPU_CLUSTER).urn


def test_stack_outputs_node_pools_chips_and_cluster_name(minimal):
    assert minimal.outputs["cluster_name"] == "fleet"
    assert minimal.outputs["node_pools"] == {"train": ["train-0", "train-1", "train-2", "train-3"],
                                             "big": ["big-0", "big-1"]}
    assert minimal.outputs["tpu_chips"] == {"v5p": 2 * 64, "v6e": 4 * 16}


def test_stack_dev_example_plans_two_spot_v6e_16_slices(planned):
    plan = planned(stack_file_config("dev"))

    assert plan.outputs["node_pools"] == {"train": ["train-0", "train-1"]}
    assert plan.outputs["tpu_chips"] == {"v6e": 32}
    assert [node_pool(plan, n)["nodeConfig"]["spot"] for n in ("train-0", "train-1")] == [True, True]
    assert plan.of_type(RESERVATION) == []
    assert only(plan, CLUSTER).inputs["deletionProtection"] is False


def test_stack_prod_example_plans_reserved_v5p_and_flex_start_v6e_8(planned):
    plan = planned(stack_file_config("prod"))

    assert plan.outputs["node_pools"] == {"pretrain": [f"pretrain-{i}" for i in range(4)], "eval": ["eval-0", "eval-1"]}
    assert plan.outputs["tpu_chips"] == {"v5p": 4 * 64, "v6e": 2 * 8}
    assert only(plan, RESERVATION).inputs["specificReservation"]["count"] == 4 * 16
    assert {node_pool(plan, n)["nodeConfig"]["machineType"] for n in ("eval-0", "eval-1")} == {"ct6e-standard-8t"}
    assert only(plan, CLUSTER).inputs["resourceLabels"]["tpuplane-production"] == "true"


# --- determinism and bad input --------------------------------------------------------------------------


def test_stack_plan_json_is_byte_identical_across_runs(plan_stack):
    first, second = (json.dumps(plan_stack(MINIMAL_CONFIG).to_json(), sort_keys=True) for _ in range(2))

    assert first == second


class RegistrationLog(PlanMocks):
    """The offline mocks, also listing every resource type the program asked for."""

    def __init__(self) -> None:
        self.types: list[str] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.types.append(args.typ)
        return super().new_resource(args)


def test_stack_bad_config_fails_with_config_error_before_any_resource(raw_config):
    raw_config["tpuplane:tpuPools"][1]["slices"] = 0
    log = RegistrationLog()

    with pytest.raises(pulumi.RunError) as caught:
        run_under_mocks(lambda: runpy.run_path(str(STACKS / "__main__.py"), run_name="__main__"), raw_config,
                        project="tpuplane", stack="test", mocks=log)

    assert isinstance(caught.value.__cause__, ConfigError)
    assert [p.path for p in caught.value.__cause__.problems] == ["tpuplane:tpuPools[1].slices"]
    assert log.types == []


def test_zonal_cluster_lists_no_node_locations_of_its_own(plan_stack, raw_config):
    raw_config["tpuplane:cluster"]["regional"] = False
    [cluster] = plan_stack(raw_config).of_type("gcp:container/cluster:Cluster")

    assert cluster.inputs["location"] == "us-east5-b"
    assert "nodeLocations" not in cluster.inputs
