"""Commands that plan nothing start without the Pulumi SDK: they must not pay its imports (seconds, 100+ MiB).

Each command runs in a fresh interpreter under `-X importtime`, which lists every module it imported.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The Pulumi SDK, its providers and its gRPC transport.
PULUMI_MODULES = re.compile(r"^(pulumi|pulumi_[a-z_]+|grpc)(\.|$)")


@pytest.fixture(scope="module")
def empty_plan(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plans") / "plan.json"
    path.write_text(json.dumps({"project": "tpuplane", "stack": "dev", "resources": []}))
    return path


def imported_modules(*args: str) -> set[str]:
    """Every module `tpuplane ARGS` imports, from a fresh interpreter."""
    entry = "from tpuplane.cli.main import app; app(prog_name='tpuplane')"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", entry, *args], cwd=REPO, capture_output=True,
                          text=True)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("args", [
    ["--help"],
    ["catalog"],
    ["catalog", "v6e-16", "--json"],
    ["workload", "render", "--tpu-type", "v6e-16", "--image", "img", "--command", "true"],
    ["sidecar", "check", "--jax-version", "0.10.0"],
], ids=" ".join)
def test_cli_command_that_plans_nothing_imports_no_pulumi(args):
    modules = imported_modules(*args)
    assert "tpuplane.cli.main" in modules  # the listing is real
    assert sorted(m for m in modules if PULUMI_MODULES.match(m)) == []


def test_cli_diff_imports_no_pulumi(empty_plan):
    modules = imported_modules("diff", str(empty_plan), str(empty_plan))
    assert "tpuplane.cli.main" in modules
    assert sorted(m for m in modules if PULUMI_MODULES.match(m)) == []


def test_cli_plan_imports_pulumi():
    """The other side of the line: the listing does see the SDK when a command needs it."""
    modules = imported_modules("plan", "--stack", "dev", "--format", "json")
    assert {"pulumi", "pulumi_gcp"} <= modules
