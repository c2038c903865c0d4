"""The day-two commands where teams share quota: `tpuplane sandbox` playing the shipped pathways stack, whose spot
batch pool (four v6e-16 slices: 64 chips of flavor `tpu-v6e-slice-4x4-spot`) two teams share in cohort `tpuplane`:
`research` (share 0.75: 48 chips; borrowingLimit 0.25: at most 16 more) and `evals` (share 0.25: 16 chips, no
limit), each with a ClusterQueue and a LocalQueue of its name in a namespace of its name. (The stack's Shared
Pathways Service holds its other pool outside Kueue; its JobSet `pw/pw` shows in `list -A`.)

Each team's ClusterQueue preempts as `tpuplane.infra.batch.kueue.render_cluster_queue` writes it:
- `withinClusterQueue: LowerPriority`: a workload that does not fit evicts lower-priority ones of its own team;
- `reclaimWithinCohort: Any`: a team that needs its own quota back preempts the other teams' workloads that borrow
  it, whatever their priority (a share is a guarantee);
- `borrowWithinCohort: Never`: a team never preempts anyone in order to borrow.

As in test_day_two.py, every command is `tpuplane` in a subprocess, held against what Kueue recorded, and the
objects Kueue writes are held against the unit tests' recorded ones (tests/recorded_kueue.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

import recorded_kueue as rk
from e2e.conftest import PATHWAYS, LiveCluster, finishing, rendered, until

FLAVOR = "tpu-v6e-slice-4x4-spot"
TEAMS = ("research", "evals")

pytestmark = pytest.mark.sandbox(PATHWAYS)


@pytest.fixture
def teams(teams_cluster: LiveCluster) -> Iterator[LiveCluster]:
    """The pathways sandbox, the teams' namespaces emptied after the test."""
    yield teams_cluster
    teams_cluster.clear(*TEAMS)


def submit(cluster: LiveCluster, team: str, name: str, *, slices: int = 1, priority: str = "medium",
           edit=None) -> None:
    path = rendered(cluster.cli, name, slices=slices, priority=priority, queue=team, namespace=team, edit=edit)
    cluster.cli.ok("workload", "submit", str(path))


def running(cluster: LiveCluster, team: str, name: str) -> None:
    cluster.cli.ok("workload", "wait", name, "-n", team, "--for", "running", "--timeout", "90s")


def judged(cluster: LiveCluster, team: str, name: str) -> str:
    """Kueue's message once it found the workload short of quota."""
    return until(lambda: re.search(r"\d+ more needed", message := cluster.condition(team, name, "QuotaReserved").get(
        "message", "")) and message, f"{team}/{name} judged short of quota")


def tpu_quota(document: dict, queue: str) -> dict:
    found = next(q for q in document["clusterQueues"] if q["name"] == queue)
    return next(f for f in found["flavors"] if f["name"] == FLAVOR)["resources"][0]


def why_lines(cluster: LiveCluster, team: str, name: str) -> list[str]:
    return cluster.cli.ok("workload", "why", name, "-n", team).stdout.splitlines()


def test_queues_show_borrowing_and_lending_as_kueue_counts_them(teams):
    submit(teams, "evals", "burst", slices=2, priority="high")
    running(teams, "evals", "burst")
    live = teams.custom().get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "evals")

    document = json.loads(teams.cli.ok("queues", "-f", "json").stdout)
    table = teams.cli.ok("queues").stdout
    one_team = teams.cli.ok("queues", "--team", "evals").stdout

    reserved = next(r for f in live["status"]["flavorsReservation"] if f["name"] == FLAVOR
                    for r in f["resources"] if r["name"] == "google.com/tpu")
    assert (reserved["total"], reserved["borrowed"]) == ("32", "16")
    assert tpu_quota(document, "evals") == {"name": "google.com/tpu", "nominal": 16, "used": 32, "borrowed": 16,
                                            "lent": 0, "available": 32, "borrowingLimit": None, "lendingLimit": None}
    assert tpu_quota(document, "research") == {"name": "google.com/tpu", "nominal": 48, "used": 0, "borrowed": 0,
                                               "lent": 16, "available": 32, "borrowingLimit": 16,
                                               "lendingLimit": None}
    (cohort,) = document["cohorts"]
    assert (cohort["name"], cohort["clusterQueues"]) == ("tpuplane", ["evals", "research"])
    assert {"flavor": FLAVOR, "resource": "google.com/tpu", "nominal": 64, "used": 32, "borrowed": 16,
            "free": 32} in cohort["resources"]
    assert re.search(rf"^evals\s+tpuplane\s+{FLAVOR}\s+16\s+32\s+16\s+0\s+32\s+-\s+-\s+1\s+0\s*$", table, re.M)
    assert re.search(rf"^research\s+tpuplane\s+{FLAVOR}\s+48\s+0\s+0\s+16\s+32\s+16\s+-\s+0\s+0\s*$", table, re.M)
    assert re.search(rf"^tpuplane\s+{FLAVOR}\s+64\s+32\s+16\s+32\s+evals, research\s*$", table, re.M)
    assert re.search(r"^evals\s+evals\s+evals\s+" + FLAVOR + r"\s+32\s+1\s+0\s*$", one_team, re.M)
    assert "research" not in one_team.split("Cohorts")[0]


