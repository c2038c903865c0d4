"""The nodes GKE registers for a stack's pools: what the sandbox gives its API server in place of real VMs."""

from __future__ import annotations

import pytest

from tpuplane.infra.stack import load_stack_config
from tpuplane.infra.fleet.nodes import node_objects, stack_nodes


def nodes_of(raw: dict) -> dict[str, list[dict]]:
    cfg = load_stack_config(raw)
    return {group.pool: node_objects(group, cfg.cluster.name, cfg.region) for group in stack_nodes(cfg)}


@pytest.fixture
def minimal_nodes(raw_config) -> dict[str, list[dict]]:
    return nodes_of(raw_config)


def test_one_node_per_vm_of_every_slice_pool_and_the_cpu_pool_at_its_maximum(minimal_nodes):
    counts = {pool: len(nodes) for pool, nodes in minimal_nodes.items()}
    assert counts == {"train-0": 4, "train-1": 4, "train-2": 4, "train-3": 4,
                      "big-0": 16, "big-1": 16, "cpu": 10}  # the CPU pool's default maxNodes


def test_a_tpu_node_carries_the_labels_flavors_select(minimal_nodes):
    labels = minimal_nodes["train-0"][0]["metadata"]["labels"]
    assert labels["cloud.google.com/gke-tpu-accelerator"] == "tpu-v6e-slice"
    assert labels["cloud.google.com/gke-tpu-topology"] == "4x4"
    assert labels["cloud.google.com/gke-nodepool"] == "train-0"
    assert labels["cloud.google.com/gke-spot"] == "true"
    assert labels["tpuplane.dev/capacity"] == "spot"
    assert labels["node.kubernetes.io/instance-type"] == "ct6e-standard-4t"
    assert labels["topology.kubernetes.io/zone"] == "us-east5-b"


def test_a_reservation_node_names_its_reservation(minimal_nodes):
    assert minimal_nodes["big-0"][0]["metadata"]["labels"]["cloud.google.com/reservation-name"] == "v5p-res"
    assert "cloud.google.com/reservation-name" not in minimal_nodes["train-0"][0]["metadata"]["labels"]


def test_a_tpu_node_is_tainted_so_only_tpu_pods_land(minimal_nodes):
    assert minimal_nodes["train-0"][0]["spec"]["taints"] == [
        {"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}]
    assert minimal_nodes["cpu"][0]["spec"] == {}


def test_a_tpu_node_offers_its_chips_and_gkes_allocatable_cpu_and_memory(minimal_nodes):
    status = minimal_nodes["train-0"][0]["status"]
    assert status["allocatable"]["google.com/tpu"] == "4"
    assert status["capacity"]["cpu"] == "180"
    assert status["allocatable"]["cpu"] == "179480m"  # less 60 + 10 + 2 x 5 + 176 x 2.5 millicores (GKE)
    assert status["allocatable"]["pods"] == "15"


def test_a_host_of_unpublished_shape_offers_only_chips_and_pods(raw_config):
    raw_config["tpuplane:tpuPools"] = [{"name": "x", "tpuType": "tpu7x-8", "slices": 1, "capacity": "spot"}]
    raw_config.pop("tpuplane:reservations")
    status = nodes_of(raw_config)["x-0"][0]["status"]
    assert set(status["allocatable"]) == {"google.com/tpu", "pods"}


def test_a_workload_policy_pools_nodes_carry_the_policys_name(raw_config):
    """tpu7x multi-host pools run under a workload policy; workloads select its name (tpu-on-gke.md §2)."""
    raw_config["tpuplane:tpuPools"] = [{"name": "x", "tpuType": "tpu7x-16", "slices": 1, "capacity": "spot"}]
    raw_config.pop("tpuplane:reservations")
    node = nodes_of(raw_config)["x-0"][0]
    assert node["metadata"]["labels"]["cloud.google.com/placement-policy-name"] == "fleet-x-wp"


def test_queued_nodes_carry_gkes_queued_taint_and_label(raw_config):
    raw_config["tpuplane:tpuPools"] = [{"name": "q", "tpuType": "v6e-16", "slices": 1, "capacity": "queued"}]
    raw_config.pop("tpuplane:reservations")
    node = nodes_of(raw_config)["q-0"][0]
    assert {"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert node["metadata"]["labels"]["cloud.google.com/gke-queued"] == "true"


def test_flex_start_pools_register_at_their_scaled_up_size(raw_config):
    raw_config["tpuplane:tpuPools"] = [{"name": "f", "tpuType": "v6e-16", "slices": 1, "capacity": "flex-start"}]
    raw_config.pop("tpuplane:reservations")
    assert len(nodes_of(raw_config)["f-0"]) == 4


def test_node_names_are_unique_across_the_stack(minimal_nodes):
    names = [n["metadata"]["name"] for nodes in minimal_nodes.values() for n in nodes]
    assert len(names) == len(set(names))
