"""Slice groups that scale from zero (maxSlices pools, minSlices held at full size), and NAP's TPU limits."""

import pytest

from tpuplane.infra.args import Source
from tpuplane.infra.fleet.autoscaling import (
    Autoprovisioning,
    PoolReach,
    PoolScaling,
    ResourceLimit,
    SliceAutoscaling,
    SliceGroupScaling,
    autoprovisioning_problems,
    fleet_reach,
    plan_autoprovisioning,
    slice_range_problems,
)
from tpuplane.infra.fleet.catalog import resolve_tpu_type


def test_a_group_has_max_slices_pools_each_scaling_to_its_full_size_the_first_min_held():
    group = SliceGroupScaling(resolve_tpu_type("v5p-128"), min_slices=1, max_slices=3)

    assert group.pools == [PoolScaling(16, 16, 16), PoolScaling(0, 0, 16), PoolScaling(0, 0, 16)]
    assert [p.held for p in group.pools] == [True, False, False]
    assert all(p.location_policy == "ANY" for p in group.pools)


def test_kueue_quota_follows_the_maximum():
    from tpuplane.infra.batch.kueue import render_cluster_queues
    from tpuplane.infra.stack import load_stack_config

    cfg = load_stack_config({"gcp:project": "acme-ml", "gcp:region": "us-east5",
                             "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b"},
                             "tpuplane:tpuPools": [{"name": "train", "tpuType": "v6e-16", "capacity": "spot",
                                                    "autoscaling": {"minSlices": 0, "maxSlices": 4}}]})

    [queue] = render_cluster_queues(cfg.batch)
    tpu = [r for g in queue["spec"]["resourceGroups"] for f in g["flavors"] for r in f["resources"]
           if f["name"] != "cpu" and r["name"] == "google.com/tpu"]
    assert [r["nominalQuota"] for r in tpu] == ["64"]  # 4 slices x 16 chips, though none may exist yet


def test_single_host_slices_scale_node_by_node_one_pool_each():
    group = SliceGroupScaling(resolve_tpu_type("v6e-4"), min_slices=0, max_slices=2)

    assert group.pools == [PoolScaling(0, 0, 1), PoolScaling(0, 0, 1)]


@pytest.mark.parametrize("capacity", ["on-demand", "spot", "reservation"])
def test_a_valid_range_passes_for_capacity_that_does_not_scale_itself(capacity):
    scaling = SliceAutoscaling(min_slices=0, max_slices=4)

    assert slice_range_problems(scaling, Source.config("p", SliceAutoscaling), capacity=capacity) == []


BAD_RANGES = [
    ("flex-start", 0, 2, "tpuplane:tpuPools[0].autoscaling", "no autoscaling range on a flex-start or queued group"),
    ("queued", 0, 2, "tpuplane:tpuPools[0].autoscaling", "no autoscaling range"),
    ("on-demand", 3, 2, "tpuplane:tpuPools[0].autoscaling.minSlices", "at most maxSlices (2)"),
    ("on-demand", 0, 1000, "tpuplane:tpuPools[0].autoscaling.maxSlices", "at most 937 slices"),
]


@pytest.mark.parametrize(("capacity", "low", "high", "path", "allowed"), BAD_RANGES)
def test_bad_ranges_are_refused_with_their_path(capacity, low, high, path, allowed):
    scaling = SliceAutoscaling(min_slices=low, max_slices=high)
    source = Source.config("tpuplane:tpuPools[0].autoscaling", SliceAutoscaling)

    problems = slice_range_problems(scaling, source, capacity=capacity, spec=resolve_tpu_type("v5p-128"))

    assert [(p.path, allowed in p.allowed) for p in problems] == [(path, True)]


def test_in_a_program_the_paths_are_the_args_fields():
    source = Source.args("TpuSlicePoolArgs.autoscaling", SliceAutoscaling)

    [problem] = slice_range_problems(SliceAutoscaling(min_slices=3, max_slices=2), source, capacity="spot")

    assert (problem.path, problem.allowed) == ("TpuSlicePoolArgs.autoscaling.min_slices", "at most max_slices (2)")


POOLS = [PoolReach("train-0", "ct6e-standard-4t", 4), PoolReach("cpu", "n2-standard-32", 10)]


def test_fleet_reach_counts_every_pool_at_its_maximum_in_gb_as_nap_does():
    vcpus, memory_gb, unknown = fleet_reach(POOLS + [PoolReach("x", "tpu7x-standard-4t", 2)])

    assert vcpus == 4 * 180 + 10 * 32
    assert memory_gb == 4255  # 4 x 720 GB + 10 x 128 GiB (137.44 GB each), rounded up
    assert unknown == ["x"]


NAP_SOURCE = Source.config("tpuplane:cluster.autoprovisioning", Autoprovisioning)


def test_nap_limits_that_leave_room_for_the_fleet_pass_and_plan_sorted():
    nap = Autoprovisioning(cpu=2000, memory_gb=5000, tpu_chips={"v6e": 64, "v5p": 32})
    assert autoprovisioning_problems(nap, NAP_SOURCE, pools=POOLS, group_chips={"v6e": 64}) == []

    plan = plan_autoprovisioning(nap, ["us-east5-b"])

    assert plan.resource_limits == (ResourceLimit("cpu", 0, 2000), ResourceLimit("memory", 0, 5000),
                                    ResourceLimit("tpu-v5p-slice", 0, 32), ResourceLimit("tpu-v6e-slice", 0, 64))


BAD_NAP = [
    ({"cpu": 100}, "tpuplane:cluster.autoprovisioning.cpu", "at least 1040"),
    ({"memory_gb": 100}, "tpuplane:cluster.autoprovisioning.memoryGb", "at least 4255"),
    ({"tpu_chips": {"v6e": 32}}, "tpuplane:cluster.autoprovisioning.tpuChips.v6e", "at least 64"),
    ({"tpu_chips": {"tpu7": 8}}, "tpuplane:cluster.autoprovisioning.tpuChips", "one of v4, v5e, v5p, v6e, tpu7x"),
    ({"tpu_chips": {"v9": 8}}, "tpuplane:cluster.autoprovisioning.tpuChips", "one of"),
]


@pytest.mark.parametrize(("changes", "path", "allowed"), BAD_NAP)
def test_bad_nap_limits_are_refused_with_their_path(changes, path, allowed):
    nap = Autoprovisioning(**{"cpu": 2000, "memory_gb": 5000, "tpu_chips": {"v6e": 64}, **changes})

    problems = autoprovisioning_problems(nap, NAP_SOURCE, pools=POOLS, group_chips={"v6e": 64})

    assert [(p.path, allowed in p.allowed) for p in problems] == [(path, True)]
