"""The runtime's public names: importable from the package, loaded only when used."""

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_runtime_package_imports_neither_jax_nor_kubernetes():
    loaded = _run("import sys, tpuplane.runtime; print(sorted(m for m in sys.modules "
                  "if m.split('.')[0] in ('jax', 'kubernetes', 'pulumi')))")
    assert loaded == "[]"


@pytest.mark.parametrize("name, module", [("connect", "tpuplane.runtime.session"),
                                          ("LocalSidecar", "tpuplane.runtime.local_sidecar"),
                                          ("RemoteIterator", "tpuplane.runtime.remote_iterator"),
                                          ("on_each_host", "tpuplane.runtime.colocated")])
def test_runtime_public_name_is_the_object_of_its_module(name, module):
    assert _run(f"import importlib; from tpuplane.runtime import {name} as obj; "
                f"print(obj is getattr(importlib.import_module('{module}'), '{name}'))") == "True"


def test_runtime_connect_is_callable_even_after_its_module_was_imported():
    """The function, not a module: `connect(...)` must never be `'module' object is not callable`."""
    assert _run("import tpuplane.runtime.session; from tpuplane.runtime import connect; print(callable(connect) "
                "and connect.__module__)") == "tpuplane.runtime.session"


def test_runtime_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        import tpuplane.runtime as runtime
        runtime.nope  # noqa: B018
