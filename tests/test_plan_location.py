"""The same commit plans the same bytes wherever it is checked out: the PR workflow diffs `base/` and `head/`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import REPO
from tpuplane.cli.main import app


def checkout(root: Path) -> Path:
    """The files a plan reads (Pulumi.yaml, the program, the sidecar build context) copied under `root`."""
    root.mkdir(parents=True)
    shutil.copy(REPO / "Pulumi.yaml", root / "Pulumi.yaml")
    for folder in ("stacks", "sidecar"):
        shutil.copytree(REPO / folder, root / folder)
    return root


@pytest.mark.parametrize("stack", ["pathways", "dev"])
def test_plan_json_is_identical_from_two_checkouts(tmp_path, stack):
    plans = []
    for root in (checkout(tmp_path / "base"), checkout(tmp_path / "head" / "nested" / "deeper")):
        result = CliRunner().invoke(app, ["plan", "--project-dir", str(root), "--stack", stack, "--format", "json"])
        assert result.exit_code == 0, result.stderr
        plans.append(result.stdout)
    assert plans[0] == plans[1]
    assert str(tmp_path) not in plans[0]
