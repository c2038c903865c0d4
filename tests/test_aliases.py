"""URNs are a public contract: a component renamed or re-parented with `aliases` replaces nothing.

Each test plans an older URN layout and the new one under Pulumi's mocks (GCP cannot exist here), then diffs the
two plans as `tpuplane diff` does: the offline runner resolves aliases as the engine does (a child answers to each
earlier URN of its parent), and the diff matches a resource to its earlier URN.
"""

from __future__ import annotations

from typing import Callable

import pulumi
import pytest

from tpuplane.components import TpuCluster, TpuClusterArgs, TpuReservation, TpuReservationArgs, TpuSlicePool, \
    TpuSlicePoolArgs
from plan_factory import diff_docs

from tpuplane.components.offline import run_under_mocks
from tpuplane.infra.review.plan import Plan
from tpuplane.infra.review.plan_diff import Action

PROJECT, ZONE = "acme-ml", "us-east5-b"
KEPT = {"gcp:container/nodePool:NodePool", "gcp:container/cluster:Cluster", "gcp:compute/reservation:Reservation"}


def fleet(*, cluster_name: str = "fleet", reservation_name: str = "v5p-res", pools_under_cluster: bool = True,
          aliases: bool = True) -> Callable[[], None]:
    """A cluster, a reservation and a slice group consuming it; names and parents vary, GCP names never do."""
    def program() -> None:
        cluster = TpuCluster(cluster_name, TpuClusterArgs(project=PROJECT, region="us-east5", name="fleet", zone=ZONE),
                             opts=pulumi.ResourceOptions(aliases=[pulumi.Alias(name="fleet")] if aliases and
                                                         cluster_name != "fleet" else None))
        reservation = TpuReservation(reservation_name, TpuReservationArgs(
            project=PROJECT, zone=ZONE, name="v5p-res", tpu_type="v5p-128"),
            opts=pulumi.ResourceOptions(aliases=[pulumi.Alias(name="v5p-res")] if aliases and
                                        reservation_name != "v5p-res" else None))
        placement = pulumi.ResourceOptions(parent=cluster) if pools_under_cluster else pulumi.ResourceOptions(
            aliases=[pulumi.Alias(parent=cluster)] if aliases else None)
        TpuSlicePool("train", TpuSlicePoolArgs(
            project=PROJECT, location="us-east5", zone=ZONE, cluster=cluster.cluster_name, cluster_name="fleet",
            tpu_type="v5p-128", slices=2, capacity="reservation", reservation="v5p-res",
            service_account=cluster.node_service_account_email),
            opts=pulumi.ResourceOptions.merge(placement, pulumi.ResourceOptions(depends_on=[reservation])))
    return program


def plan(program: Callable[[], None]) -> Plan:
    return run_under_mocks(program, {}, project="tpuplane", stack="prod")


def changed_kept_resources(before: Plan, after: Plan) -> list[tuple[str, str]]:
    """(action, name) of every node pool, cluster and reservation the diff would touch."""
    diff = diff_docs(before.to_json(), after.to_json())
    return sorted((change.action.value, change.name) for change in diff.changes if change.type in KEPT)


@pytest.fixture(scope="module")
def older() -> Plan:
    return plan(fleet())


@pytest.mark.parametrize("layout", [
    {"pools_under_cluster": False},
    {"cluster_name": "main"},
    {"reservation_name": "training-capacity"},
    {"cluster_name": "main", "reservation_name": "training-capacity", "pools_under_cluster": False},
], ids=["slice-pool-reparented", "cluster-renamed", "reservation-renamed", "all-at-once"])
def test_aliased_layout_replaces_no_node_pool_reservation_or_cluster(older, layout):
    newer = plan(fleet(**layout))
    assert {r.urn for r in newer.resources} != {r.urn for r in older.resources}
    assert changed_kept_resources(older, newer) == []


@pytest.mark.parametrize("layout", [{"pools_under_cluster": False}, {"cluster_name": "main"}],
                         ids=["slice-pool-reparented", "cluster-renamed"])
def test_unaliased_layout_would_recreate_them(older, layout):
    changed = changed_kept_resources(older, plan(fleet(**layout, aliases=False)))
    assert {action for action, _ in changed} == {Action.CREATE.value, Action.DELETE.value}


def test_plan_lists_the_earlier_urns_of_a_moved_node_pool():
    pool = plan(fleet(pools_under_cluster=False)).named("train-0")
    assert pool.aliases == (
        "urn:pulumi:prod::tpuplane::tpuplane:index:TpuCluster$tpuplane:index:TpuSlicePool"
        "$gcp:container/nodePool:NodePool::train-0",)


def test_diff_never_takes_an_alias_to_a_resource_of_another_type(older):
    """An alias cannot hide a deletion: a node pool claiming the cluster's earlier URN is no move of it."""
    newer = plan(fleet()).to_json()
    pool = next(r for r in newer["resources"] if r["name"] == "train-0")
    cluster = next(r for r in newer["resources"] if r["type"] == "gcp:container/cluster:Cluster")
    newer["resources"] = [r for r in newer["resources"] if r is not cluster]
    pool["aliases"] = [cluster["urn"]]
    changes = diff_docs(older.to_json(), newer).changes
    assert [(c.action, c.name) for c in changes if c.type == "gcp:container/cluster:Cluster"] == [
        (Action.DELETE, "fleet")]
