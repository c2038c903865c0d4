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
from tpuplane.infra.batch.workload import JOBSET_NAME_LABEL
from tpuplane.sandbox.kwok import COMPLETE_DELAY_ANNOTATION
from tpuplane.sandbox.layout import SandboxState
from tpuplane.sandbox.processes import marked

TPUPLANE = Path(sys.executable).parent / "tpuplane"


@pytest.fixture(scope="session", autouse=True)
def toolchain_built() -> None:
    try:
        toolchain.require_all()
    except toolchain.ToolchainMissing as exc:
        pytest.fail(str(exc), pytrace=False)


def stack_source(stack: str, config_file: Path | None = None) -> lifecycle.StackSource:
    """A stack as `tpuplane sandbox up --stack` (or `--config`) reads it, in this repository's project."""
    path = config_file or STACKS / f"Pulumi.{stack}.yaml"
    config = load_stack_config(read_stack_file(path, "tpuplane"), project_dir=REPO)
    return lifecycle.StackSource(config, "tpuplane", stack, path, REPO)


def processes_marked(directory: Path) -> list[int]:
    """Pids of live processes whose environment carries the sandbox's marker for `directory`."""
    return marked(str(directory))


# The stacks the shared sandboxes play, as the `sandbox` mark names them (config files, relative to the repository).
DEV, PROD, PATHWAYS = "stacks/Pulumi.dev.yaml", "stacks/Pulumi.prod.yaml", "stacks/Pulumi.pathways.yaml"


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "sandbox(config, applied=True, last=False, group=''): the test runs on a "
                                       "sandbox of this stack config, its Kubernetes half applied (or not); `last`: "
                                       "after the group's other tests, for a test that leaves the cluster disturbed; "
                                       "`group`: a sandbox of its own for the tests that name it")


@dataclass(frozen=True)
class SandboxMark:
    """What a test's `sandbox` mark asks for: the stack config's path, whether its half is applied, whether the
    test runs after the others of its group, and the group: the tests of a stack config and group share one
    sandbox, brought up once."""

    config_file: Path
    applied: bool
    last: bool
    group: str

    @classmethod
    def of(cls, node: pytest.Item | pytest.Collector) -> "SandboxMark | None":
        mark = node.get_closest_marker("sandbox")
        return None if mark is None else cls((REPO / mark.args[0]).resolve(), mark.kwargs.get("applied", True),
                                             mark.kwargs.get("last", False), mark.kwargs.get("group", ""))

    @property
    def key(self) -> tuple[Path, str]:
        return self.config_file, self.group

    @property
    def stack(self) -> str:
        return self.config_file.stem.removeprefix("Pulumi.")

    @property
    def name(self) -> str:
        return f"{self.stack}-{self.group}" if self.group else self.stack


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the xdist_group marks added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of one stack config and group run together, whatever their file, so that their sandbox comes up
    once; tests with a sandbox of their own, or none, run first. Within a group, the tests that need its Kubernetes
    half unapplied go first (a fresh sandbox is, and applying happens once after them), and those marked `last` go
    last. Under xdist (`make e2e` runs two workers, `--dist loadgroup`) each group goes whole to one worker."""
    groups: dict[tuple[Path, str], int] = {}
    for item in items:
        if (mark := SandboxMark.of(item)) is not None:
            groups.setdefault(mark.key, len(groups))
            item.add_marker(pytest.mark.xdist_group(mark.name))

    def order(indexed: tuple[int, pytest.Item]) -> tuple[int, bool, bool, int]:
        index, item = indexed
        mark = SandboxMark.of(item)
        return (-1, False, False, index) if mark is None else (groups[mark.key], mark.applied, mark.last, index)

    items[:] = [item for _, item in sorted(enumerate(items), key=order)]


class Sandboxes:
    """One sandbox at a time per test process, per stack config and group, reused by every test marked for them: a
    test of another group stops the one that runs. `applied=True` brings the stack's Kubernetes half up with the
    engine first, `applied=False` takes it down; each only when it is not so already (a test that applies or
    destroys the half itself says so with `changed_half`)."""

    def __init__(self, root: Path, config: pytest.Config):
        self.root = root
        self.config = config
        self.current: tuple[SandboxMark, SandboxState] | None = None
        self.applied: bool | None = None  # None: not known (a test ran the engine on it itself)
        self.finished: set[tuple[Path, str]] = set()  # groups whose sandbox this process has stopped

    def get(self, config_file: Path, *, applied: bool | None = None) -> SandboxState:
        """The sandbox of `config_file` for the running test's group."""
        from tpuplane.sandbox.engine import Engine, apply_kubernetes_half, stack_project

        config_file = config_file.resolve()
        mark = self.config.stash.get(RUNNING_MARK, None)
        if mark is None or mark.config_file != config_file:
            raise pytest.UsageError(f"a test uses the sandbox of {config_file} but is marked for "
                                    f"{mark.config_file if mark else 'none'}: mark it @pytest.mark.sandbox(<that "
                                    "config>), so that the tier runs it with that stack's tests")
        if self.current is not None and self.current[0].key != mark.key:
            self.close()
        if mark.key in self.finished:
            raise pytest.UsageError(f"the tests of sandbox group {mark.name!r} did not run together (its `last` tests "
                                    "and applied=False ones rely on it): under xdist, is `--dist loadgroup` in "
                                    "effect? (pyproject.toml pins pytest below 9.2 for it)")
        if self.current is None:
            state = lifecycle.up(stack_source(mark.stack, config_file), self.root / mark.name)
            self.current, self.applied = (mark, state), False
        state = self.current[1]
        if applied and self.applied is not True:
            apply_kubernetes_half(state, lambda _: None)
            self.applied = True
        elif applied is False and self.applied is not False:
            engine, project = Engine(Path(state.directory) / "pulumi", Path(state.kubeconfig)), stack_project(state)
            engine.prepare(project)
            engine.destroy(project)
            self.applied = False
        return state

    def changed_half(self) -> None:
        """The running test applied or destroyed the stack's Kubernetes half itself: not known any more."""
        self.applied = None

    def close(self) -> None:
        if self.current is not None:
            self.finished.add(self.current[0].key)
            lifecycle.down(Path(self.current[1].directory))
            self.current, self.applied = None, None


