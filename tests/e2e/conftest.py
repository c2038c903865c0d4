"""The e2e tier: tpuplane's stacks on a real control plane (`tpuplane sandbox`: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, Kueue, JobSet, kwok's nodes) and the real Pulumi engine.

Run with `make e2e` (it builds the toolchain first). A missing toolchain fails the tier, naming what to build: these
tests are never skipped for it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, STACKS
from tpuplane.cli.plan import read_stack_file
from tpuplane.infra.stack import load_stack_config
from tpuplane.sandbox import lifecycle, toolchain
from tpuplane.sandbox.layout import SandboxState
from tpuplane.sandbox.processes import marked


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


@pytest.fixture(scope="session")
def dev_sandbox(tmp_path_factory) -> Iterator[SandboxState]:
    """The dev stack on a sandbox, its Kubernetes half applied by the engine; shared by the tests of a session."""
    from tpuplane.sandbox.engine import apply_kubernetes_half

    directory = tmp_path_factory.mktemp("sandbox") / "dev"
    state = lifecycle.up(stack_source("dev"), directory, apply=apply_kubernetes_half)
    os.environ.setdefault("TPUPLANE_E2E_KUBECONFIG", state.kubeconfig)
    yield state
    lifecycle.down(directory)


class Sandboxes:
    """One sandbox at a time, per stack config file, reused by every test that asks for that stack: asking for
    another stack stops the one that runs (the machine has two cores). `applied=True` brings the stack's
    Kubernetes half up with the engine first (a no-op when it is), `applied=False` takes it down (likewise)."""

    def __init__(self, root: Path):
        self.root = root
        self.current: tuple[Path, SandboxState] | None = None

    def get(self, config_file: Path, *, applied: bool | None = None) -> SandboxState:
        from tpuplane.sandbox.engine import Engine, apply_kubernetes_half, stack_project

        config_file = config_file.resolve()
        if self.current is not None and self.current[0] != config_file:
            self.close()
        if self.current is None:
            stack = config_file.stem.removeprefix("Pulumi.")
            state = lifecycle.up(stack_source(stack, config_file), self.root / stack)
            self.current = (config_file, state)
        state = self.current[1]
        if applied:
            apply_kubernetes_half(state, lambda _: None)
        elif applied is False:
            engine, project = Engine(Path(state.directory) / "pulumi", Path(state.kubeconfig)), stack_project(state)
            engine.prepare(project)
            engine.destroy(project)
        return state

    def close(self) -> None:
        if self.current is not None:
            lifecycle.down(Path(self.current[1].directory))
            self.current = None


@pytest.fixture(scope="session")
def sandboxes(tmp_path_factory) -> Iterator[Sandboxes]:
    pool = Sandboxes(tmp_path_factory.mktemp("sandboxes"))
    yield pool
    pool.close()
