"""The day-two commands on a real control plane: `tpuplane sandbox` playing the dev stack, with real Kueue 0.19.2
and JobSet 0.12.0 and kwok's nodes (two spot v6e-16 slices, `train-0` and `train-1`, and a CPU node).

The dev stack has one ClusterQueue, `cluster-queue`, with 32 chips (two 16-chip slices) of flavor
`tpu-v6e-slice-4x4-spot`, fed by LocalQueue `multislice-queue` in `default`, in no cohort. Its preemption policy
(`tpuplane.infra.batch.kueue.render_cluster_queue`): `withinClusterQueue: LowerPriority` (a workload that does not
fit evicts lower-priority workloads of its own queue) and `reclaimWithinCohort: Never` (it has no cohort to reclaim
from). The cohort's side is in test_day_two_cohort.py.

Every command runs as a user runs it: `tpuplane` in a subprocess, $KUBECONFIG as `sandbox up` prints it, stdin not
a terminal. What it says is held against what the API server, Kueue and JobSet recorded, read with the
`kubernetes` client. kwok keeps pods Running; a pod with kwok's delay annotation completes (a finished workload);
a Job past its activeDeadlineSeconds is failed by the Job controller (a failed workload). No kubelet runs here:
`workload logs` picks its pod here, but the log stream itself is tested against a stand-in
(tests/test_workload_live_cli.py) and nowhere else.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import pytest
import yaml
from kubernetes import client

from conftest import REPO
from e2e.conftest import DEV, TPUPLANE, LiveCluster, failing, finishing, rendered, selecting, until
from tpuplane.infra.batch.workload_state import LIST_SCHEMA

NS = "default"
QUEUE = "multislice-queue"
CQ = "cluster-queue"
FLAVOR = "tpu-v6e-slice-4x4-spot"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

pytestmark = pytest.mark.sandbox(DEV, group="day-two")  # a dev sandbox of their own: the tier runs two at once


@pytest.fixture
def dev(dev_cluster: LiveCluster) -> Iterator[LiveCluster]:
    """The dev sandbox, emptied after the test (its quota and nodes free for the next one)."""
    yield dev_cluster
    dev_cluster.clear(NS)


def items(cli, *args: str) -> dict[str, dict]:
    """`workload list -f json`, checked against its documented schema, by JobSet name."""
    document = json.loads(cli.ok("workload", "list", "-f", "json", *args).stdout)
    jsonschema.Draft202012Validator(LIST_SCHEMA).validate(document)
    return {i["name"]: i for i in document["items"]}


def table_names(output: str) -> list[str]:
    """The first column of a table's rows (a row's continuation lines start with spaces)."""
    return [line.split()[0] for line in output.splitlines()[1:] if line and not line.startswith(" ")]


def one_error_line(result: subprocess.CompletedProcess[str], starts: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), result.stderr
    return lines[0]


def running(dev: LiveCluster, name: str) -> None:
    dev.cli.ok("workload", "wait", name, "--for", "running", "--timeout", "90s")


# ---------------------------------------------------------------------------------------------------------------
# submit


def test_submit_applies_a_rendered_file_server_side_as_tpuplane_and_kueue_runs_it(dev):
    path = rendered(dev.cli, "first")

    result = dev.cli("workload", "submit", str(path))

    assert (result.returncode, result.stdout) == (0, "jobset.jobset.x-k8s.io/default/first submitted\n")
    jobset = dev.jobsets(NS)["first"]
    assert ("tpuplane", "Apply") in [(m["manager"], m["operation"]) for m in jobset["metadata"]["managedFields"]]
    running(dev, "first")
    row = items(dev.cli)["first"]
    assert (row["state"], row["team"], row["localQueue"], row["flavors"], row["pods"]) == (
        "running", CQ, QUEUE, [FLAVOR], {"running": 4, "total": 4})
    assert row["workload"] == dev.workload_of(NS, "first")["metadata"]["name"]


def test_submit_renders_a_workload_file_itself(dev):
    path = dev.cli.folder / "from-file.yaml"
    path.write_text("name: from-file\njobs:\n  - tpuType: v6e-16\n    capacity: spot\n    image: busybox\n"
                    "    command: python train.py\n")

    result = dev.cli.ok("workload", "submit", str(path))

    assert result.stdout == "jobset.jobset.x-k8s.io/default/from-file submitted\n"
    labels = dev.jobsets(NS)["from-file"]["metadata"]["labels"]
    assert (labels[QUEUE_LABEL], labels["kueue.x-k8s.io/priority-class"]) == (QUEUE, "medium")


def test_server_dry_run_asks_the_api_server_and_its_webhooks_and_stores_nothing(dev):
    good = rendered(dev.cli, "dry")
    bad = rendered(dev.cli, "bad-queue", edit=lambda j: j["metadata"]["labels"].update({QUEUE_LABEL: "Team_A"}))

    accepted = dev.cli("workload", "submit", str(good), "--dry-run", "server")
    refused = dev.cli("workload", "submit", str(bad), "--dry-run", "server", "--force")

    assert (accepted.returncode, accepted.stdout) == (0, "jobset.jobset.x-k8s.io/default/dry submitted (server dry "
                                                         "run)\n")
    line = one_error_line(refused, "error: apply JobSet default/bad-queue: the API server refused it: admission "
                                   'webhook "vjobset.kb.io" denied the request: ')
    assert 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Team_A"' in line
    assert dev.jobsets(NS) == {}


def test_resubmitting_a_name_that_exists_says_so_and_changes_nothing(dev):
    dev.cli.ok("workload", "submit", str(rendered(dev.cli, "again")))
    before = dev.jobsets(NS)["again"]

    result = dev.cli("workload", "submit", str(rendered(dev.cli, "again", slices=2)))

    assert result.returncode == 1
    assert ("default/again: a JobSet of that name exists, and its spec cannot be changed. Delete it first "
            "(`tpuplane workload delete`), or pick another name") in result.stderr
    after = dev.jobsets(NS)["again"]
    assert applied_by_tpuplane(after) == applied_by_tpuplane(before)
    assert after["spec"]["replicatedJobs"][0]["replicas"] == 1


def applied_by_tpuplane(jobset: dict) -> list[dict]:
    """What tpuplane's own server-side applies wrote (Kueue admitting the JobSet meanwhile writes its spec too)."""
    return [entry for entry in jobset["metadata"]["managedFields"] if entry["manager"] == "tpuplane"]