RUNNING_MARK = pytest.StashKey["SandboxMark | None"]()  # the `sandbox` mark of the test being set up or run


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture of the test (module-scoped ones too): which sandbox its mark allows."""
    item.config.stash[RUNNING_MARK] = SandboxMark.of(item)


@pytest.fixture(scope="session")
def sandboxes(tmp_path_factory, pytestconfig) -> Iterator[Sandboxes]:
    pool = Sandboxes(tmp_path_factory.mktemp("sandboxes"), pytestconfig)
    yield pool
    pool.close()


@pytest.fixture
def sandbox(request, sandboxes: Sandboxes) -> SandboxState:
    """The sandbox of the stack the test's `sandbox` mark names, its half applied or not as the mark says."""
    mark = SandboxMark.of(request.node)
    if mark is None:
        raise pytest.UsageError(f"{request.node.nodeid} uses `sandbox` without a `sandbox` mark")
    return sandboxes.get(mark.config_file, applied=mark.applied)

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

    def clear(self, *namespaces: str, timeout: float = 120, workloads: bool = False) -> None:
        """Delete every JobSet of the namespaces (and then every Workload, with `workloads`, where the garbage
        collector would be slow to); return once their Workloads and pods are gone, so the quota and the nodes
        are free for the next test (other pods, such as the proxy janitor's, are not theirs to wait for)."""
        core = client.CoreV1Api(self.api)
        for namespace in namespaces:
            for name in self.jobsets(namespace):
                self.custom().delete_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets",
                                                              name, propagation_policy="Background")
            for workload in self.workloads(namespace) if workloads else []:
                self.custom().delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, "workloads",
                                                              workload["metadata"]["name"])

        def pods(namespace: str) -> list[str]:
            return [p.metadata.name for p in core.list_namespaced_pod(namespace, label_selector=JOBSET_NAME_LABEL).items]

        def left() -> list[str]:
            return [f"{kind} {n}/{name}" for n in namespaces for kind, names in (
                ("JobSet", list(self.jobsets(n))), ("Workload", [w["metadata"]["name"] for w in self.workloads(n)]),
                ("Pod", pods(n))) for name in names]

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


def live_cluster(stack_config: str, sandboxes: Sandboxes, tmp_path_factory) -> LiveCluster:
    """The session's sandbox playing a stack, its Kubernetes half applied, with the CLI pointed at it."""
    state = sandboxes.get(REPO / stack_config, applied=True)
    folder = tmp_path_factory.mktemp(f"{state.stack}-cli")
    return LiveCluster(state, config.new_client_from_config(state.kubeconfig), Cli(state.kubeconfig, folder))


@pytest.fixture(scope="module")
def dev_cluster(sandboxes: Sandboxes, tmp_path_factory) -> LiveCluster:
    """The dev stack (one ClusterQueue, two spot v6e-16 slices) on the session's sandbox."""
    return live_cluster(DEV, sandboxes, tmp_path_factory)


@pytest.fixture(scope="module")
def teams_cluster(sandboxes: Sandboxes, tmp_path_factory) -> LiveCluster:
    """The pathways stack on the session's sandbox: the shipped stack whose teams (research, evals) share a
    cohort over its spot batch pool."""
    return live_cluster(PATHWAYS, sandboxes, tmp_path_factory)


def rendered(cli: Cli, name: str, *, slices: int = 1, priority: str = "medium", queue: str | None = None,
             namespace: str | None = None, tpu_type: str = "v6e-16", capacity: str = "spot",
             edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """`tpuplane workload render` of a workload (a spot v6e-16 by default) into a file, then `edit`ed to reach
    the state a test needs, as a user writes one before `workload submit`. Rendering reads no cluster, so it runs
    in this process (a second each as a subprocess, some fifty times a tier); the commands under test do not."""
    from typer.testing import CliRunner

    from tpuplane.cli.main import app

    args = ["workload", "render", "--tpu-type", tpu_type, "--capacity", capacity, "--slices", str(slices),
            "--image", "busybox", "--command", "python train.py", "--name", name, "--priority", priority]
    args += ["--queue", queue] if queue else []
    args += ["--namespace", namespace] if namespace else []
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"tpuplane {' '.join(args)}: {result.stderr}"
    document = yaml.safe_load(result.stdout)
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
