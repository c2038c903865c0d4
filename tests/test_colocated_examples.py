"""examples/colocated/: the colocated-Python sidecar guide's two examples, corrected, run as a user runs them.

create_file.py runs JAX's colocated Python on this machine's CPU devices; primes_plot.py runs in a LocalSidecar
worker whose venv is built from PyPI with the example's requirements (matplotlib, which the client never imports);
the venv is cached under ~/.cache/tpuplane once built.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "colocated"


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True,
                          timeout=900)


def test_create_file_example_writes_a_file_on_every_host(tmp_path):
    result = run_example("create_file.py", "--directory", str(tmp_path))
    assert result.returncode == 0, result.stderr
    written = tmp_path / "written_on_host_0.txt"
    assert f"wrote {written}" in result.stdout
    assert written.read_text().startswith("This is written on host 0 of 1 (")


def test_primes_plot_example_saves_a_png_with_a_dependency_only_the_sidecar_has(tmp_path):
    result = run_example("primes_plot.py", "--directory", str(tmp_path))
    assert result.returncode == 0, result.stderr
    plot = tmp_path / "simple_line_plot_worker_0.png"
    assert f"the sidecar saved {plot}" in result.stdout
    assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