def test_a_workload_the_check_refuses_is_not_submitted_unless_forced(dev):
    path = rendered(dev.cli, "wrong-shape", tpu_type="v5p-128", capacity="on-demand")

    on_cluster = dev.cli("workload", "submit", str(path))
    on_stack = dev.cli("workload", "submit", str(path), "--stack", "dev", "--project-dir", str(REPO))

    for refused in (on_cluster, on_stack):
        assert refused.returncode == 1
        assert "x default/wrong-shape: slice: no flavor fits" in refused.stderr
        assert refused.stderr.rstrip().endswith("error: refused: the check says this could never run (--force "
                                                "submits anyway)")
    assert dev.jobsets(NS) == {}
    forced = dev.cli("workload", "submit", str(path), "--force")
    assert forced.stdout == "jobset.jobset.x-k8s.io/default/wrong-shape submitted\n"
    until(lambda: dev.condition(NS, "wrong-shape", "QuotaReserved").get("status") == "False", "Kueue judged it")
    assert items(dev.cli)["wrong-shape"]["reason"] == "NoMatchingFlavor"


def test_a_priority_class_the_cluster_does_not_have_is_refused(dev):
    """Kueue makes no Workload for such a JobSet: it would sit suspended for ever, with no event saying why."""
    path = rendered(dev.cli, "odd", edit=lambda j: j["metadata"]["labels"].update(
        {"kueue.x-k8s.io/priority-class": "urgent"}))

    refused = dev.cli("workload", "submit", str(path))

    assert refused.returncode == 1
    assert ("its kueue.x-k8s.io/priority-class label names WorkloadPriorityClass urgent, which does not exist (there "
            "are: high, low, medium, very-high, very-low)") in refused.stderr
    dev.cli.ok("workload", "submit", str(path), "--force")
    why = dev.cli.ok("workload", "why", "odd").stdout
    assert why.splitlines()[1] == "- Kueue has made no Workload for it: the scheduling check below says why."
    assert dev.workload_of(NS, "odd") is None


EXPERIMENT = """name: lr-sweep
priority: low
jobs:
  - name: train
    tpuType: v6e-16
    capacity: spot
    image: busybox
    command: python train.py
grid:
  lr: [0.001, 0.0003]
  batch_size: {sizes}
"""


def test_an_experiment_submits_every_trial_labelled_and_is_listed_and_deleted_as_one(dev):
    dev.cli.ok("workload", "submit", str(rendered(dev.cli, "bystander")))
    sweep = dev.cli.folder / "lr-sweep.yaml"
    sweep.write_text(EXPERIMENT.format(sizes="[256]"))

    first = dev.cli.ok("experiment", "submit", str(sweep))
    sweep.write_text(EXPERIMENT.format(sizes="[256, 512]"))
    extended = dev.cli.ok("experiment", "submit", str(sweep))

    trials = re.findall(r"default/(lr-sweep-\w+) submitted", first.stdout)
    added = re.findall(r"default/(lr-sweep-\w+) submitted", extended.stdout)
    assert (len(trials), len(added), set(trials) & set(added)) == (2, 2, set())
    assert extended.stderr.count("already submitted (same trial), left as it is") == 2
    jobsets = dev.jobsets(NS)
    assert {jobsets[n]["metadata"]["labels"]["tpuplane.dev/experiment"] for n in trials + added} == {"lr-sweep"}
    listed = items(dev.cli, "--experiment", "lr-sweep")
    assert set(listed) == set(trials + added)
    assert all(i["experiment"] == "lr-sweep" and i["trial"] and i["priority"]["class"] == "low"
               for i in listed.values())
    deleted = dev.cli.ok("workload", "delete", "--experiment", "lr-sweep", "--yes")
    assert sorted(re.findall(r"jobset.jobset.x-k8s.io/default/(\S+) deleted", deleted.stdout)) == sorted(trials + added)
    until(lambda: set(dev.jobsets(NS)) == {"bystander"}, "the experiment's JobSets gone, the bystander kept")


# ---------------------------------------------------------------------------------------------------------------
# One queue, every state: list, status, why, wait and queues read the same scene


