"""`tpuplane sidecar run`: the target's package is imported from the current directory, as `python -m` does."""

import subprocess
import sys
from pathlib import Path

import pytest

TPUPLANE = Path(sys.executable).with_name("tpuplane")


def test_sidecar_run_imports_the_target_package_from_the_current_directory(tmp_path):
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "data.py").write_text("def make_batch(n):\n    return list(range(int(n)))\n")

    run = subprocess.run([str(TPUPLANE), "sidecar", "run", "mypkg.data:make_batch", "3"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)

    assert (run.returncode, run.stdout) == (0, "[0, 1, 2]\n"), run.stderr


def test_sidecar_run_target_missing_from_the_current_directory_is_bad_input(tmp_path):
    run = subprocess.run([str(TPUPLANE), "sidecar", "run", "mypkg.data:make_batch"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)

    assert run.returncode == 2
    assert "No module named 'mypkg'" in run.stderr and "Traceback" not in run.stderr


def sidecar_run(folder: Path, target: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TPUPLANE), "sidecar", "run", target], cwd=folder, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("source, target, says", [
    ("def f(:\n", "broken:f", "broken does not compile: invalid syntax"),
    ("raise RuntimeError('boom')\n", "broken:f", "importing broken raised RuntimeError: boom"),
    ("import sys\nsys.exit(0)\ndef f():\n    return 1\n", "broken:f",
     "broken exited while being imported (sys.exit(0))"),
    ("import os\nos._exit(0)\ndef f():\n    return 1\n", "broken:f",
     "broken exited while being imported (os._exit(0))"),
    ("raise KeyboardInterrupt\n", "broken:f", "importing broken raised KeyboardInterrupt"),
    ("def f():\n    return 1\n", "./broken.py:f", "target must be 'package.module:function'"),
    ("def f():\n    return 1\n", ".broken:f", "no relative import"),
    ("def f():\n    return 1\n", "broken:g", "broken has no 'g'"),
])
def test_sidecar_run_target_that_cannot_be_imported_exits_2_with_one_line(tmp_path, source, target, says):
    """A module exiting at import (`sys.exit(0)`) must not make the command exit 0 with no output."""
    (tmp_path / "broken.py").write_text(source)

    run = sidecar_run(tmp_path, target)

    assert (run.returncode, run.stdout) == (2, "")
    assert says in run.stderr and "Traceback" not in run.stderr and len(run.stderr.splitlines()) == 1
