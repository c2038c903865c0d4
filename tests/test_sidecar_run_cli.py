"""`tpuplane sidecar run`: the target's package is imported from the current directory, as `python -m` does."""

import subprocess
import sys
from pathlib import Path

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
