"""pytest plugin: the `local_sidecar` fixture, to test colocated functions out of process.

A test calls `local_sidecar.call(fn, *args)` to run `fn` in a separate worker process, so a function that cannot
be pickled, a module the sidecar environment lacks, or a result that cannot travel back fails the test instead
of the deployed job. Point the worker at the sidecar's dependencies with `--sidecar-requirements FILE` (or the
ini option `tpuplane_sidecar_requirements`): a venv is built from it once and cached.

The fixture is function-scoped: each test gets a fresh process (about 0.1 s to start), because colocated code
keeps state in module globals and a test may crash its worker on purpose; a shared worker would leak both into
the next test. The venv, which is slow to build, is session-scoped (`local_sidecar_python`).

Functions defined in the test module itself are shipped by value while the fixture is active (the sidecar
could never import a test module); everything they import is still imported by the worker, as on a real sidecar.

The plugin is registered for every pytest run of an environment with tpuplane, so it imports nothing from the
`runtime` extra: without cloudpickle, pytest still starts and only a test taking `local_sidecar` fails, with an
ImportError that says `pip install 'tpuplane[runtime]'`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tpuplane.runtime.local_sidecar import LocalSidecar, ensure_sidecar_venv, pickled_by_value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tpuplane", "tpuplane local sidecar")
    group.addoption("--sidecar-python", help="interpreter of the local sidecar worker (default: this one)")
    group.addoption("--sidecar-requirements", help="requirements file of the sidecar; the worker runs in a venv "
                                                   "built from it (cached)")
    parser.addini("tpuplane_sidecar_python", "interpreter of the local sidecar worker")
    parser.addini("tpuplane_sidecar_requirements", "requirements file of the sidecar, relative to the rootdir")


@pytest.fixture(scope="session")
def local_sidecar_python(pytestconfig: pytest.Config) -> str:
    """The worker's interpreter: the configured one, inside a venv built from the requirements if configured."""
    python = pytestconfig.getoption("sidecar_python") or pytestconfig.getini("tpuplane_sidecar_python") or None
    requirements = pytestconfig.getoption("sidecar_requirements")
    if requirements:
        requirements_path = Path(requirements)
    elif pytestconfig.getini("tpuplane_sidecar_requirements"):
        requirements_path = pytestconfig.rootpath / pytestconfig.getini("tpuplane_sidecar_requirements")
    else:
        return python or sys.executable
    return str(ensure_sidecar_venv(requirements_path, python=python))


@pytest.fixture
def local_sidecar(local_sidecar_python: str, request: pytest.FixtureRequest) -> Iterator[LocalSidecar]:
    """A started LocalSidecar for this test; closed (and its process reaped) afterwards."""
    module = request.node.module if isinstance(request.node, pytest.Function) else None
    with contextlib.ExitStack() as stack:
        if module is not None:
            stack.enter_context(pickled_by_value(module))
        yield stack.enter_context(LocalSidecar(python=local_sidecar_python))
