"""The e2e tier: tpuplane's stacks on a real control plane (`tpuplane sandbox`: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, Kueue, JobSet, kwok's nodes) and the real Pulumi engine.

Run with `make e2e` (it builds the toolchain first). A missing toolchain fails the tier, naming what to build: these
tests are never skipped for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from conftest import REPO, STACKS
from tpuplane.cli.plan import read_stack_file
from tpuplane.infra.stack import load_stack_config
from tpuplane.sandbox import lifecycle, toolchain
from tpuplane.sandbox.kwok import COMPLETE_DELAY_ANNOTATION
from tpuplane.sandbox.layout import SandboxState
from tpuplane.sandbox.processes import MARKER_ENV

TPUPLANE = Path(sys.executable).parent / "tpuplane"


@pytest.fixture(scope="session", autouse=True)
def toolchain_built() -> None:
    try:
        toolchain.require_all()
    except toolchain.ToolchainMissing as exc:
        pytest.fail(str(exc), pytrace=False)


def stack_source(stack: str, config_file: Path | None = None) -> lifecycle.StackSource:
    path = config_file or STACKS / f"Pulumi.{stack}.yaml"
    config = load_stack_config(read_stack_file(path, "tpuplane"), project_dir=REPO)
    return lifecycle.StackSource(config, "tpuplane", stack, path, REPO)


def processes_marked(directory: Path) -> list[int]:
    """Pids of live processes whose environment carries the sandbox's marker for `directory`."""
    marker = f"{MARKER_ENV}={directory}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in environ.split(b"\0") and state != "Z":
            found.append(int(proc.name))
    return found


@contextmanager
def sandbox_of(stack: str, tmp_path_factory) -> Iterator[SandboxState]:
    """A sandbox playing `stack`, its Kubernetes half applied by the engine, removed afterwards."""
    from tpuplane.sandbox.engine import apply_kubernetes_half

    directory = tmp_path_factory.mktemp("sandbox") / stack
    state = lifecycle.up(stack_source(stack), directory, apply=apply_kubernetes_half)
    try:
        yield state
    finally:
        lifecycle.down(directory)


@pytest.fixture(scope="session")
def dev_sandbox(tmp_path_factory) -> Iterator[SandboxState]:
    """The dev stack on a sandbox, its Kubernetes half applied by the engine; shared by the tests of a session."""
    with sandbox_of("dev", tmp_path_factory) as state:
        os.environ.setdefault("TPUPLANE_E2E_KUBECONFIG", state.kubeconfig)
        yield state


# ---------------------------------------------------------------------------------------------------------------
# The day-two commands on a live cluster: `tpuplane` in a subprocess, as a user runs it after `sandbox up`


@dataclass(frozen=True)
class Cli:
    """`tpuplane` run as a user runs it: a subprocess with $KUBECONFIG set (as `sandbox up` says to), in a folder
    of its own, never at a terminal (stdin is an empty pipe)."""

    kubeconfig: str
    folder: Path

    def __call__(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": self.kubeconfig}
        return subprocess.run([str(TPUPLANE), *args], cwd=self.folder, env=env, input="", capture_output=True,
                              text=True, timeout=timeout)

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run it and insist on exit 0."""
        result = self(*args)
        assert result.returncode == 0, f"tpuplane {' '.join(args)}: exit {result.returncode}\n{result.stderr}"
        return result


@dataclass(frozen=True)
class LiveCluster:
    """A sandbox for the day-two tests: the CLI pointed at it, and a client to judge what it did."""

    state: SandboxState
    api: client.ApiClient
    cli: Cli

    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def jobsets(self, namespace: str) -> dict[str, dict[str, Any]]:
        found = self.custom().list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets")
        return {j["metadata"]["name"]: j for j in found["items"]}

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        return self.custom().list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace,
                                                           "workloads")["items"]

    def workload_of(self, namespace: str, jobset: str) -> dict[str, Any] | None:
        return next((w for w in self.workloads(namespace)
                     if any(o.get("name") == jobset for o in w["metadata"].get("ownerReferences", []))), None)

    def condition(self, namespace: str, jobset: str, kind: str) -> dict[str, Any]:
        """A condition of the JobSet's Kueue Workload (or {} while there is none)."""
        workload = self.workload_of(namespace, jobset) or {}
        return next((c for c in workload.get("status", {}).get("conditions", []) if c["type"] == kind), {})

    def clear(self, *namespaces: str, timeout: float = 120) -> None:
        """Delete every JobSet of the namespaces; return once their Workloads and pods are gone, so the quota and
        the nodes are free for the next test."""
        core = client.CoreV1Api(self.api)
        for namespace in namespaces:
            for name in self.jobsets(namespace):
                self.custom().delete_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets",
                                                              name, propagation_policy="Background")

        def left() -> list[str]:
            return [f"{kind} {n}/{name}" for n in namespaces for kind, names in (
                ("JobSet", list(self.jobsets(n))), ("Workload", [w["metadata"]["name"] for w in self.workloads(n)]),
                ("Pod", [p.metadata.name for p in core.list_namespaced_pod(n).items])) for name in names]

        until(lambda: not left(), f"{', '.join(namespaces)} emptied", timeout, still=left)