def test_team_queues_are_what_the_recorded_objects_say(teams_cluster):
    """The unit tests' ClusterQueues (tests/recorded_kueue.py) have the shape Kueue gives tpuplane's."""
    live = teams_cluster.custom().get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "evals")
    recorded = rk.cluster_queue("evals", 16)

    def shape(queue: dict) -> tuple:
        spec, status = queue["spec"], queue["status"]
        return (spec["preemption"], spec["queueingStrategy"], spec["flavorFungibility"],
                [(g["coveredResources"], [[r["name"] for r in f["resources"]] for f in g["flavors"]])
                 for g in spec["resourceGroups"]],
                [[sorted(r) for r in f["resources"]] for f in status["flavorsReservation"]],
                sorted(status), [c["type"] for c in status["conditions"]])

    assert shape(live) == shape(recorded)
    assert [f["name"] for f in live["spec"]["resourceGroups"][0]["flavors"]] == [rk.CPU_FLAVOR, FLAVOR]


def test_a_team_reclaims_its_lent_chips_from_a_borrower_whatever_its_priority(teams):
    submit(teams, "evals", "burst", slices=2, priority="high")
    running(teams, "evals", "burst")

    submit(teams, "research", "claim", slices=3, priority="low")

    until(lambda: teams.condition("evals", "burst", "Evicted").get("reason") == "Preempted", "burst preempted")
    running(teams, "research", "claim")
    assert teams.condition("evals", "burst", "Preempted")["reason"] == "InCohortReclamation"
    claim = teams.workload_of("research", "claim")["metadata"]["uid"]
    listed = {i["name"]: i for i in json.loads(teams.cli.ok("workload", "list", "-n", "evals", "-f", "json")
                                               .stdout)["items"]}
    assert (listed["burst"]["state"], listed["burst"]["preemptedBy"]) == ("preempted", {
        "jobset": "research/claim", "workloadUID": claim, "clusterQueue": "research", "reason": "InCohortReclamation"})
    table = teams.cli.ok("workload", "list", "-A").stdout
    assert re.search(r"^evals\s+burst\s+evals/evals\s+high \(750\)\s+preempted by research/claim \(reclamation "
                     r"within the cohort\)", table, re.M), table
    assert re.search(rf"^research\s+claim\s+research/research\s+low \(250\)\s+running\s+{FLAVOR}\s+12/12", table, re.M)
    assert re.search(r"^pw\s+pw\s+-/-\s+-\s+running", table, re.M)  # the Pathways service: no queue, not Kueue's
    more = re.search(r"(\d+) more needed", judged(teams, "evals", "burst")).group(1)
    assert why_lines(teams, "evals", "burst")[1:] == [
        f"- preempted by research/claim (Workload UID {claim}) due to reclamation within the cohort; Kueue requeued "
        "it and admits it again once quota is free.",
        f"- pod set slice: waiting for quota: it needs {more} more google.com/tpu in flavor {FLAVOR} than "
        "ClusterQueue evals can give it now. evals has 16 nominal, 0 in use (0 borrowed). Its cohort tpuplane could "
        "lend 0 more now (the other ClusterQueues of the cohort have 0 free). Holding "
        f"{FLAVOR}: research/claim (48, low, ClusterQueue research). It is admitted once that much quota is "
        "released (a workload finishes or is preempted)."]


