"""Specification of the `tpuplane` command's conventions: --version, shell completion, and help that lists
every choice and never cuts a line short at 80 columns."""

from __future__ import annotations

from importlib.metadata import version

import pytest
import typer.completion
from typer.testing import CliRunner

from tpuplane.cli.main import app
from tpuplane.infra.batch.kueue_config import PRIORITIES
from tpuplane.infra.fleet.pools import Capacity


def tpuplane(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})


def test_cli_version_prints_the_installed_version():
    result = tpuplane("--version")

    assert (result.exit_code, result.stdout) == (0, f"tpuplane {version('tpuplane')}\n")


def test_cli_shows_a_bash_completion_script_when_run_from_bash(monkeypatch):
    """The shell is the one typer detects in the process tree (which depends on how the tests were started)."""
    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash")
    result = tpuplane("--show-completion")

    assert result.exit_code == 0
    assert "_TPUPLANE_COMPLETE=complete_bash" in result.stdout


def test_cli_workload_help_lists_every_priority_and_capacity():
    out = tpuplane("workload", "render", "--help").stdout

    assert f"<{'|'.join(PRIORITIES)}>" in out
    assert f"<{'|'.join(c.value for c in Capacity)}>" in out


@pytest.mark.parametrize("command", [(), ("sidecar",), ("workload",), ("plan",), ("workload", "render")])
def test_cli_help_wraps_instead_of_cutting_at_80_columns(command):
    lines = tpuplane(*command, "--help").stdout.splitlines()
    text = [line for line in lines if not line.startswith("Usage:")]  # `[ARGS]...` means "repeatable"

    assert not [line for line in text if "..." in line or "…" in line]
    assert max(len(line) for line in lines) <= 80


def test_cli_workload_rejects_an_unknown_capacity_naming_the_choices():
    result = tpuplane("workload", "render", "--tpu-type", "v6e-16", "--image", "i", "--command", "c",
                      "--capacity", "cheap")

    assert result.exit_code == 2
    assert "'on-demand', 'spot', 'flex-start', 'queued', 'reservation'" in " ".join(result.stderr.split())
