"""`tpuplane sandbox up`, `status` and `down`, as a user runs them: a real control plane comes up with the stack's
nodes, and `down` leaves no process, no port and no folder behind."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client, config

from conftest import REPO
from e2e.conftest import processes_marked, stack_source
from tpuplane.infra.fleet.nodes import stack_nodes
from tpuplane.sandbox import lifecycle
from tpuplane.sandbox.processes import ProcessFailed, listening

# One worker runs them all (`make e2e` has two): split, each worker would bring `upped` up for its share.
pytestmark = pytest.mark.xdist_group("lifecycle")


def tpuplane(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "tpuplane"), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900)


@pytest.fixture
def folder(tmp_path) -> Path:
    return tmp_path / "sandbox"


@dataclass(frozen=True)
class Upped:
    folder: Path
    kubeconfig: str  # what `up` printed
    ports: dict[str, int]


@pytest.fixture(scope="module")
def upped(tmp_path_factory) -> Iterator[Upped]:
    """`tpuplane sandbox up --stack dev` from the command line, once for the tests below (a sandbox costs 20 s);
    the last of them takes it down and checks what is left, and this takes down whatever that one did not."""
    folder = tmp_path_factory.mktemp("lifecycle") / "sandbox"
    up = tpuplane("sandbox", "up", "--stack", "dev", "--dir", str(folder))
    assert up.returncode == 0, up.stderr
    try:
        yield Upped(folder, up.stdout.strip(), json.loads((folder / "state.json").read_text())["ports"])
    finally:
        lifecycle.down(folder)


def test_status_says_every_process_runs_and_the_stack_is_applied(upped):
    status = tpuplane("sandbox", "status", "--dir", str(upped.folder), "-f", "json")

    assert status.returncode == 0, status.stdout + status.stderr
    doc = json.loads(status.stdout)
    assert doc["kubeconfig"] == upped.kubeconfig
    assert doc["apiServer"]["ready"] is True and doc["applied"] is True
    assert {p["name"]: p["state"] for p in doc["processes"]} == {
        name: "running" for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "jobset",
                                     "kueue", "kwok")}


def test_the_nodes_are_the_stacks_vms_with_gkes_labels(upped):
    api = client.CoreV1Api(config.new_client_from_config(upped.kubeconfig))
    nodes = {n.metadata.name: n for n in api.list_node().items}

    expected = {name for group in stack_nodes(stack_source("dev").config) for name in group.node_names("fleet-dev")}
    assert set(nodes) == expected
    tpu = nodes["gke-fleet-dev-train-0-0"]
    assert tpu.metadata.labels["cloud.google.com/gke-tpu-topology"] == "4x4"
    assert tpu.status.allocatable["google.com/tpu"] == "4"
    assert all(c.status == "True" for c in tpu.status.conditions if c.type == "Ready")


def test_a_second_up_is_refused_while_the_first_runs(upped):
    second = tpuplane("sandbox", "up", "--stack", "dev", "--dir", str(upped.folder))

    assert second.returncode == 2
    assert "already up" in second.stderr and "Traceback" not in second.stderr


def test_down_leaves_no_process_no_port_and_no_folder(upped):
    """Last of the tests on `upped`."""
    down = tpuplane("sandbox", "down", "--dir", str(upped.folder))

    assert down.returncode == 0, down.stderr
    assert processes_marked(upped.folder) == []
    assert [port for port in upped.ports.values() if listening(port)] == []
    assert not upped.folder.exists()


def test_a_failed_up_stops_what_it_started(folder, tmp_path, monkeypatch):
    """kube-scheduler exits as it starts (its binary is replaced by a script that fails): etcd, kube-apiserver and
    kube-controller-manager, started before it, are stopped."""
    from tpuplane.sandbox import control_plane

    failing = tmp_path / "kube-scheduler"
    failing.write_text("#!/bin/sh\necho 'kube-scheduler: cannot start' >&2\nexit 1\n")
    failing.chmod(0o755)
    real = control_plane.binary
    monkeypatch.setattr(control_plane, "binary", lambda name: failing if name == "kube-scheduler" else real(name))

    with pytest.raises(ProcessFailed, match="kube-scheduler exited before healthy"):
        lifecycle.up(stack_source("dev"), folder)
    assert processes_marked(folder) == []
    assert [p.name for p in folder.iterdir()] == ["logs"]  # kept to read; the next `up` clears them
