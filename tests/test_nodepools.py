"""Specification of slice pool planning: the GKE node pool fields each capacity mode and TPU shape gets.

Pure: configs go through `load_stack_config` (so every plan here is of a valid config) and then
`plan_slice_group`; no Pulumi involved.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from conftest import printed_by_two_processes

from tpuplane.infra.stack import load_stack_config
from tpuplane.infra.fleet.autoscaling import PoolScaling
from tpuplane.infra.fleet.nodepools import (
    RESERVATION_KEY,
    PoolGroupPlan,
    ReservationAffinity,
    WorkloadPolicyPlan,
    chips_by_generation,
    plan_slice_group,
    plan_tpu_pools,
)

TPU_TAINT = {"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}


@pytest.fixture
def plan_pool(raw_config) -> Callable[..., PoolGroupPlan]:
    """Plan one pool entry, written as in `tpuplane:tpuPools`, in the minimal config's cluster."""

    def plan(reservations: list[dict[str, Any]] | None = None, **pool: Any) -> PoolGroupPlan:
        config = copy.deepcopy(raw_config)
        config["tpuplane:tpuPools"] = [pool]
        config["tpuplane:reservations"] = reservations or []
        cfg = load_stack_config(config)
        return plan_slice_group(cfg.tpu_pools[0])

    return plan


# --- capacity modes --------------------------------------------------------------------------------------


def test_plan_pool_group_on_demand_has_a_static_size_and_no_reservation_affinity(plan_pool):
    pool = plan_pool(name="od", tpuType="v6e-16", capacity="on-demand").pools[0]

    assert (pool.node_count, pool.autoscaling, pool.reservation_affinity) == (4, None, None)
    assert (pool.spot, pool.flex_start, pool.queued_provisioning) == (False, False, False)
    assert pool.auto_repair is True


def test_plan_pool_group_spot_uses_spot_vms_and_no_reservation(plan_pool):
    pool = plan_pool(name="sp", tpuType="v6e-16", capacity="spot").pools[0]

    assert pool.spot is True
    assert pool.reservation_affinity == ReservationAffinity("NO_RESERVATION")
    assert (pool.node_count, pool.autoscaling) == (4, None)


def test_plan_pool_group_flex_start_autoscales_from_zero_without_repair_or_reservation(plan_pool):
    pool = plan_pool(name="fs", tpuType="v6e-16", capacity="flex-start", maxRunDuration="3600s").pools[0]

    assert pool.flex_start is True
    assert pool.max_run_duration == "3600s"
    assert pool.node_count is None
    assert pool.autoscaling == PoolScaling(initial_node_count=0, min_node_count=0, max_node_count=4,
                                           location_policy="ANY")
    assert pool.auto_repair is False
    assert pool.reservation_affinity == ReservationAffinity("NO_RESERVATION")
    assert pool.spot is False


@pytest.mark.parametrize("capacity", ["on-demand", "spot", "reservation"])
def test_an_autoscaled_group_holds_its_first_slices_and_scales_the_others_from_zero(plan_pool, capacity):
    group = plan_pool(name="g", tpuType="v5p-128", capacity=capacity, autoscaling={"minSlices": 1, "maxSlices": 3},
                      **({"reservation": "r"} if capacity == "reservation" else {}))

    assert [p.name for p in group.pools] == ["g-0", "g-1", "g-2"]
    assert [(p.node_count, p.autoscaling) for p in group.pools] == [
        (None, PoolScaling(16, 16, 16)), (None, PoolScaling(0, 0, 16)), (None, PoolScaling(0, 0, 16))]
    assert all(p.auto_repair for p in group.pools)  # unlike flex-start and queued nodes, these are repaired


def test_plan_pool_group_queued_enables_queued_provisioning_and_labels_its_nodes(plan_pool):
    pool = plan_pool(name="q", tpuType="v6e-16", capacity="queued").pools[0]

    assert pool.queued_provisioning is True
    assert pool.labels == {"cloud.google.com/gke-queued": "true", "tpuplane.dev/capacity": "queued",
                           "cloud.google.com/gke-networking-dra-driver": "true"}  # v6e: accelerator networking
    assert pool.node_count is None
    assert pool.autoscaling == PoolScaling(initial_node_count=0, min_node_count=0, max_node_count=4,
                                           location_policy="ANY")
    assert pool.reservation_affinity == ReservationAffinity("NO_RESERVATION")
    assert (pool.spot, pool.flex_start) == (False, False)