@pytest.fixture(scope="class")
def scene(dev_cluster: LiveCluster) -> Iterator[LiveCluster]:
    """In order: `wrong-shape` (a v5p workload, forced: no flavor matches), `done` (finishes) and `broken` (its Job
    fails) at once; then `low` (low priority, runs); `stuck` (forced, selects a label no node has: admitted, never
    placed); `urgent` (very-high: the queue is full, so Kueue preempts `low`, the lowest priority); `waiting`
    (medium: no quota left). Kueue's and JobSet's own conditions are awaited before anything is read."""
    dev = dev_cluster

    def submit(path: Path, *flags: str) -> None:
        dev.cli.ok("workload", "submit", str(path), *flags)

    def jobset_condition(name: str, kind: str) -> bool:
        return any(c["type"] == kind and c["status"] == "True"
                   for c in dev.jobsets(NS)[name].get("status", {}).get("conditions", []))

    submit(rendered(dev.cli, "wrong-shape", tpu_type="v5p-128", capacity="on-demand"), "--force")
    submit(rendered(dev.cli, "done", edit=finishing("1s")))
    submit(rendered(dev.cli, "broken", edit=failing(2)))
    until(lambda: "doesn't match node affinity" in dev.condition(NS, "wrong-shape", "QuotaReserved").get(
        "message", ""), "wrong-shape judged by Kueue")
    until(lambda: jobset_condition("done", "Completed"), "done completed")
    until(lambda: jobset_condition("broken", "Failed"), "broken failed")
    submit(rendered(dev.cli, "low", priority="low"))
    running(dev, "low")
    submit(rendered(dev.cli, "stuck", edit=selecting("example.com/rack", "r9")), "--force")
    core = client.CoreV1Api(dev.api)
    until(lambda: any(c.reason == "Unschedulable" for p in core.list_namespaced_pod(
        NS, label_selector="jobset.sigs.k8s.io/jobset-name=stuck").items for c in p.status.conditions or []),
          "stuck's pods refused by kube-scheduler")
    submit(rendered(dev.cli, "urgent", priority="very-high"))
    until(lambda: dev.condition(NS, "low", "Evicted").get("reason") == "Preempted", "low preempted")
    running(dev, "urgent")
    submit(rendered(dev.cli, "waiting"))
    until(lambda: "more needed" in dev.condition(NS, "waiting", "QuotaReserved").get("message", ""),
          "waiting judged by Kueue")
    yield dev
    dev.clear(NS)


