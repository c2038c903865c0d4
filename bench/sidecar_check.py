"""How long `tpuplane sidecar check` takes on a large requirements file, against parsing the same lines.

Writes a 300-line requirements file (ranges, ~=, !=, extras, markers, comments, a continuation, an include) and a
300-pin constraints file, then times `check_sidecar` beside a baseline measured in the same run: `packaging`'s
`Requirement` parse of the same requirement lines, which any checker must at least do. Prints both and the ratio.

Run: .venv/bin/python bench/sidecar_check.py
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from packaging.requirements import Requirement

from tpuplane.infra.pathways.sidecar_check import check_sidecar

LINES = 300
REPEATS = 20


def requirement_line(i: int) -> str:
    shapes = (
        f"pkg-{i}>={i % 7}.0,<{i % 7 + 5}",
        f"Pkg_{i}[extra]~={i % 7}.1",
        f"pkg.{i}!={i % 7}.2.0 ; python_version >= '3.10'",  # excludes its pin: a conflict
        f"pkg-{i}=={i % 7}.2.* ; sys_platform == 'linux' and platform_machine == 'x86_64'",
        f"pkg-{i} ; sys_platform == 'darwin'",
    )
    return shapes[i % len(shapes)]


def write_inputs(folder: Path) -> tuple[Path, Path, list[str]]:
    lines = [requirement_line(i) for i in range(LINES)]
    constraints = folder / "server_constraints.txt"
    constraints.write_text("jax==0.10.0\njaxlib==0.10.0\n" + "".join(f"pkg-{i}=={i % 7}.2.0\n" for i in range(LINES)))
    (folder / "included.txt").write_text("\n".join(lines[LINES // 2 :]) + "\n")
    body = ["# sidecar requirements", *lines[: LINES // 2 - 1], lines[LINES // 2 - 1] + " \\", "  # trailing", ""]
    requirements = folder / "requirements.txt"
    requirements.write_text("\n".join(body) + "\n-r included.txt\n")
    return requirements, constraints, lines


def timed(function, repeats: int = REPEATS) -> float:
    """Median wall time of `function` in seconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        requirements, constraints, lines = write_inputs(Path(folder))
        pin_lines = constraints.read_text().splitlines()
        result = check_sidecar(requirements, constraints, python_version="3.12", jax_version="0.10.0")
        baseline = timed(lambda: [Requirement(line) for line in (*lines, *pin_lines)])
        check = timed(lambda: check_sidecar(requirements, constraints, python_version="3.12", jax_version="0.10.0"))
    counts = f"{len(result.conflicts)} conflicts, {result.checked} checked, {result.not_for_image} not for the image"
    print(f"inputs: {LINES} requirement lines, {len(pin_lines)} pins; {counts}")
    print(f"baseline (packaging parse of the same lines): {baseline * 1000:8.2f} ms")
    print(f"check_sidecar (read files, parse, markers, compare): {check * 1000:8.2f} ms")
    print(f"ratio check / baseline: {check / baseline:.2f}x")


if __name__ == "__main__":
    main()
