"""Specification of `tpuplane sidecar check`: exit 0 with "ok", 1 with one line per conflict, 2 on bad input."""

from __future__ import annotations

import shutil
import sys
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
def install_jax(tmp_path_factory, monkeypatch):
    """Make `jax <version>` the installed distribution, as the client's environment would have it: a real
    dist-info record placed first on sys.path, found by importlib.metadata like any installed package."""

    def _install(version: str) -> None:
        site = tmp_path_factory.mktemp("site")
        dist_info = site / f"jax-{version}.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: jax\nVersion: {version}\n")
        monkeypatch.syspath_prepend(str(site))

    return _install


@pytest.fixture
def project(tmp_path: Path, monkeypatch, install_jax) -> Path:
    """A working directory laid out like the repository, so the defaults resolve, in a client with JAX 0.10.0."""
    shutil.copytree(SIDECAR_DIR, tmp_path / "sidecar")
    monkeypatch.chdir(tmp_path)
    install_jax("0.10.0")
    return tmp_path


def test_cli_check_defaults_pass_on_the_shipped_example(run, project):
    result = run()
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: 5 requirements fit the 11 pins in sidecar/constraints.example.txt")
    assert len(result.stdout.splitlines()) == 1


def test_cli_check_the_constraints_jax_pin_is_the_image_jax(run, project, install_jax):
    install_jax("0.6.2")  # the example constraints pin jax 0.10.0: that is the image being checked
    result = run()
    assert result.exit_code == 0, result.output
    assert "python 3.12" in result.stdout
    assert "the image runs jax 0.10.0 (pinned in sidecar/constraints.example.txt) but jax 0.6.2 is installed" \
        in result.stderr


def test_cli_check_passes_in_a_client_whose_jax_has_no_known_image(run, project, install_jax):
    install_jax("0.10.2")  # the project's own environment today
    result = run("--constraints", "sidecar/constraints.example.txt")
    assert result.exit_code == 0, result.output


def test_cli_check_pinned_jax_without_a_known_image_is_checked_with_a_notice(run, project, tmp_path):
    pins = tmp_path / "pins.txt"
    pins.write_text("jax==0.10.2\njaxlib==0.10.2\nnumpy==1.0\n")
    result = run("--constraints", str(pins))
    assert result.exit_code == 1
    assert result.stdout.startswith("numpy: sidecar/requirements.txt")
    assert "no known sidecar base image for JAX 0.10.2 (the jax pin of the constraints); checked for Python 3.12" \
        in result.stderr


def test_cli_check_base_tags_file_adds_an_image(run, project, tmp_path):
    pins, tags = tmp_path / "pins.txt", tmp_path / "tags.txt"
    pins.write_text("jax==0.10.2\njaxlib==0.10.2\nnumpy==2.1.1\n")
    tags.write_text("# ours\n20261101-python_3.13-jax_0.10.2\n")
    result = run("--constraints", str(pins), "--base-tags", str(tags))
    assert result.exit_code == 0, result.output
    assert "python 3.13" in result.stdout and "no known sidecar base image" not in result.stderr


def test_cli_check_flag_overrides_the_installed_jax(run, project, install_jax):
    install_jax("0.10.2")
    assert run("--jax-version", "0.10.0").exit_code == 0


def test_cli_check_without_jax_pin_or_install_uses_the_default_image_and_says_so(run, project, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(project)])  # an environment with no jax distribution at all
    (project / "pins.txt").write_text("numpy==2.1.1\n")
    result = run("--constraints", "pins.txt")
    assert "jax is not installed here; checking for the JAX 0.10.0 image" in result.stderr
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["jax", "jaxlib"]  # unpinned


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
    pins_062 = project / "pins-0.6.2.txt"
    pins_062.write_text("jax==0.6.2\njaxlib==0.6.2\nnumpy==2.1.1\n")
    assert run("--jax-version", "0.10.0").exit_code == 0  # python 3.12 image: marker does not apply
    result = run("--jax-version", "0.6.2", "--constraints", str(pins_062))  # python 3.10 image: it does
    assert result.exit_code == 1
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["numpy"]


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
        (("--jax-version", "latest"), "--jax-version: got 'latest'; allowed: a JAX release version"),
        (("--base-tags", "absent.txt"), "absent.txt"),
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


def test_cli_check_never_prints_url_credentials(run, project):
    (project / "sidecar" / "requirements.txt").write_text(
        "git+https://deploy:s3cr3t-token@git.example.invalid/x.git#egg=x\nnumpy\n")
    result = run()
    assert result.exit_code == 0
    assert "s3cr3t-token" not in result.output and "https://***@git.example.invalid" in result.stderr


def test_cli_check_expands_environment_variables_like_pip(run, project, monkeypatch):
    monkeypatch.setenv("NUMPY_CEILING", "2")
    (project / "sidecar" / "requirements.txt").write_text("numpy<${NUMPY_CEILING}\n")
    result = run()
    assert result.exit_code == 1
    assert result.stdout.startswith("numpy: sidecar/requirements.txt:1: 'numpy<${NUMPY_CEILING}' conflicts")


def test_cli_check_without_any_constraints_file_asks_for_one(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "requirements.txt").write_text("numpy\n")
    result = run("--requirements", "requirements.txt")
    assert result.exit_code == 2
    assert "pass --constraints FILE" in result.stderr


def test_sidecar_wheel_writes_the_runtime_wheel_and_prints_its_path(tpuplane, tmp_path):
    from tpuplane.runtime.sidecar_wheel import runtime_wheel_name

    result = CliRunner().invoke(tpuplane, ["sidecar", "wheel", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(tmp_path / "out" / runtime_wheel_name())
    assert (tmp_path / "out" / runtime_wheel_name()).is_file()