class TestOneQueueInEveryState:
    """What the commands say of `scene`, each state at once."""

    def test_list_shows_each_state_sorted_for_reading(self, scene):
        result = scene.cli.ok("workload", "list")

        assert result.stdout.split()[:8] == ["NAME", "TEAM/QUEUE", "PRIORITY", "STATE", "FLAVOR", "PODS",
                                             "RESTARTS", "AGE"]
        assert table_names(result.stdout) == ["urgent", "stuck", "low", "wrong-shape", "waiting", "broken", "done"]
        rows = {line.split()[0]: " ".join(line.split()) for line in result.stdout.splitlines()}
        assert f"very-high (1000) running {FLAVOR} 4/4 0" in rows["urgent"]
        assert f"medium (500) admitted {FLAVOR} 0/4 0" in rows["stuck"]
        assert "low (250) preempted by default/urgent (prioritization in the" in rows["low"]
        assert "medium (500) pending (NoMatchingFlavor) - 0/16 0" in rows["wrong-shape"]
        assert "pending (WaitingForQuota) - 0/4" in rows["waiting"]
        assert f"finished (AllJobsCompleted) {FLAVOR} 0/4" in rows["done"]

    def test_list_json_says_what_kueue_and_jobset_recorded(self, scene):
        found = items(scene.cli)

        assert {n: (i["state"], i["reason"]) for n, i in found.items()} == {
            "urgent": ("running", None), "stuck": ("admitted", None), "low": ("preempted", "InClusterQueue"),
            "wrong-shape": ("pending", "NoMatchingFlavor"), "waiting": ("pending", "WaitingForQuota"),
            "broken": ("failed", next(c["reason"] for c in scene.jobsets(NS)["broken"]["status"]["conditions"]
                                      if c["type"] == "Failed")),
            "done": ("finished", "AllJobsCompleted")}
        urgent = scene.workload_of(NS, "urgent")
        assert found["low"]["preemptedBy"] == {"jobset": "default/urgent", "workloadUID": urgent["metadata"]["uid"],
                                               "clusterQueue": CQ, "reason": "InClusterQueue"}
        assert found["low"]["message"] == scene.condition(NS, "low", "Preempted")["message"]
        assert {n for n, i in found.items() if i["flavors"] == [FLAVOR]} == {"urgent", "stuck", "done", "broken"}
        assert {n for n, i in found.items() if not i["flavors"]} == {"low", "wrong-shape", "waiting"}
        assert (found["urgent"]["pods"], found["stuck"]["pods"]) == ({"running": 4, "total": 4},
                                                                     {"running": 0, "total": 4})
        assert {n: i["priority"]["value"] for n, i in found.items()} == {
            "urgent": 1000, "stuck": 500, "low": 250, "wrong-shape": 500, "waiting": 500, "broken": 500, "done": 500}

    @pytest.mark.parametrize("filters, names", [
        (["--state", "pending"], {"wrong-shape", "waiting"}),
        (["--state", "finished", "--state", "failed"], {"done", "broken"}),
        (["--state", "preempted"], {"low"}),
        (["--queue", QUEUE, "--state", "admitted", "--state", "running"], {"urgent", "stuck"}),
        (["--team", CQ, "--state", "running"], {"urgent"}),
        (["--queue", "elsewhere"], set()),
        (["--experiment", "lr-sweep"], set()),
    ])
    def test_list_filters(self, scene, filters, names):
        assert set(items(scene.cli, *filters)) == names

    def test_list_by_team_reads_every_namespace(self, scene):
        result = scene.cli.ok("workload", "list", "--team", CQ, "--state", "running")

        assert result.stdout.split()[:2] == ["NAMESPACE", "NAME"]
        assert table_names(result.stdout) == [NS]

    def test_list_of_nothing_says_so(self, scene):
        result = scene.cli.ok("workload", "list", "--queue", "elsewhere")

        assert (result.stdout, result.stderr) == ("", "No workloads found in namespace default.\n")

    def test_why_quota_short_without_a_cohort_names_the_holders(self, scene):
        kueue = scene.condition(NS, "waiting", "QuotaReserved")["message"]
        more = re.search(rf"insufficient unused quota for google.com/tpu in flavor {FLAVOR}, (\d+) more needed",
                         kueue).group(1)

        lines = scene.cli.ok("workload", "why", "waiting").stdout.splitlines()

        assert lines == [
            "default/waiting: pending (WaitingForQuota)",
            f"- pod set slice: waiting for quota: it needs {more} more google.com/tpu in flavor {FLAVOR} than "
            f"ClusterQueue {CQ} can give it now. {CQ} has 32 nominal, 32 in use (0 borrowed). It is in no cohort, so "
            f"it cannot borrow. Holding {FLAVOR}: default/stuck (16, medium, ClusterQueue {CQ}), default/urgent (16, "
            f"very-high, ClusterQueue {CQ}). It is admitted once that much quota is released (a workload finishes "
            "or is preempted)."]

    def test_why_no_flavor_matches_names_the_selector_and_what_the_pools_offer(self, scene):
        lines = scene.cli.ok("workload", "why", "wrong-shape").stdout.splitlines()

        assert lines[0] == "default/wrong-shape: pending (NoMatchingFlavor)"
        assert lines[1].startswith(f"- pod set slice: no flavor of ClusterQueue {CQ} fits: flavor {FLAVOR} does not "
                                   "match its node selector/affinity. Its node selector: "
                                   "cloud.google.com/gke-tpu-accelerator=tpu-v5p-slice; "
                                   "cloud.google.com/gke-tpu-topology=4x4x4;")
        assert ("train-0, train-1 have cloud.google.com/gke-tpu-accelerator=tpu-v6e-slice, "
                "cloud.google.com/gke-tpu-topology=4x4") in lines[1]
        assert lines[2].startswith("- the scheduling check on the cluster's queues and node pools: slice: no flavor "
                                   "fits")
        assert "will never be admitted" not in "\n".join(lines)  # the CPU flavor's zero chips are no alternative

    def test_why_a_selector_no_node_pool_offers_quotes_kube_scheduler(self, scene):
        lines = scene.cli.ok("workload", "why", "stuck").stdout.splitlines()

        assert lines[0] == "default/stuck: admitted"
        # one pod: with exclusive placement, JobSet creates a slice's other pods once its first one is placed
        nodes = len(client.CoreV1Api(scene.api).list_node().items)  # the TPU pools' and the CPU pool's
        assert re.match(rf"- kube-scheduler cannot place pod stuck-slice-0-0-\w+: 0/{nodes} nodes are available: "
                        rf"{nodes} node\(s\) didn't match Pod's node affinity/selector", lines[1]), lines[1]
        assert "example.com/rack=r9" in lines[1] and "train-0, train-1 have no example.com/rack" in lines[1]
        assert lines[2] == ("- the scheduling check on the cluster's queues and node pools: slice: no node pool can "
                            "run its pods: it selects example.com/rack=r9, and pools train-0, train-1 of its flavor "
                            "carry no example.com/rack label: select a value those pools carry, or add a pool whose "
                            "nodes carry example.com/rack=r9")

    def test_why_preempted_names_the_higher_priority_preemptor(self, scene):
        uid = scene.workload_of(NS, "urgent")["metadata"]["uid"]

        lines = scene.cli.ok("workload", "why", "low").stdout.splitlines()

        assert lines[0] == "default/low: preempted by default/urgent (prioritization in the ClusterQueue)"
        assert lines[1] == (f"- preempted by default/urgent (Workload UID {uid}) due to prioritization in the "
                            "ClusterQueue; Kueue requeued it and admits it again once quota is free.")
        assert scene.condition(NS, "low", "Preempted")["reason"] == "InClusterQueue"

    @pytest.mark.parametrize("name, says", [
        ("done", "- it has finished: AllJobsCompleted - jobset completed successfully."),
        ("urgent", "- it is not waiting: it is running (4 pods running)."),
    ])
    def test_why_a_workload_that_is_not_waiting(self, scene, name, says):
        assert scene.cli.ok("workload", "why", name).stdout.splitlines()[1] == says

    def test_why_a_failed_workload_quotes_jobset(self, scene):
        failed = next(c for c in scene.jobsets(NS)["broken"]["status"]["conditions"] if c["type"] == "Failed")

        line = scene.cli.ok("workload", "why", "broken").stdout.splitlines()[1]

        assert line == f"- it has failed: {failed['reason']} - {failed['message']}."

    def test_status_shows_conditions_admission_slices_and_events(self, scene):
        status = json.loads(scene.cli.ok("workload", "status", "urgent", "-f", "json").stdout)
        workload = scene.workload_of(NS, "urgent")

        assert status["workload"]["state"] == "running"
        assert {(c["object"], c["type"], c["status"]) for c in status["conditions"]} >= {
            ("Workload", "QuotaReserved", "True"), ("Workload", "Admitted", "True"), ("Workload", "PodsReady", "True")}
        assert status["admission"] == {"clusterQueue": CQ, "podSets": [
            {"name": "slice", "count": 4, "flavors": {"google.com/tpu": FLAVOR},
             "resourceUsage": {"google.com/tpu": 16}}]}
        assert workload["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"google.com/tpu": FLAVOR}
        assert status["slices"] == [{"job": "slice", "slice": 0, "expectedPods": 4, "containerRestarts": 0,
                                     "pods": {"running": 4, "pending": 0, "succeeded": 0, "failed": 0}}]
        reasons = {(e["object"].split("/")[0], e["reason"]) for e in status["events"]}
        assert {("Workload", "QuotaReserved"), ("Workload", "Admitted"), ("JobSet", "CreatedWorkload")} <= reasons
        assert status["why"] == [{"kind": "not-pending", "text": "it is not waiting: it is running (4 pods running)."}]

    def test_status_table_of_a_workload_kube_scheduler_cannot_place(self, scene):
        out = scene.cli.ok("workload", "status", "stuck").stdout

        assert out.splitlines()[0] == "default/stuck: admitted"
        assert f"ClusterQueue {CQ}" in out and f"pod set slice: 4 pods; google.com/tpu in {FLAVOR} (16)" in out
        slices = re.search(r"^slice\s+0\s+4\s+(\d+)\s+(\d+)\s+0\s+0\s+0\s*$", out, re.M)
        assert slices and slices.groups() == ("0", "1")  # its first pod, Pending; JobSet holds the others back
        nodes = len(client.CoreV1Api(scene.api).list_node().items)
        assert f"Warning FailedScheduling: 0/{nodes} nodes are available" in out

    def test_wait_exit_statuses(self, scene):
        asked = [("done", "finished", "30s"), ("urgent", "admitted", "30s"), ("broken", "finished", "30s"),
                 ("stuck", "running", "3s"), ("waiting", "admitted", "3s")]
        with ThreadPoolExecutor(len(asked)) as pool:  # each its own process, as several users would wait at once
            results = pool.map(lambda a: scene.cli("workload", "wait", a[0], "--for", a[1], "--timeout", a[2]), asked)
            waits = {(name, target): result for (name, target, _), result in zip(asked, results)}

        assert {k: r.returncode for k, r in waits.items()} == {
            ("done", "finished"): 0, ("urgent", "admitted"): 0, ("broken", "finished"): 125,
            ("stuck", "running"): 124, ("waiting", "admitted"): 124}
        assert waits[("urgent", "admitted")].stderr.startswith("urgent is running")
        assert "broken ended failed" in waits[("broken", "finished")].stderr
        assert waits[("stuck", "running")].stderr.splitlines()[-1] == (
            "timed out after 3s waiting for stuck to be running: it is admitted. Hint: `tpuplane workload why stuck`")

    def test_queues_without_a_cohort(self, scene):
        live = scene.custom().get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", CQ)

        document = json.loads(scene.cli.ok("queues", "-f", "json").stdout)

        (queue,) = document["clusterQueues"]
        tpu = next(f for f in queue["flavors"] if f["name"] == FLAVOR)["resources"][0]
        assert (queue["name"], queue["cohort"]) == (CQ, None)
        assert tpu == {"name": "google.com/tpu", "nominal": 32, "used": 32, "borrowed": 0, "lent": 0, "available": 0,
                       "borrowingLimit": None, "lendingLimit": None}
        assert (queue["admittedWorkloads"], queue["pendingWorkloads"]) == (live["status"]["admittedWorkloads"],
                                                                           live["status"]["pendingWorkloads"])
        assert document["cohorts"] == []
        table = scene.cli.ok("queues").stdout
        assert re.search(rf"^{CQ}\s+-\s+{FLAVOR}\s+32\s+32\s+0\s+0\s+0\s+-\s+-\s+2\s+\d+\s*$", table, re.M), table


def stop_policy(dev: LiveCluster, policy: str) -> None:
    dev.custom().patch_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", NS, "localqueues", QUEUE,
                                                {"spec": {"stopPolicy": policy}})


