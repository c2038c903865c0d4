"""Specification of the fleet summary: what a plan means for TPU capacity, queues and Pathways, read back
from the planned resources only (so it works on a fresh plan and on the plan files `tpuplane diff` reads).
"""

from __future__ import annotations

import pytest

from conftest import STACKS, stack_file_config
from tpuplane.infra.review.plan import parse_plan
from tpuplane.infra.review.summary import capacity_of, key_properties, summarize
from tpuplane.infra.review.summary_markdown import mermaid


@pytest.fixture(scope="module")
def stack_plans():
    """Each shipped stack, planned once under mocks (GCP and Kubernetes cannot exist here)."""
    from tpuplane.components.offline import run_program_file

    return {stack: run_program_file(STACKS / "__main__.py", stack_file_config(stack), project="tpuplane",
                                    stack=stack) for stack in ("dev", "prod", "pathways")}


@pytest.fixture(scope="module")
def summaries(stack_plans):
    return {stack: summarize(plan) for stack, plan in stack_plans.items()}


def _group(summary, name):
    return next(g for g in summary.pool_groups if g.name == name)


def test_summary_groups_the_node_pools_of_a_slice_pool(summaries):
    (group,) = summaries["dev"].pool_groups

    assert (group.name, group.tpu_type, group.slices, group.vms, group.chips, group.capacity) == \
        ("train", "v6e-16", 2, 8, 32, "spot")
    assert group.node_pools == ("train-0", "train-1")


def test_summary_reserved_group_names_its_reservation(summaries):
    group = _group(summaries["prod"], "pretrain")

    assert (group.tpu_type, group.chips, group.capacity, group.reservation) == \
        ("v5p-128", 256, "reservation", "v5p-res")


def test_summary_single_host_pool_without_placement_policy_gets_its_tpu_type(summaries):
    group = _group(summaries["prod"], "eval")

    assert (group.tpu_type, group.topology, group.slices, group.chips, group.capacity) == \
        ("v6e-8", "2x4", 2, 16, "flex-start")


def test_summary_chips_by_generation_and_mode(summaries):
    assert summaries["prod"].chips_by_generation() == {"v5p": 256, "v6e": 16}
    assert summaries["pathways"].chips_by_mode() == {("v6e", "on-demand"): 32, ("v6e", "spot"): 64}


def test_summary_queues_carry_cohort_quotas_and_local_queues(summaries):
    research = next(q for q in summaries["pathways"].queues if q.name == "research")
    tpu = next(x for x in research.quotas if x.resource == "google.com/tpu" and x.flavor != "cpu")

    assert (research.cohort, research.local_queues) == ("tpuplane", ("research/research",))
    assert (tpu.flavor, tpu.nominal, tpu.borrowing_limit) == ("tpu-v6e-slice-4x4-spot", "48", "16")


def test_summary_flavors_select_the_pools_their_labels_match(summaries):
    flavors = {f.name: f.pools for f in summaries["pathways"].flavors}

    assert flavors == {"cpu": ("shared-cpu",), "tpu-v6e-slice-4x4-spot": ("batch",)}


def test_summary_pathways_service_and_sidecar_image(summaries):
    (service,) = summaries["pathways"].pathways
    (image,) = summaries["pathways"].sidecar_images

    assert (service.namespace, service.name, service.instance_type, service.instances) == \
        ("pw", "pw", "tpuv6e:4x4", "2")
    assert service.server_image.endswith("/pathways/server:jax-0.10.0")
    assert image.base_image.endswith("sidecar:20260423-python_3.12-jax_0.10.0")


def test_summary_lists_config_group_objects_by_kind_and_name():
    """A plan of a program that applies YAML through a ConfigGroup (tpuplane's own stacks register each object)."""
    group = {"urn": "urn:pulumi:s::p::kubernetes:yaml/v2:ConfigGroup::extras", "type": "kubernetes:yaml/v2:ConfigGroup",
             "name": "extras", "inputs": {"objs": [
                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "team"}},
                 {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                  "metadata": {"name": "urgent"}, "value": 900}]}}
    plan = parse_plan({"project": "p", "stack": "s", "resources": [group]})

    assert summarize(plan).config_objects == (
        ("extras", "ConfigMap", "team/a"), ("extras", "WorkloadPriorityClass", "urgent"))


def test_summary_counts_resources_per_type(summaries, stack_plans):
    counts = dict(summaries["dev"].resource_counts)

    assert counts["NodePool"] == 3 and counts["WorkloadPriorityClass"] == 5
    assert summaries["dev"].total_resources == len(stack_plans["dev"].resources)


def test_summary_reads_a_plan_file_as_diff_does(stack_plans, summaries):
    parsed = parse_plan(stack_plans["prod"].to_json())

    assert summarize(parsed) == summaries["prod"]


@pytest.mark.parametrize(("node_config", "extra", "expected"), [
    ({"spot": True}, {}, ("spot", "")),
    ({"flexStart": True}, {}, ("flex-start", "")),
    ({}, {"queuedProvisioning": {"enabled": True}}, ("queued", "")),
    ({"reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                              "values": ["projects/p/reservations/r1"]}}, {}, ("reservation", "r1")),
    ({"reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}}, {}, ("on-demand", "")),
])
def test_capacity_of_each_mode(node_config, extra, expected):
    assert capacity_of({"nodeConfig": node_config, **extra}) == expected


def test_key_properties_of_a_tpu_node_pool(stack_plans):
    pool = stack_plans["prod"].named("pretrain-0")

    assert dict(key_properties(pool.type, pool.inputs)) == {
        "machine type": "ct5p-hightpu-4t", "topology": "4x4x4", "nodes": "16", "capacity": "reservation v5p-res",
        "zones": "us-east5-a"}


def test_key_properties_of_a_cluster_queue_show_quota_per_flavor(stack_plans):
    queue = stack_plans["pathways"].named("clusterqueue-research")

    props = dict(key_properties(queue.type, queue.inputs))

    assert props["cohort"] == "tpuplane"
    assert props["quota"].startswith("cpu: google.com/tpu=0, cpu=288 (+96 borrowable)")  # 6 x n2-standard-64
    assert "; tpu-v6e-slice-4x4-spot: google.com/tpu=48 (+16 borrowable), cpu=" in props["quota"]


def test_mermaid_links_cluster_pools_flavors_cluster_queues_and_local_queues(summaries):
    diagram = "\n".join(mermaid(summaries["pathways"]))

    assert diagram.startswith("```mermaid\nflowchart LR") and diagram.endswith("```")
    for edge in ("cluster_shared__us_east5_ --> pool_batch", "pool_batch --> flavor_tpu_v6e_slice_4x4_spot",
                 'flavor_tpu_v6e_slice_4x4_spot -- "google.com/tpu=48" --> cq_research',
                 "cq_research --> lq_research_research"):
        assert edge in diagram