@pytest.mark.parametrize("capacity", ["on-demand", "spot", "flex-start", "reservation"])
def test_plan_pool_group_labels_nodes_with_their_capacity_mode_only(plan_pool, capacity):
    group = plan_pool(name="p", tpuType="v5p-128", capacity=capacity,
                      reservations=[{"name": "r", "tpuType": "v5p-128"}],
                      **({"reservation": "r"} if capacity == "reservation" else {}))

    assert group.pools[0].labels == {"tpuplane.dev/capacity": capacity}


def test_plan_pool_group_reservation_consumes_the_named_reservation_of_the_stack(plan_pool):
    group = plan_pool(name="big", tpuType="v5p-128", slices=2, capacity="reservation", reservation="v5p-res",
                      reservations=[{"name": "v5p-res", "tpuType": "v5p-128", "slices": 2}])

    for pool in group.pools:
        assert pool.reservation_affinity == ReservationAffinity("SPECIFIC_RESERVATION", RESERVATION_KEY, ("v5p-res",))
        assert (pool.node_count, pool.spot) == (16, False)


def test_plan_pool_group_reservation_outside_the_stack_keeps_its_full_path(plan_pool):
    path = "projects/shared-tpu/reservations/r1"

    pool = plan_pool(name="big", tpuType="v5p-128", capacity="reservation", reservation=path).pools[0]

    assert pool.reservation_affinity == ReservationAffinity("SPECIFIC_RESERVATION", RESERVATION_KEY, (path,))


@pytest.mark.parametrize("capacity", ["on-demand", "spot", "flex-start", "queued"])
def test_plan_pool_group_taints_every_tpu_pool(plan_pool, capacity):
    assert plan_pool(name="p", tpuType="v6e-16", capacity=capacity).pools[0].taints == [TPU_TAINT]


# --- TPU shapes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tpu_type", "machine_type", "machine", "chips"), [
    ("v6e-4", None, "ct6e-standard-4t", 4),
    ("v5p-8", None, "ct5p-hightpu-4t", 4),
    ("tpu7x-8", None, "tpu7x-standard-4t", 4),
    ("v6e-8", "ct6e-standard-8t", "ct6e-standard-8t", 8),
])
def test_plan_pool_group_single_host_has_no_topology_and_no_placement(plan_pool, tpu_type, machine_type, machine,
                                                                        chips):
    group = plan_pool(name="one", tpuType=tpu_type, **({"machineType": machine_type} if machine_type else {}))
    pool = group.pools[0]

    assert (pool.machine_type, pool.node_count, pool.chips) == (machine, 1, chips)
    assert (pool.tpu_topology, pool.placement_type, pool.workload_policy) == (None, None, None)
    assert group.workload_policy is None


@pytest.mark.parametrize(("tpu_type", "topology", "vms"), [
    ("v6e-8", "2x4", 2),
    ("v6e-16", "4x4", 4),
    ("v5p-128", "4x4x4", 16),
])
def test_plan_pool_group_multi_host_is_compact_with_its_topology(plan_pool, tpu_type, topology, vms):
    pool = plan_pool(name="multi", tpuType=tpu_type).pools[0]

    assert (pool.placement_type, pool.tpu_topology, pool.node_count) == ("COMPACT", topology, vms)
    assert pool.workload_policy is None


def test_plan_pool_group_tpu7x_multi_host_uses_a_workload_policy_instead_of_compact(plan_pool):
    group = plan_pool(name="iron", tpuType="tpu7x-16", slices=2)

    expected = WorkloadPolicyPlan(name="fleet-iron-wp", accelerator_topology="2x2x2")
    assert group.workload_policy == expected
    for pool in group.pools:
        assert (pool.placement_type, pool.workload_policy) == (None, expected)
        assert (pool.tpu_topology, pool.node_count, pool.machine_type) == ("2x2x2", 2, "tpu7x-standard-4t")


