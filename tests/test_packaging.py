"""Specification of the distribution: one `tpuplane` namespace, and a runtime that never needs pulumi."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from conftest import REPO

RUNTIME_MODULES = ["tpuplane.runtime.session", "tpuplane.runtime.janitor", "tpuplane.runtime.local_sidecar",
                   "tpuplane.runtime.colocated", "tpuplane.runtime.remote_iterator", "tpuplane.runtime.sidecar_worker"]


def run_python(code: str) -> str:
    """In a fresh interpreter outside the repository, so only installed modules are importable."""
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                          cwd="/").stdout.strip()


def test_runtime_modules_import_without_pulumi():
    loaded = run_python(f"import sys\nfor m in {RUNTIME_MODULES!r}: __import__(m)\n"
                        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_gcp', "
                        "'pulumi_kubernetes')))")
    assert loaded == "[]"


def test_runtime_extra_does_not_pull_pulumi():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["runtime"]
    assert not [req for req in wanted if req.lower().startswith("pulumi")]


def test_layers_install_under_the_tpuplane_namespace_only():
    found = run_python("import importlib.util as u\n"
                       "print([m for m in ('infra', 'components', 'runtime', 'cli', 'stacks') if u.find_spec(m)])")
    assert found == "[]"


def test_cli_starts_without_the_runtime_and_infra_extras():
    """A bare `pip install tpuplane` runs the catalog: kubernetes, cloudpickle and pulumi are blocked here."""
    out = run_python("import sys, json\n"
                     "for m in ('kubernetes', 'cloudpickle', 'pulumi', 'pulumi_gcp', 'jax'): sys.modules[m] = None\n"
                     "from typer.testing import CliRunner\n"
                     "from tpuplane.cli.main import app\n"
                     "result = CliRunner().invoke(app, ['catalog', 'v6e-16', '--json'])\n"
                     "print(result.exit_code, json.loads(result.stdout)['chips'])")
    assert out == "0 16"
