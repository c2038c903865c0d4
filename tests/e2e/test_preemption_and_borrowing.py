"""The queues tpuplane derives behave as its docs promise, for real (Kueue 0.19.2, kube-scheduler, kwok nodes):

- within a ClusterQueue, a higher-priority workload preempts a lower one (`withinClusterQueue: LowerPriority`);
- between teams of a cohort, a team borrows what another does not use, within its borrowing limit, and a team
  below its share reclaims what it lent, whatever the borrower's priority (`reclaimWithinCohort: Any`).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from conftest import REPO
from e2e.conftest import DEV, PATHWAYS
from e2e.kueue_judge import WORKLOAD, observe, remove, submit, workload_of

TPUPLANE = str(Path(sys.executable).parent / "tpuplane")
IMAGE = ["--image", "us-docker.pkg.dev/acme-ml/train/trainer:1", "--command", "python -m trainer.main"]


def rendered(stack: str, name: str, *args: str) -> dict:
    """One slice of v6e-16 on spot capacity, as `tpuplane workload render --stack` writes it."""
    out = subprocess.run([TPUPLANE, "workload", "render", "--stack", stack, "--tpu-type", "v6e-16", "--capacity",
                          "spot", "--name", name, *args, *IMAGE], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    return yaml.safe_load(out)


def evicted(api: client.ApiClient, namespace: str, name: str, timeout: float = 60.0) -> dict:
    """The Evicted condition of the workload's Workload, once Kueue sets it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workload = workload_of(api, namespace, name) or {}
        for condition in workload.get("status", {}).get("conditions", []):
            if condition["type"] == "Evicted" and condition["status"] == "True":
                return condition
        time.sleep(0.5)
    raise AssertionError(f"{namespace}/{name} was not evicted within {timeout:.0f} s")


def borrowed_chips(api: client.ApiClient, cluster_queue: str, flavor: str, expected: int,
                   timeout: float = 60.0) -> int:
    """The chips the ClusterQueue's status says it borrows in `flavor`, once they are `expected` (Kueue writes a
    ClusterQueue's usage some time after it admits or evicts), else the last seen after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        status = client.CustomObjectsApi(api).get_cluster_custom_object(
            WORKLOAD[0], WORKLOAD[1], "clusterqueues", cluster_queue).get("status", {})
        borrowed = sum(int(r.get("borrowed", 0)) for usage in status.get("flavorsUsage", [])
                       if usage["name"] == flavor for r in usage["resources"] if r["name"] == "google.com/tpu")
        if borrowed == expected or time.monotonic() > deadline:
            return borrowed
        time.sleep(0.5)


@pytest.fixture
def cleanup():
    """Deletes what a test submitted, whatever happened."""
    submitted: list[tuple[client.ApiClient, str, str]] = []
    yield submitted
    for api, namespace, name in submitted:
        remove(api, namespace, name)


@pytest.mark.sandbox(DEV)
def test_a_higher_priority_workload_preempts_a_lower_one_in_its_queue(sandbox, cleanup):
    """dev: one ClusterQueue over two spot slices. Two low-priority jobs fill it; a high-priority one takes a
    slice from one of them."""
    api = config.new_client_from_config(sandbox.kubeconfig)
    for name in ("low-a", "low-b"):
        cleanup.append((api, *submit(api, rendered("dev", name, "--priority", "low"))))
        assert observe(api, "default", name).state == "admitted"
    cleanup.append((api, *submit(api, rendered("dev", "urgent", "--priority", "high"))))

    assert observe(api, "default", "urgent").state == "admitted"
    reasons = []
    for name in ("low-a", "low-b"):
        workload = workload_of(api, "default", name)
        reasons += [c for c in workload["status"].get("conditions", []) if c["type"] == "Evicted"
                    and c["status"] == "True"]
    assert [c["reason"] for c in reasons] == ["Preempted"]
    assert "due to prioritization in the ClusterQueue" in reasons[0]["message"]


@pytest.mark.sandbox(PATHWAYS)
def test_a_team_borrows_unused_quota_and_the_lender_reclaims_it(sandbox, cleanup):
    """pathways: the batch group's 4 spot slices split 3 to research (may borrow one more) and 1 to evals.
    Research runs four one-slice jobs, the fourth on evals' slice; when evals submits, Kueue takes it back."""
    api = config.new_client_from_config(sandbox.kubeconfig)
    research = ["--queue", "research", "--namespace", "research", "--priority", "very-high"]
    for i in range(4):
        cleanup.append((api, *submit(api, rendered("pathways", f"r{i}", *research))))
    assert [observe(api, "research", f"r{i}").state for i in range(4)] == ["admitted"] * 4
    assert borrowed_chips(api, "research", "tpu-v6e-slice-4x4-spot", 16) == 16

    cleanup.append((api, *submit(api, rendered("pathways", "e0", "--queue", "evals", "--namespace", "evals"))))
    assert observe(api, "evals", "e0").state == "admitted"
    reclaimed = [name for name in (f"r{i}" for i in range(4))
                 if any(c["type"] == "Evicted" and c["status"] == "True" and c["reason"] == "Preempted"
                        for c in workload_of(api, "research", name)["status"].get("conditions", []))]
    assert len(reclaimed) == 1, reclaimed
    assert "reclamation" in evicted(api, "research", reclaimed[0])["message"].lower()
    assert borrowed_chips(api, "research", "tpu-v6e-slice-4x4-spot", 0) == 0
