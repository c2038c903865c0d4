"""Shared fixtures and helpers: stack configs as users write them, the real stack program run under Pulumi's mocks,
what a bad config is refused for, and where a JobSet keeps its pods."""

from __future__ import annotations

import copy
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from hypothesis import settings

from tpuplane.infra.errors import Problem, problems_of

# CI (`.ci/run`) draws the same examples on every run, so a red CI is the commit's, never the dice's; a local run
# draws fresh ones each time, which is where new bugs turn up (a failure prints the example to reproduce).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)

REPO = Path(__file__).resolve().parents[1]
STACKS = REPO / "stacks"

# The minimal config: must be accepted as it is.
MINIMAL_CONFIG: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "gcp:region": "us-east5",
    "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b"},
    "tpuplane:tpuPools": [
        {"name": "train", "tpuType": "v6e-16", "slices": 4, "capacity": "spot"},
        {"name": "big", "tpuType": "v5p-128", "slices": 2, "capacity": "reservation", "reservation": "v5p-res"},
    ],
    "tpuplane:reservations": [{"name": "v5p-res", "tpuType": "v5p-128", "slices": 2}],
}


@pytest.fixture
def jax_without_backend() -> None:
    """A process whose JAX has no backend yet, as connect() requires: the CPU backend other tests made is released
    (the next test that uses JAX makes a new one). JAX loads only for the tests that take this."""
    from cpu_jax import release_backends

    release_backends()


@pytest.fixture
def raw_config() -> dict[str, Any]:
    """A fresh deep copy of the minimal config, for tests to break one field at a time."""
    return copy.deepcopy(MINIMAL_CONFIG)


def stack_file_config(stack: str) -> dict[str, Any]:
    return yaml.safe_load((STACKS / f"Pulumi.{stack}.yaml").read_text())["config"]


def config_problems(raw: dict[str, Any]) -> list[Problem]:
    """What a stack config that must be refused is refused for."""
    from tpuplane.infra.stack import load_stack_config

    problems = problems_of(lambda: load_stack_config(raw))
    assert problems, "the config was accepted"
    return problems


def refusals(raw: dict[str, Any]) -> list[tuple[str, object]]:
    """Each problem of a refused stack config as (path, value given)."""
    return [(problem.path, problem.given) for problem in config_problems(raw)]


def poll_until(condition: Callable[[], Any], *, patience: float = 30.0) -> bool:
    """Poll until `condition()` holds; False if it still does not after `patience` seconds."""
    deadline = time.monotonic() + patience
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def printed_by_two_processes(code: str, *args: str) -> tuple[str, str]:
    """What `code` prints in two fresh interpreters with different hash seeds, so that set and dict orders and
    object ids differ between the runs (a determinism test compares them). It runs in tests/, so it may import a
    test module for its builders."""
    runs = [subprocess.run([sys.executable, "-c", code, *args], cwd=Path(__file__).parent, capture_output=True,
                           text=True, env={**os.environ, "PYTHONHASHSEED": seed}) for seed in ("1", "2")]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr + runs[1].stderr
    return runs[0].stdout, runs[1].stdout


def pod_spec(jobset: dict[str, Any], job: str | int = 0) -> dict[str, Any]:
    """The pod spec of one replicated job of a JobSet, by name or by position."""
    jobs = jobset["spec"]["replicatedJobs"]
    replicated = jobs[job] if isinstance(job, int) else next(r for r in jobs if r["name"] == job)
    return replicated["template"]["spec"]["template"]["spec"]


@pytest.fixture
def plan_stack() -> Callable[..., Any]:
    """Run stacks/__main__.py under mocks (GCP and Kubernetes cannot exist here) and return the Plan."""
    from tpuplane.components.offline import run_program_file

    def run(config: dict[str, Any], stack: str = "test"):
        return run_program_file(STACKS / "__main__.py", config, project="tpuplane", stack=stack)

    return run


@pytest.fixture
def registrations(monkeypatch):
    """Every resource a program run under the offline runner registers (the root stack aside), in order."""
    from tpuplane.components import offline

    seen: list[str] = []
    register = offline._RecordingMonitor.RegisterResource

    def counting(self, request):
        if request.type != "pulumi:pulumi:Stack":
            seen.append(f"{request.type}::{request.name}")
        return register(self, request)

    monkeypatch.setattr(offline._RecordingMonitor, "RegisterResource", counting)
    return seen


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose kernel completes TCP handshakes (listen backlog) but nobody ever reads or answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


# The e2e tier (tests/e2e) runs against a real control plane built from Go modules: `make e2e`, or `pytest --e2e
# tests/e2e`. The unit tier never collects it.
def pytest_addoption(parser):
    parser.addoption("--e2e", action="store_true", help="also collect tests/e2e (needs `tpuplane sandbox build`)")


def pytest_ignore_collect(collection_path, config):
    if collection_path.name == "e2e" and collection_path.parent == Path(__file__).parent:
        return not config.getoption("--e2e")
    return None
