"""Specification of the scheduling check's facts read from a live cluster: node pools from nodes, and
`workload check`'s simulation on the cluster's own ResourceFlavors, ClusterQueues and LocalQueues."""

from __future__ import annotations

from decimal import Decimal

import recorded_kueue as rk
from tpuplane.infra.batch.cluster_facts import as_manifest, cluster_facts, node_pools
from tpuplane.infra.batch.schedule_check import check_workload


def live_facts(nodes=None):
    return cluster_facts([rk.resource_flavor()], rk.team_queues(),
                         [rk.local_queue("team-a", "team-a", "team-a"), rk.local_queue("team-b", "team-b", "team-b")],
                         rk.fleet_nodes() if nodes is None else nodes)


def test_nodes_group_into_their_gke_node_pools():
    pools = {p.name: p for p in node_pools(rk.fleet_nodes())}

    assert sorted(pools) == ["cpu-np", "train-0", "train-1", "train-2", "train-3"]
    train = pools["train-0"]
    assert (train.nodes, train.tpu_chips, train.cpu, train.memory_mib) == (4, 4, Decimal("179.5"), 702 * 1024)
    assert train.labels["cloud.google.com/gke-tpu-topology"] == "4x4"
    assert "kubernetes.io/hostname" not in train.labels  # not shared by the pool's nodes
    assert train.taints == ({"key": rk.TPU, "value": "present", "effect": "NoSchedule"},)


def test_a_pool_is_as_small_as_its_smallest_node_and_cordoned_nodes_take_no_pods():
    nodes = [rk.node("a", "p", chips=4), rk.node("b", "p", chips=2), rk.node("c", "p", chips=1, cordoned=True)]

    (pool,) = node_pools(nodes)

    assert (pool.nodes, pool.tpu_chips) == (2, 2)


def test_a_node_without_a_pool_label_is_a_pool_of_its_own():
    lone = rk.node("kind-worker", "x")
    del lone["metadata"]["labels"]["cloud.google.com/gke-nodepool"]

    assert [p.name for p in node_pools([lone])] == ["kind-worker"]


def test_check_passes_a_rendered_jobset_on_the_clusters_queues_and_pools():
    jobset = rk.jobset("a-train", "team-a", queue="team-a", slices=2)

    result = check_workload(as_manifest(jobset), live_facts())

    assert result.ok, result.all_problems()
    assert (result.cluster_queue, result.pod_sets[0].flavor) == ("team-a", rk.FLAVOR)
    assert result.pod_sets[0].pools == ("train-0", "train-1", "train-2", "train-3")


def test_check_refuses_more_than_the_cohort_could_ever_lend():
    jobset = rk.jobset("a-huge", "team-a", queue="team-a", slices=5)

    result = check_workload(as_manifest(jobset), live_facts())

    assert not result.ok
    assert "quota too small even with the cohort (google.com/tpu 80 > 64)" in " ".join(result.all_problems())


def test_check_refuses_a_selector_no_pool_offers():
    jobset = rk.jobset("a-big", "team-a", queue="team-a",
                       node_selector={**rk.V6E_16_LABELS, "cloud.google.com/gke-tpu-topology": "8x8"})

    result = check_workload(as_manifest(jobset), live_facts())

    assert "no flavor fits" in " ".join(result.all_problems())


def test_check_refuses_a_priority_class_the_cluster_does_not_have():
    """Kueue makes no Workload for a JobSet whose priority-class label names no WorkloadPriorityClass (seen on
    the sandbox: it stays suspended, with no event saying why)."""
    jobset = rk.jobset("a-odd", "team-a", queue="team-a")
    jobset["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent"
    facts = live_facts()
    known = cluster_facts([rk.resource_flavor()], rk.team_queues(), [rk.local_queue("team-a", "team-a", "team-a")],
                          rk.fleet_nodes(), rk.priority_classes())

    assert check_workload(as_manifest(jobset), facts).ok  # the classes could not be read: any priority goes
    assert check_workload(as_manifest(jobset), known).all_problems() == [
        "its kueue.x-k8s.io/priority-class label names WorkloadPriorityClass urgent, which does not exist (there "
        "are: high, low, medium): Kueue makes no Workload for it, so it never runs"]


def claim(name: str, namespace: str) -> dict:
    """A PersistentVolumeClaim as the API server lists it (only what the check reads)."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteMany"]}}


def mounting(jobset: dict, claim_name: str) -> dict:
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return jobset


def test_check_refuses_a_claim_the_namespace_does_not_have_on_the_cluster():
    jobset = mounting(rk.jobset("a-read", "team-a", queue="team-a"), "datasets")
    claims = [claim("datasets", "team-b"), claim("scratch", "team-a")]
    known = cluster_facts([rk.resource_flavor()], rk.team_queues(), [rk.local_queue("team-a", "team-a", "team-a")],
                          rk.fleet_nodes(), claims=claims)

    assert check_workload(as_manifest(jobset), known).all_problems() == [
        "slice: mounts storage datasets, which is for namespaces team-b, not team-a: add the team to the "
        "storage's teams, or run in one of those namespaces"]


def test_check_takes_any_claim_when_the_clusters_claims_could_not_be_read():
    jobset = mounting(rk.jobset("a-read", "team-a", queue="team-a"), "datasets")

    assert check_workload(as_manifest(jobset), live_facts()).ok


def test_as_manifest_keeps_what_was_submitted_only():
    jobset = rk.jobset("a-train", "team-a", queue="team-a")

    manifest = as_manifest(jobset)

    assert set(manifest) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(manifest["metadata"]) == {"name", "namespace", "labels", "annotations"}