def test_a_preempted_workload_is_what_the_recorded_objects_say(teams):
    """Kueue's conditions and message for a workload preempted by reclamation, against
    `recorded_kueue.preempted_conditions` (times and UIDs aside)."""
    submit(teams, "evals", "burst", slices=2, priority="high")
    running(teams, "evals", "burst")
    submit(teams, "research", "claim", slices=3, priority="low")
    message = judged(teams, "evals", "burst")
    live = teams.workload_of("evals", "burst")
    claim = teams.workload_of("research", "claim")
    recorded = rk.preempted_conditions(claim, "research", "evals")

    def shape(conditions: list[dict]) -> set[tuple]:
        return {(c["type"], c["status"], c["reason"]) for c in conditions if c["type"] != "PodsReady"}

    assert shape(live["status"]["conditions"]) == shape(recorded)
    assert message == rk.short_of_quota("slice", 32, 16, flavor=FLAVOR)
    preempted = next(c["message"] for c in live["status"]["conditions"] if c["type"] == "Preempted")
    assert preempted == next(c["message"] for c in recorded if c["type"] == "Preempted")


def test_why_quota_short_says_what_the_cohort_could_lend(teams):
    submit(teams, "research", "half", slices=2)
    running(teams, "research", "half")

    submit(teams, "evals", "big", slices=3, priority="high")

    more = re.search(r"(\d+) more needed", judged(teams, "evals", "big")).group(1)
    assert why_lines(teams, "evals", "big") == [
        "evals/big: pending (WaitingForQuota)",
        f"- pod set slice: waiting for quota: it needs {more} more google.com/tpu in flavor {FLAVOR} than "
        "ClusterQueue evals can give it now. evals has 16 nominal, 0 in use (0 borrowed). Its cohort tpuplane could "
        "lend 16 more now (the other ClusterQueues of the cohort have 16 free). Holding "
        f"{FLAVOR}: research/half (32, medium, ClusterQueue research). It is admitted once that much quota is "
        "released (a workload finishes or is preempted)."]
    assert more == "16"  # 48 asked; 16 of its own and 16 the cohort could lend
    waited = teams.cli("workload", "wait", "big", "-n", "evals", "--for", "admitted", "--timeout", "3s")
    assert waited.returncode == 124


def test_borrowing_never_preempts_another_teams_workloads(teams):
    submit(teams, "research", "full", slices=3, priority="low")
    running(teams, "research", "full")
    submit(teams, "evals", "own", priority="very-high")
    running(teams, "evals", "own")

    submit(teams, "evals", "more", priority="very-high")

    judged(teams, "evals", "more")
    assert teams.condition("research", "full", "Evicted").get("status") != "True"
    assert teams.condition("evals", "own", "Evicted").get("status") != "True"
    states = {i["name"]: i["state"] for i in json.loads(teams.cli.ok("workload", "list", "-A", "-f", "json")
                                                        .stdout)["items"]}
    assert {n: states[n] for n in ("full", "own", "more")} == {"full": "running", "own": "running", "more": "pending"}
    assert why_lines(teams, "evals", "more")[1].endswith(
        "evals has 16 nominal, 16 in use (0 borrowed). Its cohort tpuplane could lend 0 more now (the other "
        f"ClusterQueues of the cohort have 0 free). Holding {FLAVOR}: research/full (48, low, ClusterQueue "
        "research), evals/own (16, very-high, ClusterQueue evals). It is admitted once that much quota is released "
        "(a workload finishes or is preempted).")


def test_list_and_delete_by_team(teams):
    submit(teams, "evals", "over", edit=finishing("1s"))
    teams.cli.ok("workload", "wait", "over", "-n", "evals", "--for", "finished", "--timeout", "90s")
    submit(teams, "evals", "on")
    submit(teams, "research", "theirs")

    evals = teams.cli.ok("workload", "list", "--team", "evals").stdout
    research = teams.cli.ok("workload", "list", "--team", "research", "-n", "research").stdout
    deleted = teams.cli.ok("workload", "delete", "--team", "evals", "--state", "finished", "--yes")

    assert evals.split()[:2] == ["NAMESPACE", "NAME"]
    assert sorted(re.findall(r"^evals\s+(\S+)\s+evals/evals", evals, re.M)) == ["on", "over"]
    assert "theirs" not in evals and "pw" not in evals.split()
    assert research.split()[0] == "NAME" and re.findall(r"^(\S+)\s+research/research", research, re.M) == ["theirs"]
    assert re.findall(r"jobset.jobset.x-k8s.io/(\S+) deleted", deleted.stdout) == ["evals/over"]
    until(lambda: set(teams.jobsets("evals")) == {"on"} and set(teams.jobsets("research")) == {"theirs"},
          "only evals' finished workload deleted")
