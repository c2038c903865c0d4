"""Review commands on hostile sizes, each beside a floor measured in the same run, and grown to see it is linear.

- `tpuplane diff` of two plan files of about 12 MB together (thousands of node pools, every one changed; each
  label a property change) -> a PR comment. Floor: reading the two files with `json.loads` and comparing them
  (`==`), the least any diff pays. Target: under 3 s for the whole command, here.
- `tpuplane experiment render` of a 1,000-trial grid -> 1,000 JobSets. Floor: printing the same JobSets as YAML
  with the same emitter (read from JSON), the least any renderer of them pays.
- `tpuplane plan` of a pool group of single-host slices (one node pool each) -> a plan. Floor: the same plan of one
  slice, measured in the same run (the program's fixed cost); each size shows its time as a multiple of the floor,
  and the time and memory each slice adds above it (flat when the plan grows linearly).

Each measurement is its own process (`time` and peak RSS of the child); sizes double so time per unit shows any
superlinear growth. Median of `--repeat` runs.

    .venv/bin/python bench/hostile_sizes.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
# The command line, reporting its own CPU seconds and peak RSS (KiB) on stderr as it exits: CPU time is what a
# machine shared with other work does not inflate as much as it does the wall clock.
_REPORTS_USAGE = ("import atexit, resource, sys; u = lambda: resource.getrusage(resource.RUSAGE_SELF); "
                  "atexit.register(lambda: sys.stderr.write(f'\\nusage {u().ru_utime + u().ru_stime} "
                  "{u().ru_maxrss}\\n')); ")
TPUPLANE = [sys.executable, "-c", _REPORTS_USAGE + "from tpuplane.cli.main import app; app(prog_name='tpuplane')"]


def plan_pair(pools: int, folder: Path) -> tuple[Path, Path, int]:
    """A dev-stack plan grown by `pools` node pools of 20 labels each, and the same with every label changed and
    every third pool's machine type too (a replacement). Returns the two files and their size together."""
    base_plan = json.loads(subprocess.run([*TPUPLANE, "plan", "--project-dir", str(REPO), "--format", "json"],
                                          capture_output=True, text=True, check=True).stdout)
    template = next(r for r in base_plan["resources"] if r["type"] == "gcp:container/nodePool:NodePool")
    base, head = copy.deepcopy(base_plan), copy.deepcopy(base_plan)
    for i in range(pools):
        pool = copy.deepcopy(template)
        pool["urn"] += f"-{i}"
        pool["name"] = pool["inputs"]["name"] = f"{pool['name']}-{i}"
        pool["inputs"]["nodeConfig"]["labels"] = {f"label-{j}": f"value-{j}-{i}" for j in range(20)}
        changed = copy.deepcopy(pool)
        changed["inputs"]["nodeConfig"]["labels"] = {f"label-{j}": f"changed-{j}-{i}" for j in range(20)}
        if i % 3 == 0:
            changed["inputs"]["nodeConfig"]["machineType"] = "ct6e-standard-8t"
        base["resources"].append(pool)
        head["resources"].append(changed)
    paths = folder / f"base-{pools}.json", folder / f"head-{pools}.json"
    for path, doc in zip(paths, (base, head)):
        path.write_text(json.dumps(doc))
    return *paths, sum(p.stat().st_size for p in paths)


def timed(argv: list[str], stdout: Path | None = None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MiB) of one child process; the last two when it reports them."""
    start = time.perf_counter()
    with open(stdout or "/dev/null", "w") as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True, cwd=REPO, check=False)
    seconds = time.perf_counter() - start
    reported = [line.split()[1:] for line in proc.stderr.splitlines() if line.startswith("usage ")]
    cpu, rss = (float(reported[-1][0]), int(reported[-1][1]) / 1024) if reported else (float("nan"), float("nan"))
    return seconds, cpu, rss


def against_floor(argv: list[str], floor: list[str], repeat: int, out: Path | None = None
                  ) -> tuple[float, float, float]:
    """Median wall seconds of the command and of its floor, each pair run back to back so both see the same load,
    and the command's median CPU seconds."""
    runs = [(timed(argv, out), timed(floor)) for _ in range(repeat)]
    return (statistics.median(run[0] for run, _ in runs), statistics.median(floor[0] for _, floor in runs),
            statistics.median(run[1] for run, _ in runs))


