"""Shared fixtures: stack configs as users write them, and the real stack program run under Pulumi's mocks."""

from __future__ import annotations

import copy
import socket
from pathlib import Path
from collections.abc import Iterator
from typing import Any, Callable

import jax
import jax.extend.backend
import pytest
import yaml

# Colocated Python tests run on 8 CPU devices; this must happen before any module touches the CPU backend.
jax.config.update("jax_num_cpu_devices", 8)
# On CPU, named: a connect() session registers JAX's `proxy` backend for the rest of the process (pathwaysutils
# does), which JAX would otherwise try to create in every later test.
jax.config.update("jax_platforms", "cpu")

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
    (the next test that uses JAX makes a new one)."""
    jax.extend.backend.clear_backends()
    jax.clear_caches()


@pytest.fixture
def raw_config() -> dict[str, Any]:
    """A fresh deep copy of the minimal config, for tests to break one field at a time."""
    return copy.deepcopy(MINIMAL_CONFIG)


def stack_file_config(stack: str) -> dict[str, Any]:
    return yaml.safe_load((STACKS / f"Pulumi.{stack}.yaml").read_text())["config"]


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