def test_a_workload_evicted_from_a_stopped_queue_says_why_and_runs_again_once_it_restarts(dev):
    dev.cli.ok("workload", "submit", str(rendered(dev.cli, "drained")))
    running(dev, "drained")

    stop_policy(dev, "HoldAndDrain")
    try:
        until(lambda: dev.condition(NS, "drained", "Evicted").get("reason") == "LocalQueueStopped", "evicted")
        row = items(dev.cli)["drained"]
        why = dev.cli.ok("workload", "why", "drained").stdout.splitlines()
    finally:
        stop_policy(dev, "None")

    assert (row["state"], row["reason"], row["flavors"]) == ("evicted", "LocalQueueStopped", [])
    assert why == ["default/drained: evicted (LocalQueueStopped)",
                   "- evicted (LocalQueueStopped): its LocalQueue was stopped (spec.stopPolicy); it waits until the "
                   "queue runs again."]
    assert dev.cli("workload", "wait", "drained", "--for", "running", "--timeout", "90s").returncode == 0


# ---------------------------------------------------------------------------------------------------------------
# delete and wait


def test_delete_without_a_terminal_and_without_yes_refuses_and_deletes_nothing(dev):
    dev.cli.ok("workload", "submit", str(rendered(dev.cli, "keep")))

    result = dev.cli("workload", "delete", "keep")

    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == ("error: deleting 1 workload needs a confirmation, and there is no "
                                              "terminal to ask on. Hint: pass --yes")
    assert "keep" in dev.jobsets(NS)


