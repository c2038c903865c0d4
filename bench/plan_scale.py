"""Offline plan time and peak memory against slice count, each beside a floor measured in the same run.

The floors are bare programs that register the same resources with the same inputs under the same mocks,
with nothing of tpuplane (no config, planning, validation, components or wiring):
- sdk floor: through the same provider SDK classes, what any Pulumi program of these resources pays;
- raw floor: as untyped CustomResources, Pulumi's minimum.
The ratio is what tpuplane adds. Target: at most 1.25x the sdk floor at 1024 slices, growth linear in slices
(ms/slice flat). Both runs are warmed (imports, caches) before their clocks start.

    .venv/bin/python bench/plan_scale.py [--sizes 1 64 512 1024] [--repeat 3]

Each measurement runs in its own process, so peak RSS belongs to that run alone. Each size is measured
`--repeat` times, the three runs of a round back to back in an order that rotates between rounds, so all
three see the same machine load; ratios are computed within a round and reported as median (min-max).
Both floors go through the same offline runner as the plan (tpuplane.components.offline), so they get the
same Pulumi tuning: the ratio is what tpuplane's program adds, not what the runner saves.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stack_config(slices: int) -> dict:
    return {
        "gcp:project": "acme-ml",
        "gcp:region": "us-east5",
        "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b"},
        "tpuplane:tpuPools": [{"name": "train", "tpuType": "v6e-16", "slices": slices, "capacity": "spot"}],
    }


def real_plan(slices: int):
    from tpuplane.components.offline import run_program_file

    return run_program_file(REPO / "stacks" / "__main__.py", stack_config(slices), project="tpuplane", stack="bench")


def measure_real(slices: int) -> dict:
    real_plan(1)  # imports and first-use caches, as the floor has them before its clock starts
    start = time.perf_counter()
    plan = real_plan(slices)
    return {"seconds": time.perf_counter() - start, "resources": len(plan.resources)}


def sdk_class(type_token: str):
    """The provider SDK class a type token names (`gcp:container/nodePool:NodePool` -> gcp.container.NodePool),
    or None for tokens with no typed class here (custom resources, components)."""
    import importlib

    package, module, kind = type_token.split(":")
    sdk = {"gcp": "pulumi_gcp", "kubernetes": "pulumi_kubernetes", "docker-build": "pulumi_docker_build"}.get(package)
    if sdk is None or module == "index" and package == "tpuplane":
        return None
    parts = module.split("/")
    if package == "kubernetes" and "." in parts[0] and not parts[0].endswith(".k8s.io"):
        return None  # a custom resource (Kueue, JobSet): CustomResource is its class
    path = [sdk] + ([parts[0]] if package == "gcp" else [p.split(".")[0] for p in parts if p != "index"])
    try:
        return getattr(importlib.import_module(".".join(path)), kind)
    except (ImportError, AttributeError):
        return None


def write_replay(slices: int, path: str) -> None:
    """The custom resources of the real plan, for a floor child to register: computed in a process of its own
    so that the floor's peak memory holds no trace of tpuplane's plan."""
    plan = real_plan(slices)
    replay = [{"type": r.type, "name": r.name, "inputs": r.inputs} for r in plan.resources
              if r.custom and not r.type.startswith("pulumi:providers:")]
    Path(path).write_text(json.dumps(replay))


def measure_floor(path: str, kind: str) -> dict:
    """Register the same resources with the same inputs as a bare program: no config, no planning, no
    components, no wiring between resources. The replay is loaded before the clock starts.

    kind "sdk": through the same provider SDK classes (what any Pulumi program of these resources pays);
    kind "raw": as untyped `pulumi.CustomResource`s, Pulumi's minimum (no typed output properties).
    """
    import re

    import pulumi

    from tpuplane.components.offline import run_under_mocks

    def snake(key: str) -> str:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()

    replay = []
    for r in json.loads(Path(path).read_text()):
        cls = sdk_class(r["type"]) if kind == "sdk" else None
        if cls is None:
            replay.append((pulumi.CustomResource, (r["type"], r["name"], dict(r["inputs"])), {}))
        else:
            replay.append((cls, (r["name"],), {snake(k): v for k, v in r["inputs"].items()}))

    def bare() -> None:
        for cls, args, kwargs in replay:
            cls(*args, **kwargs)

    run_under_mocks(lambda: None, {}, project="tpuplane", stack="warm-up")
    start = time.perf_counter()
    plan = run_under_mocks(bare, {}, project="tpuplane", stack="floor")
    return {"seconds": time.perf_counter() - start, "resources": len(plan.resources)}


def child(kind: str, arg: str) -> None:
    if kind == "replay":
        slices, path = arg.split(":", 1)
        write_replay(int(slices), path)
        return
    result = measure_real(int(arg)) if kind == "real" else measure_floor(arg, kind)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def run_child(kind: str, arg: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, arg], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 512, 1024])
    parser.add_argument("--repeat", type=int, default=3, help="rounds per size")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "ARG"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1])
        return

    print(f"medians (min-max) of {args.repeat} rounds; x = ratio within a round")
    print(f"{'slices':>7} {'resources':>9} {'plan s':>7} {'sdk floor':>9} {'x sdk':>17} {'x raw':>17} "
          f"{'plan MB':>7} {'x sdk MB':>17} {'ms/slice':>8}")
    for n in args.sizes:
        rounds = []
        with tempfile.TemporaryDirectory() as tmp:
            replay = f"{tmp}/replay.json"
            run_child("replay", f"{n}:{replay}")
            jobs = [("real", str(n)), ("sdk", replay), ("raw", replay)]
            for i in range(args.repeat):
                order = jobs[i % 3:] + jobs[:i % 3]
                rounds.append({kind: run_child(kind, arg) for kind, arg in order})
        real, sdk, raw = ([r[k] for r in rounds] for k in ("real", "sdk", "raw"))
        seconds = [r["seconds"] for r in real]
        print(f"{n:>7} {real[0]['resources']:>9} {statistics.median(seconds):>7.2f} "
              f"{statistics.median(s['seconds'] for s in sdk):>9.2f} "
              f"{spread([r['seconds'] / s['seconds'] for r, s in zip(real, sdk)]):>17} "
              f"{spread([r['seconds'] / w['seconds'] for r, w in zip(real, raw)]):>17} "
              f"{statistics.median(r['peak_rss_mb'] for r in real):>7.0f} "
              f"{spread([r['peak_rss_mb'] / s['peak_rss_mb'] for r, s in zip(real, sdk)]):>17} "
              f"{1000 * statistics.median(seconds) / n:>8.2f}")


if __name__ == "__main__":
    main()