# --- names by slice index ------------------------------------------------------------------------------


def test_plan_pool_group_names_one_pool_per_slice_by_index(plan_pool):
    group = plan_pool(name="train", tpuType="v6e-16", slices=3)

    assert [(p.group, p.index, p.name) for p in group.pools] == [
        ("train", 0, "train-0"), ("train", 1, "train-1"), ("train", 2, "train-2")]


def test_plan_pool_group_growing_4_to_8_slices_keeps_the_first_four_pools_identical(plan_pool):
    four = plan_pool(name="train", tpuType="v6e-16", slices=4, capacity="spot").pools
    eight = plan_pool(name="train", tpuType="v6e-16", slices=8, capacity="spot").pools

    assert eight[:4] == four
    assert [p.name for p in eight[4:]] == ["train-4", "train-5", "train-6", "train-7"]


def test_plan_pool_group_shrinking_8_to_6_slices_keeps_a_prefix(plan_pool):
    eight = plan_pool(name="train", tpuType="v6e-16", slices=8, capacity="spot").pools
    six = plan_pool(name="train", tpuType="v6e-16", slices=6, capacity="spot").pools

    assert six == eight[:6]


def test_plan_slice_group_is_the_same_in_every_process():
    first, second = printed_by_two_processes(
        "from conftest import MINIMAL_CONFIG\n"
        "from tpuplane.infra.fleet.nodepools import plan_tpu_pools\n"
        "from tpuplane.infra.stack import load_stack_config\n"
        "config = {**MINIMAL_CONFIG, 'tpuplane:tpuPools': [*MINIMAL_CONFIG['tpuplane:tpuPools'],\n"
        "          {'name': 'iron', 'tpuType': 'tpu7x-16', 'slices': 3}]}\n"
        "print(repr(plan_tpu_pools(load_stack_config(config).tpu_pools)))")
    assert first == second and "iron-2" in first


# --- totals ----------------------------------------------------------------------------------------------


def test_pool_group_plan_chips_count_every_slice(plan_pool):
    assert plan_pool(name="train", tpuType="v6e-16", slices=4).chips == 64


def test_chips_by_generation_sums_groups_of_the_same_generation_sorted_by_name(raw_config):
    raw_config["tpuplane:tpuPools"] += [{"name": "eval", "tpuType": "v6e-8", "slices": 2},
                                        {"name": "iron", "tpuType": "tpu7x-16"}]
    groups = plan_tpu_pools(load_stack_config(raw_config).tpu_pools)

    totals = chips_by_generation(groups)

    assert totals == {"tpu7x": 8, "v5p": 128, "v6e": 4 * 16 + 2 * 8}
    assert list(totals) == sorted(totals)


def test_plan_tpu_pools_plans_every_group_in_config_order(raw_config):
    groups = plan_tpu_pools(load_stack_config(raw_config).tpu_pools)

    assert [(g.config.name, len(g.pools)) for g in groups] == [("train", 4), ("big", 2)]


def test_plan_pool_group_upgrades_slices_in_place_one_node_at_a_time(plan_pool):
    pool = plan_pool(name="big", tpuType="v5p-128").pools[0]

    assert (pool.upgrade.strategy, pool.upgrade.max_surge, pool.upgrade.max_unavailable) == ("SURGE", 0, 1)


@pytest.mark.parametrize("capacity", ["flex-start", "queued"])
def test_plan_pool_group_flex_start_and_queued_pools_use_short_lived_upgrades(plan_pool, capacity):
    """GKE's dedicated strategy for nodes that live for one run: never upgraded in place, no surge settings."""
    pool = plan_pool(name="big", tpuType="v5p-128", capacity=capacity, maxRunDuration="3600s").pools[0]

    assert (pool.upgrade.strategy, pool.upgrade.max_surge, pool.upgrade.max_unavailable) == ("SHORT_LIVED", None, None)