def until(ready: Callable[[], Any], what: str, timeout: float = 90, still: Callable[[], Any] | None = None) -> Any:
    """Poll until `ready()` is truthy, and return its value; on timeout, say what `still()` finds."""
    deadline = time.monotonic() + timeout
    while True:
        value = ready()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}" + (f" (still: {still()})" if still else ""))
        time.sleep(0.5)


@contextmanager
def live_cluster(stack: str, tmp_path_factory) -> Iterator[LiveCluster]:
    with sandbox_of(stack, tmp_path_factory) as state:
        folder = tmp_path_factory.mktemp(f"{stack}-cli")
        yield LiveCluster(state, config.new_client_from_config(state.kubeconfig), Cli(state.kubeconfig, folder))


@pytest.fixture(scope="module")
def dev_cluster(tmp_path_factory) -> Iterator[LiveCluster]:
    """The dev stack (one ClusterQueue, two spot v6e-16 slices) on a sandbox of the module's own."""
    with live_cluster("dev", tmp_path_factory) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def teams_cluster(tmp_path_factory) -> Iterator[LiveCluster]:
    """The pathways stack on a sandbox of the module's own: the shipped stack whose teams (research, evals) share a
    cohort over its spot batch pool."""
    with live_cluster("pathways", tmp_path_factory) as cluster:
        yield cluster


def rendered(cli: Cli, name: str, *, slices: int = 1, priority: str = "medium", queue: str | None = None,
             namespace: str | None = None, tpu_type: str = "v6e-16", capacity: str = "spot",
             edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """`tpuplane workload render` of a workload (a spot v6e-16 by default) into a file, then `edit`ed to reach
    the state a test needs, as a user writes one before `workload submit`."""
    args = ["workload", "render", "--tpu-type", tpu_type, "--capacity", capacity, "--slices", str(slices),
            "--image", "busybox", "--command", "python train.py", "--name", name, "--priority", priority]
    args += ["--queue", queue] if queue else []
    args += ["--namespace", namespace] if namespace else []
    document = yaml.safe_load(cli.ok(*args).stdout)
    if edit is not None:
        edit(document)
    path = cli.folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def pod_template(jobset: dict[str, Any]) -> dict[str, Any]:
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


def finishing(after: str) -> Callable[[dict[str, Any]], None]:
    """Its pods complete `after` they start (kwok's delay annotation): the workload finishes."""
    return lambda jobset: pod_template(jobset)["metadata"].setdefault("annotations", {}).update(
        {COMPLETE_DELAY_ANNOTATION: after})


def failing(after_seconds: int) -> Callable[[dict[str, Any]], None]:
    """Its Job outlives activeDeadlineSeconds: the Job controller fails it, and the JobSet (no restarts) fails."""
    return lambda jobset: jobset["spec"]["replicatedJobs"][0]["template"]["spec"].update(
        {"activeDeadlineSeconds": after_seconds})


def selecting(label: str, value: str) -> Callable[[dict[str, Any]], None]:
    """Its pods also select a node label."""
    return lambda jobset: pod_template(jobset)["spec"]["nodeSelector"].update({label: value})