FLOOR_DIFF = ("import json, sys; a, b = (json.loads(open(p).read()) for p in sys.argv[1:3]); "
              "print(a == b)")


def bench_diff(folder: Path, repeat: int) -> None:
    print("tpuplane diff -f markdown of two plan files, against json.loads + == of the same files")
    print(f"{'pools':>6} {'MB':>6} {'diff s':>8} {'CPU s':>6} {'floor s':>8} {'ratio':>6} {'ms/pool':>8} "
          f"{'comment chars':>14}")
    for pools in (1000, 2000, 3500):
        base, head, size = plan_pair(pools, folder)
        out = folder / "comment.md"
        diff_s, floor_s, cpu = against_floor([*TPUPLANE, "diff", str(base), str(head)],
                                             [sys.executable, "-c", FLOOR_DIFF, str(base), str(head)], repeat, out)
        print(f"{pools:>6} {size / 1e6:>6.1f} {diff_s:>8.2f} {cpu:>6.2f} {floor_s:>8.2f} {diff_s / floor_s:>6.1f} "
              f"{diff_s / pools * 1000:>8.2f} {len(out.read_text()):>14,}")


def bench_experiment(folder: Path, repeat: int) -> None:
    print("\ntpuplane experiment render of a grid, against printing its JobSets with the same YAML emitter")
    print(f"{'trials':>6} {'render s':>9} {'CPU s':>6} {'floor s':>8} {'ratio':>6} {'ms/trial':>9}")
    for values in (10, 100, 1000):
        spec = folder / f"grid-{values}.yaml"
        spec.write_text(f"name: sweep\ngrid:\n  lr: [{', '.join(str(i) for i in range(values))}]\n"
                        "jobs:\n- tpuType: v6e-16\n  image: img:1\n  command: python train.py\n")
        printed, as_json = folder / f"grid-{values}.out.yaml", folder / f"grid-{values}.json"
        render = [*TPUPLANE, "experiment", "render", str(spec)]
        timed(render, printed)  # once, for the floor's input: the JobSets it prints
        as_json.write_text(json.dumps(list(yaml.load_all(printed.read_text(), Loader=yaml.CSafeLoader))))
        floor = ("import json, sys, yaml; docs = json.load(open(sys.argv[1])); sys.stdout.write(yaml.dump_all(docs, "
                 "Dumper=yaml.CSafeDumper, sort_keys=True, default_flow_style=False, width=2**31 - 1))")
        render_s, floor_s, cpu = against_floor(render, [sys.executable, "-c", floor, str(as_json)], repeat, printed)
        print(f"{values:>6} {render_s:>9.2f} {cpu:>6.2f} {floor_s:>8.2f} {render_s / floor_s:>6.1f} "
              f"{render_s / values * 1000:>9.2f}")


def bench_single_host_slices(folder: Path, repeat: int) -> None:
    print("\ntpuplane plan -f json of single-host v6e-1 slices, against the plan of one slice (the floor)")
    print(f"{'slices':>7} {'plan s':>7} {'CPU s':>6} {'MiB':>6} {'x floor':>8} {'ms/slice':>9} {'KiB/slice':>10}")
    floor = None
    for slices in (1, 1000, 4000, 14990):
        config = folder / f"Pulumi.s{slices}.yaml"
        config.write_text("config:\n  gcp:project: acme-ml\n  gcp:region: us-east5\n"
                          "  tpuplane:cluster: {name: fleet, zone: us-east5-b}\n"
                          f"  tpuplane:tpuPools: [{{name: one, tpuType: v6e-1, slices: {slices}, "
                          "capacity: spot}]\n")
        runs = [timed([*TPUPLANE, "plan", "--project-dir", str(REPO), "--config", str(config), "--format", "json"])
                for _ in range(repeat)]
        seconds, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        mib = max(r[2] for r in runs)
        floor = floor or (seconds, mib)
        added = max(slices - 1, 1)  # the slices above the floor's one
        print(f"{slices:>7} {seconds:>7.2f} {cpu:>6.2f} {mib:>6.0f} {seconds / floor[0]:>8.1f} "
              f"{(seconds - floor[0]) / added * 1000:>9.2f} {(mib - floor[1]) * 1024 / added:>10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=("diff", "experiment", "slices"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, bench in (("diff", bench_diff), ("experiment", bench_experiment),
                            ("slices", bench_single_host_slices)):
            if args.only in (None, name):
                bench(folder, args.repeat)


if __name__ == "__main__":
    main()
