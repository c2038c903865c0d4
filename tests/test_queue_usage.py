"""Specification of `tpuplane queues`: Kueue's quota arithmetic (pkg/cache/scheduler/resource_node.go) over
ClusterQueues as the API server returns them, and the tables and JSON built from it."""

from __future__ import annotations

from decimal import Decimal

import pytest

import recorded_kueue as rk
from tpuplane.infra.batch.queue_usage import (
    CLUSTER_QUEUE_COLUMNS,
    QueueBook,
    amount_text,
    cluster_queue_rows,
    cohort_rows,
    local_queue_rows,
    queues_json,
)

KEY = (rk.FLAVOR, rk.TPU)


def book(*queues, local=()):
    return QueueBook(queues, local)


def test_queue_without_a_cohort_has_its_nominal_quota_only():
    queues = book(rk.cluster_queue("solo", 64, used=48, cohort=None))

    assert (queues.available("solo", KEY), queues.from_cohort("solo", KEY), queues.most("solo", KEY)) == (16, 0, 64)


@pytest.fixture
def lending():
    """a: 32 chips, lends at most 8 (keeps 24); b: 16, uses 16; c: 16, idle."""
    return [rk.cluster_queue("a", 32, lending_limit=8), rk.cluster_queue("b", 16, used=16),
            rk.cluster_queue("c", 16)]


def test_available_counts_the_guaranteed_part_and_the_cohorts_free_pool(lending):
    queues = book(*lending)

    # pool = 8 (a's lendable) + 16 + 16 = 40, of which b draws 16: 24 free
    assert queues.pool_free(rk.COHORT, KEY) == 24
    assert queues.available("a", KEY) == 24 + 24
    assert queues.available("b", KEY) == 24
    assert (queues.from_cohort("a", KEY), queues.from_cohort("b", KEY)) == (16, 24)


def test_borrowing_limit_caps_what_the_pool_gives(lending):
    lending[1] = rk.cluster_queue("b", 16, used=16, borrowing_limit=4)

    assert book(*lending).available("b", KEY) == 4


def test_most_a_queue_could_ever_hold(lending):
    queues = book(*lending)

    assert (queues.most("a", KEY), queues.most("b", KEY)) == (24 + 40, 40)
    lending[1] = rk.cluster_queue("b", 16, borrowing_limit=4)
    assert book(*lending).most("b", KEY) == 20


def test_lent_splits_the_borrowed_quota_over_idle_lenders_exactly(lending):
    lending[1] = rk.cluster_queue("b", 16, used=36, borrowed=20)
    queues = book(*lending)

    # a has 8 idle in the pool, c 16: 20 borrowed chips split 8:16 by largest remainder
    assert [queues.lent(q, KEY) for q in ("a", "b", "c")] == [7, 0, 13]


def test_lent_by_the_one_lender_is_exact():
    queues = book(*rk.team_queues())

    assert [queues.lent(q, KEY) for q in ("team-a", "team-b", "unassigned")] == [0, 0, 16]


def test_amounts_read_kubernetes_quantities():
    queue = rk.cluster_queue("m", 0)
    queue["spec"]["resourceGroups"][0]["flavors"][-1]["resources"] = [{"name": "memory", "nominalQuota": "1536Mi"},
                                                                     {"name": "cpu", "nominalQuota": "2500m"}]

    quotas = book(queue).cluster_queues["m"].quotas

    assert amount_text("memory", quotas[(rk.FLAVOR, "memory")].nominal) == "1.5Gi"
    assert amount_text("cpu", quotas[(rk.FLAVOR, "cpu")].nominal) == "2.5"


def test_cluster_queue_table():
    rows = cluster_queue_rows(book(*rk.team_queues()), rk.TPU)

    assert rows == [
        ("team-a", "tpuplane", rk.FLAVOR, "32", "32", "0", "0", "0", "-", "-", "1", "1"),
        ("team-b", "tpuplane", rk.FLAVOR, "16", "32", "16", "0", "0", "-", "-", "1", "0"),
        ("unassigned", "tpuplane", rk.FLAVOR, "16", "0", "0", "16", "0", "-", "-", "0", "0"),
    ]
    assert len(CLUSTER_QUEUE_COLUMNS) == len(rows[0])


def test_local_queue_and_cohort_tables():
    queues = book(*rk.team_queues(), local=[rk.local_queue("team-b", "team-b", "team-b", used=32, admitted=1),
                                           rk.local_queue("team-a", "team-a", "team-a", used=32, admitted=1,
                                                          pending=1)])

    assert local_queue_rows(queues, rk.TPU) == [("team-a", "team-a", "team-a", rk.FLAVOR, "32", "1", "1"),
                                                ("team-b", "team-b", "team-b", rk.FLAVOR, "32", "1", "0")]
    assert cohort_rows(queues, rk.TPU) == [("tpuplane", rk.FLAVOR, "64", "64", "16", "0",
                                            "team-a, team-b, unassigned")]


def test_tables_for_one_team():
    queues = book(*rk.team_queues(), local=[rk.local_queue("team-a", "team-a", "team-a")])

    assert [r[0] for r in cluster_queue_rows(queues, rk.TPU, ["team-b"])] == ["team-b"]
    assert local_queue_rows(queues, rk.TPU, ["team-b"]) == []


def test_queues_json_has_every_resource_as_numbers():
    document = queues_json(book(*rk.team_queues(), local=[rk.local_queue("team-a", "team-a", "team-a", used=32)]))

    team_b = next(q for q in document["clusterQueues"] if q["name"] == "team-b")
    assert [f["name"] for f in team_b["flavors"]] == [rk.CPU_FLAVOR, rk.FLAVOR]
    assert team_b["flavors"][1]["resources"][0] == {
        "name": rk.TPU, "nominal": 16, "borrowingLimit": None, "lendingLimit": None, "used": 32, "borrowed": 16,
        "lent": 0, "available": 0}
    assert {"flavor": rk.FLAVOR, "resource": rk.TPU, "amount": 32} in document["localQueues"][0]["used"]
    cohort = document["cohorts"][0]
    assert (cohort["name"], cohort["clusterQueues"]) == ("tpuplane", ["team-a", "team-b", "unassigned"])
    assert {"flavor": rk.FLAVOR, "resource": rk.TPU, "nominal": 64, "used": 64, "borrowed": 16,
            "free": 0} in cohort["resources"]


def test_queue_status_of_the_wrong_shape_reads_as_zero():
    queue = rk.cluster_queue("x", 16, used=8)
    tpu_flavor = queue["status"]["flavorsReservation"][-1]
    next(r for r in tpu_flavor["resources"] if r["name"] == rk.TPU)["total"] = "lots"
    queue["status"]["admittedWorkloads"] = -4
    queue["spec"]["resourceGroups"].append("junk")

    usage = book(queue).cluster_queues["x"]

    assert (usage.quotas[KEY].used, usage.admitted) == (Decimal(0), 0)
