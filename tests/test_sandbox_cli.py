"""`tpuplane sandbox`: what it refuses before it starts anything, each with one line and exit status 2.

None of these needs a control plane: the refusals come first (tests/e2e covers a running sandbox).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import REPO, STACKS
from tpuplane.cli.main import app
from tpuplane.sandbox.layout import SandboxState

NO_POOLS = """config:
  gcp:project: acme-ml
  gcp:region: us-east5
  tpuplane:cluster:
    name: fleet-dev
    zone: us-east5-b
"""


def sandbox(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, ["sandbox", *args, "--project-dir", str(REPO)] if args[0] == "up"
                              else ["sandbox", *args], env=env)


def assert_refused(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    message = result.output.strip()
    assert message.startswith("error:") and message.count("\n") == 0 or "error:" in message.splitlines()[0]
    for word in words:
        assert word in result.output


@pytest.fixture
def empty_cache(tmp_path, monkeypatch) -> Path:
    """A toolchain cache with nothing built in it."""
    monkeypatch.setenv("TPUPLANE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_stack_without_tpu_pools_is_refused(tmp_path):
    config = tmp_path / "Pulumi.nopools.yaml"
    config.write_text(NO_POOLS)
    result = sandbox("up", "--config", str(config), "--dir", str(tmp_path / "sbx"))
    assert_refused(result, "no TPU pools", "tpuplane:tpuPools")
    assert not (tmp_path / "sbx").exists()


def test_a_missing_toolchain_says_how_to_build_it(tmp_path, empty_cache):
    result = sandbox("up", "--stack", "dev", "--dir", str(tmp_path / "sbx"))
    assert_refused(result, "not built", "tpuplane sandbox build")
    assert not (tmp_path / "sbx").exists()


def test_a_second_up_in_the_same_folder_is_refused(tmp_path):
    folder = tmp_path / "sbx"
    folder.mkdir()
    from tpuplane.sandbox.lifecycle import _ports
    SandboxState(directory=str(folder), project="tpuplane", stack="dev", config_file=str(STACKS / "Pulumi.dev.yaml"), project_dir=str(REPO),
                 kubeconfig=str(folder / "kubeconfig"), ports=_ports(None)).save()
    result = sandbox("up", "--stack", "dev", "--dir", str(folder))
    assert_refused(result, "already up", "tpuplane sandbox down")


def test_a_folder_holding_something_else_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = sandbox("up", "--stack", "dev", "--dir", str(tmp_path))
    assert_refused(result, "not empty")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_port_in_use_is_refused(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = sandbox("up", "--stack", "dev", "--dir", str(tmp_path / "sbx"), "--port", str(port))
    assert_refused(result, f"port {port}", "in use")


@pytest.mark.parametrize("port", ["0", "70000", "http"])
def test_a_port_out_of_range_is_refused(tmp_path, port):
    result = sandbox("up", "--stack", "dev", "--dir", str(tmp_path / "sbx"), "--port", port)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_an_unknown_stack_names_the_stacks_there_are(tmp_path):
    result = sandbox("up", "--stack", "nope", "--dir", str(tmp_path / "sbx"))
    assert_refused(result, "--stack", "dev")


def test_status_without_a_sandbox_says_how_to_start_one(tmp_path):
    assert_refused(sandbox("status", "--dir", str(tmp_path)), "no sandbox", "sandbox up")


def test_status_refuses_an_unknown_format_as_every_command_does(tmp_path):
    result = sandbox("status", "--dir", str(tmp_path), "--format", "xml")

    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "'--format'" in result.output and "'xml' is not one of 'table', 'json'" in result.output


def test_a_state_file_that_is_not_one_is_named_by_status_and_up(tmp_path):
    (tmp_path / "state.json").write_text('{"directory": 1, "<b>": "\\n"}')
    assert_refused(sandbox("status", "--dir", str(tmp_path)), "state.json is not a sandbox's state")
    assert_refused(sandbox("up", "--stack", "dev", "--dir", str(tmp_path)), "state.json is not a sandbox's state")


def test_down_removes_a_folder_whose_state_file_is_not_one(tmp_path):
    folder = tmp_path / "sbx"
    folder.mkdir()
    (folder / "state.json").write_text("not json")
    result = sandbox("down", "--dir", str(folder))
    assert result.exit_code == 0, result.output
    assert not folder.exists()


def test_down_without_a_sandbox_is_a_no_op(tmp_path):
    result = sandbox("down", "--dir", str(tmp_path / "none"))
    assert result.exit_code == 0
    assert "no sandbox" in result.output
