"""Specification of `tpuplane sidecar check`: exit 0 with "ok", 1 with one line per conflict, 2 on bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tpuplane.cli import sidecar

SIDECAR_DIR = Path(__file__).resolve().parent.parent / "sidecar"


@pytest.fixture
def tpuplane() -> typer.Typer:
    """The sidecar app registered under a parent, as `tpuplane sidecar` is."""
    root = typer.Typer()
    root.add_typer(sidecar.app, name="sidecar")
    return root


@pytest.fixture
def run(tpuplane):
    def _run(*args: str):
        return CliRunner().invoke(tpuplane, ["sidecar", "check", *args])

    return _run


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    """A working directory laid out like the repository, so the defaults resolve."""
    shutil.copytree(SIDECAR_DIR, tmp_path / "sidecar")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_cli_check_defaults_pass_on_the_shipped_example(run, project):
    result = run()
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: 5 requirements fit the 11 pins in sidecar/constraints.example.txt")
    assert len(result.stdout.splitlines()) == 1


def test_cli_check_prints_one_line_per_conflict_and_exits_1(run, project):
    (project / "sidecar" / "requirements.txt").write_text("numpy<2\nscipy~=1.14.0\ncloudpickle\n")
    result = run()
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("numpy: sidecar/requirements.txt:1: 'numpy<2' conflicts")
    assert "numpy==2.1.1 (sidecar/constraints.example.txt:" in lines[0]
    assert lines[1].startswith("scipy: sidecar/requirements.txt:2: 'scipy~=1.14.0' conflicts")


def test_cli_check_client_jax_lock_step(run, project, tmp_path):
    constraints = tmp_path / "pins.txt"
    constraints.write_text("jax==0.6.2\njaxlib==0.6.2\nnumpy==2.1.1\n")
    assert run("--constraints", str(constraints), "--jax-version", "0.6.2").exit_code == 0
    result = run("--constraints", str(constraints), "--jax-version", "0.10.0")
    assert result.exit_code == 1
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["jax", "jaxlib"]


def test_cli_check_jax_version_sets_the_python_for_markers(run, project):
    (project / "sidecar" / "requirements.txt").write_text('numpy<2 ; python_version < "3.11"\n')
    assert run("--jax-version", "0.10.0").exit_code == 0  # python 3.12 image: marker does not apply
    assert run("--jax-version", "0.6.2").exit_code == 1  # python 3.10 image: it does


def test_cli_check_notes_lines_it_cannot_check_on_stderr(run, project):
    (project / "sidecar" / "requirements.txt").write_text("git+https://example.invalid/x.git#egg=x\nnumpy\n")
    result = run()
    assert result.exit_code == 0
    assert "not checked" in result.stderr
    assert result.stdout.startswith("ok: 1 requirements")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--requirements", "absent.txt"), "absent.txt"),
        (("--constraints", "absent.txt"), "absent.txt"),
        (("--jax-version", "0.10.2"), "--jax-version: got '0.10.2'; allowed: one of 0.6.2, 0.10.0"),
    ],
)
def test_cli_check_bad_input_exits_2_with_a_message(run, project, args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_cli_check_malformed_requirement_exits_2_naming_the_line(run, project):
    (project / "sidecar" / "requirements.txt").write_text("numpy\nscipy>>1\n")
    result = run()
    assert result.exit_code == 2
    assert "sidecar/requirements.txt:2" in result.stderr


def test_cli_check_without_any_constraints_file_asks_for_one(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "requirements.txt").write_text("numpy\n")
    result = run("--requirements", "requirements.txt")
    assert result.exit_code == 2
    assert "pass --constraints FILE" in result.stderr