def at_a_terminal(dev: LiveCluster, answer: str, *args: str) -> tuple[int, str]:
    """Run tpuplane with stdin and stderr on a pseudo-terminal, answer its question, return (status, stdout)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([str(TPUPLANE), *args], cwd=dev.cli.folder, stdin=follower, stderr=follower,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "KUBECONFIG": dev.cli.kubeconfig})
    os.close(follower)
    seen = b""
    try:
        while b"[y/N]" not in seen:
            ready, _, _ = select.select([leader], [], [], 120)
            assert ready, f"no question asked: {seen!r}"
            seen += os.read(leader, 4096)
        os.write(leader, answer.encode() + b"\n")
        stdout, _ = proc.communicate(timeout=120)
    finally:
        os.close(leader)
    return proc.returncode, stdout


@pytest.mark.parametrize("answer, deleted", [("y", True), ("n", False)])
def test_delete_at_a_terminal_asks_first(dev, answer, deleted):
    dev.cli.ok("workload", "submit", str(rendered(dev.cli, "asked")))

    status, stdout = at_a_terminal(dev, answer, "workload", "delete", "asked")

    assert status == 0
    assert ("jobset.jobset.x-k8s.io/default/asked deleted" in stdout) is deleted
    assert ("asked" not in dev.jobsets(NS)) is deleted


def test_delete_by_name_takes_the_workload_and_its_pods_with_it(dev):
    dev.cli.ok("workload", "submit", str(rendered(dev.cli, "gone")))
    running(dev, "gone")

    result = dev.cli.ok("workload", "delete", "gone", "--yes")

    assert result.stdout.splitlines()[-1] == "jobset.jobset.x-k8s.io/default/gone deleted"
    core = client.CoreV1Api(dev.api)
    until(lambda: dev.workload_of(NS, "gone") is None and not core.list_namespaced_pod(NS).items,
          "its Workload and pods gone")
    assert dev.cli.ok("workload", "list").stderr == "No workloads found in namespace default.\n"


def test_delete_by_state_keeps_the_others(dev):
    dev.cli.ok("workload", "submit", str(rendered(dev.cli, "over", edit=finishing("1s"))))
    dev.cli.ok("workload", "wait", "over", "--for", "finished", "--timeout", "90s")
    dev.cli.ok("workload", "submit", str(rendered(dev.cli, "on")))

    result = dev.cli.ok("workload", "delete", "--state", "finished", "--yes")

    assert re.findall(r"default/(\S+) deleted", result.stdout) == ["over"]
    until(lambda: set(dev.jobsets(NS)) == {"on"}, "only the finished one deleted")


def test_delete_of_a_name_that_does_not_exist_is_bad_input(dev):
    result = dev.cli("workload", "delete", "nowhere", "--yes")

    one_error_line(result, "error: NAMES: got ['nowhere']; allowed: workloads in namespace default that the filters "
                           "select")


def test_wait_ends_with_125_when_the_workload_is_deleted_meanwhile(dev):
    dev.cli.ok("workload", "submit", str(rendered(dev.cli, "doomed", edit=selecting("example.com/rack", "r9"))),
               "--force")
    proc = subprocess.Popen([str(TPUPLANE), "workload", "wait", "doomed", "--for", "running", "--timeout", "5m"],
                            cwd=dev.cli.folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "KUBECONFIG": dev.cli.kubeconfig})
    try:
        first = proc.stderr.readline()  # its first progress line: it is waiting
        dev.custom().delete_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", "doomed")
        status = proc.wait(timeout=120)
    finally:
        proc.kill()
    assert first.startswith("doomed: ")
    assert status == 125
    assert re.match(r"doomed was deleted after \d+s", proc.stderr.read())


@pytest.mark.parametrize("args, starts", [
    (["nowhere", "--for", "running"], "error: NAME: got 'nowhere'; allowed: a JobSet in namespace default"),
    (["x", "--for", "running", "--timeout", "10 parsecs"], "error: --timeout: got '10 parsecs'"),
])
def test_wait_bad_input_exits_2(dev_cluster, args, starts):
    one_error_line(dev_cluster.cli("workload", "wait", *args), starts)


def test_logs_picks_the_pod_of_a_slice_and_worker_by_the_labels_jobset_gives_it(dev):
    """Only the choice of pod is live here: a log comes from the node's kubelet, and kwok's nodes serve none (the
    API server answers 404), so the stream itself is tested against a stand-in (tests/test_workload_live_cli.py)."""
    dev.cli.ok("workload", "submit", str(rendered(dev.cli, "talker")))
    running(dev, "talker")
    pod = next(p.metadata.name for p in client.CoreV1Api(dev.api).list_namespaced_pod(
        NS, label_selector="jobset.sigs.k8s.io/jobset-name=talker").items
        if p.metadata.labels["batch.kubernetes.io/job-completion-index"] == "2")

    absent = dev.cli("workload", "logs", "talker", "--worker", "7")
    followed = dev.cli("workload", "logs", "talker", "--worker", "2", "-f")

    one_error_line(absent, "error: --slice/--worker: got 'slice 0 worker 7'; allowed: a pod of workload talker: slice "
                           "0 worker 0, slice 0 worker 1, slice 0 worker 2, slice 0 worker 3.")
    one_error_line(followed, f"error: read the log of pod default/{pod}: the server could not find the requested "
                             "resource")


# ---------------------------------------------------------------------------------------------------------------
# A cluster that cannot be used: one line on stderr, exit 2, within the request timeout


READ_COMMANDS = {
    "list": ["workload", "list"],
    "list -A": ["workload", "list", "-A"],
    "status": ["workload", "status", "some"],
    "why": ["workload", "why", "some"],
    "wait": ["workload", "wait", "some", "--for", "running"],
    "delete": ["workload", "delete", "some", "--yes"],
    "logs": ["workload", "logs", "some"],
    "queues": ["queues"],
}


@pytest.fixture(scope="module")
def job_file(dev_cluster) -> Path:
    return rendered(dev_cluster.cli, "some")


def every_command(job_file: Path) -> dict[str, list[str]]:
    return {**READ_COMMANDS, "submit": ["workload", "submit", str(job_file)],
            "submit --force": ["workload", "submit", str(job_file), "--force"]}


def token_for(dev: LiveCluster, account: str) -> str:
    """A token of a new ServiceAccount, as `kubectl create token` asks for one."""
    core = client.CoreV1Api(dev.api)
    core.create_namespaced_service_account(NS, {"metadata": {"name": account}})
    request = core.create_namespaced_service_account_token(account, NS, {"spec": {"expirationSeconds": 3600}})
    return request.status.token


@pytest.fixture(scope="module")
def users(dev_cluster, tmp_path_factory) -> Path:
    """A kubeconfig with the sandbox's admin and three more contexts: `nobody` (a ServiceAccount without any
    RBAC rights), `member` (may read and write JobSets, Workloads, LocalQueues, pods and events of `default`, and
    nothing cluster-wide, as a team's Role grants) and `expired` (a token the API server does not know)."""
    rbac = client.RbacAuthorizationV1Api(dev_cluster.api)
    rbac.create_namespaced_role(NS, {"metadata": {"name": "member"}, "rules": [
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "list", "create", "patch",
                                                                              "delete"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list"]}]})
    rbac.create_namespaced_role_binding(NS, {"metadata": {"name": "member"},
                                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                         "name": "member"},
                                             "subjects": [{"kind": "ServiceAccount", "name": "member",
                                                           "namespace": NS}]})
    kubeconfig = yaml.safe_load(Path(dev_cluster.cli.kubeconfig).read_text())
    cluster = kubeconfig["clusters"][0]["name"]
    for name, token in (("nobody", token_for(dev_cluster, "nobody")), ("member", token_for(dev_cluster, "member")),
                        ("expired", "not-a-token-the-server-issued")):
        kubeconfig["users"].append({"name": name, "user": {"token": token}})
        kubeconfig["contexts"].append({"name": name, "context": {"cluster": cluster, "user": name}})
    path = tmp_path_factory.mktemp("users") / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    return path


@pytest.mark.parametrize("command", ["list", "list -A", "status", "why", "wait", "delete", "logs", "queues",
                                     "submit", "submit --force"])
def test_every_command_forbidden_by_rbac_quotes_what_was_refused(dev_cluster, users, job_file, command):
    result = dev_cluster.cli(*every_command(job_file)[command], "--kubeconfig", str(users), "--context", "nobody")

    line = one_error_line(result, "error: ")
    assert 'User "system:serviceaccount:default:nobody" cannot' in line
    assert "RBAC" in line and "Hint:" in line


@pytest.mark.parametrize("command", ["list", "status", "queues", "submit"])
def test_every_command_with_rejected_credentials(dev_cluster, users, job_file, command):
    result = dev_cluster.cli(*every_command(job_file)[command], "--kubeconfig", str(users), "--context", "expired")

    one_error_line(result, f"error: the Kubernetes API server {server(dev_cluster)} rejected the credentials (401 "
                           "Unauthorized): they are missing, wrong or expired.")


def server(dev: LiveCluster) -> str:
    return yaml.safe_load(Path(dev.cli.kubeconfig).read_text())["clusters"][0]["cluster"]["server"]


def test_a_team_member_without_cluster_wide_reads(dev, users):
    """What a team's Role allows: its own namespace's workloads. The cluster's queues and nodes stay unread, so the
    check before submitting runs against the stack instead, and why says less."""
    as_member = ("--kubeconfig", str(users), "--context", "member")
    path = rendered(dev.cli, "mine")

    unchecked = dev.cli("workload", "submit", str(path), *as_member)
    checked = dev.cli("workload", "submit", str(path), "--stack", "dev", "--project-dir", str(REPO), *as_member)
    running(dev, "mine")
    listed = dev.cli("workload", "list", *as_member)
    why = dev.cli("workload", "why", "mine", *as_member)
    queues = dev.cli("queues", *as_member)
    deleted = dev.cli("workload", "delete", "mine", "--yes", *as_member)

    one_error_line(unchecked, "error: the check before submitting reads the cluster's queues and nodes, and RBAC "
                              "forbids it: resourceflavors.kueue.x-k8s.io is forbidden")
    assert "Hint: check against the stack with --stack or --config, or pass --force" in unchecked.stderr
    assert checked.stdout == "jobset.jobset.x-k8s.io/default/mine submitted\n"
    assert listed.returncode == 0 and table_names(listed.stdout) == ["mine"]
    assert why.stdout == "default/mine: running\n- it is not waiting: it is running (4 pods running).\n"
    one_error_line(queues, "error: forbidden: clusterqueues.kueue.x-k8s.io is forbidden: User "
                           '"system:serviceaccount:default:member" cannot list resource "clusterqueues"')
    assert deleted.stdout.splitlines()[-1] == "jobset.jobset.x-k8s.io/default/mine deleted"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pointed_at(dev: LiveCluster, folder: Path, port: int) -> Path:
    """The sandbox's kubeconfig, its server moved to `port` on this machine."""
    kubeconfig = yaml.safe_load(Path(dev.cli.kubeconfig).read_text())
    kubeconfig["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path = folder / f"kubeconfig-{port}"
    path.write_text(yaml.safe_dump(kubeconfig))
    return path


@pytest.mark.parametrize("command", ["list", "queues", "submit"])  # every command: tests/test_workload_live_cli.py
def test_a_command_on_an_unreachable_server(dev_cluster, job_file, tmp_path, command):
    port = free_port()  # closed again: nothing listens there

    result = dev_cluster.cli(*every_command(job_file)[command], "--kubeconfig", str(pointed_at(dev_cluster, tmp_path,
                                                                                              port)))

    one_error_line(result, f"error: cannot reach the Kubernetes API server https://127.0.0.1:{port}: the "
                           "connection was refused (nothing listens there).")


@pytest.mark.parametrize("command", ["list", "wait"])
def test_a_server_that_never_answers_costs_one_request_timeout(dev_cluster, job_file, tmp_path, command):
    """A socket that accepts connections and never speaks TLS: were a request unbounded, the command would hang
    until the subprocess timeout and the test would fail."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        kubeconfig = pointed_at(dev_cluster, tmp_path, silent.getsockname()[1])
        result = dev_cluster.cli(*every_command(job_file)[command], "--kubeconfig", str(kubeconfig),
                                 "--request-timeout", "1s", timeout=60)

    line = one_error_line(result, "error: cannot reach the Kubernetes API server")
    assert "it accepted the connection but did not answer within 1s" in line


def test_a_context_the_kubeconfig_does_not_have(dev_cluster):
    one_error_line(dev_cluster.cli("queues", "--context", "prod"),
                   f"error: --context: got 'prod'; allowed: a context of {dev_cluster.cli.kubeconfig}:")


KUEUE_CRDS = ("workloads", "clusterqueues", "localqueues", "resourceflavors", "admissionchecks",
              "workloadpriorityclasses")


@pytest.fixture(scope="module")
def kueue_before_v1beta2(dev_cluster, job_file) -> Iterator[None]:
    """A JobSet `some`, then Kueue's CRDs serving v1beta1 only, as Kueue releases before 0.15 do (the objects stay
    in etcd); v1beta2 served again afterwards. The Kueue controller is paused meanwhile (SIGSTOP), so that its
    watches do not fail and back off while its kinds are away."""
    extensions = client.ApiextensionsV1Api(dev_cluster.api)
    dev_cluster.cli.ok("workload", "submit", str(job_file))
    kueue = next(p for p in dev_cluster.state.processes if p.name == "kueue")

    def serve_v1beta2(served: bool) -> None:
        for plural in KUEUE_CRDS:
            crd = extensions.read_custom_resource_definition(f"{plural}.kueue.x-k8s.io")
            index = next(i for i, v in enumerate(crd.spec.versions) if v.name == "v1beta2")
            extensions.patch_custom_resource_definition(f"{plural}.kueue.x-k8s.io", [
                {"op": "replace", "path": f"/spec/versions/{index}/served", "value": served}])

    def served() -> bool:
        try:
            dev_cluster.custom().list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")
        except client.ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    os.kill(kueue.pid, signal.SIGSTOP)
    try:
        serve_v1beta2(False)
        until(lambda: not served(), "v1beta2 no longer served")
        yield
    finally:
        serve_v1beta2(True)
        until(served, "v1beta2 served again")
        os.kill(kueue.pid, signal.SIGCONT)
        # The garbage collector lost Kueue's kinds with v1beta2 and finds them again only at its next discovery
        # sync (every 30 s): the JobSet's Workload is deleted by hand rather than waited for.
        dev_cluster.clear(NS, workloads=True)


# Last on the dev stack: after v1beta2 is served again, the garbage collector is blind to Kueue's kinds until its
# next discovery sync (up to 30 s), and a foreground deletion of a JobSet waits for that.
@pytest.mark.sandbox(DEV, group="day-two", last=True)
@pytest.mark.parametrize("command", [c for c in READ_COMMANDS if c != "logs"] + ["submit"])  # logs reads pods only
def test_every_command_without_kueues_v1beta2_says_kueue_is_missing(dev_cluster, job_file, kueue_before_v1beta2,
                                                                   command):
    result = dev_cluster.cli(*every_command(job_file)[command])

    line = one_error_line(result, f"error: the cluster {server(dev_cluster)} does not serve ")
    assert ".kueue.x-k8s.io/v1beta2: Kueue (>= 0.15, the first release serving kueue.x-k8s.io/v1beta2) is not " \
           "installed." in line
