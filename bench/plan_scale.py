"""Offline plan time and peak memory against slice count, each beside a floor measured in the same run.

The floors are bare programs that register the same resources with the same inputs under the same mocks,
with nothing of tpuplane (no config, planning, validation, components or wiring):
- sdk floor: through the same provider SDK classes, what any Pulumi program of these resources pays;
- raw floor: as untyped CustomResources, Pulumi's minimum.
The ratio is what tpuplane adds. Target: at most 1.25x the sdk floor at 1024 slices, growth linear in slices
(ms/slice flat). Both runs are warmed (imports, caches) before their clocks start.

    .venv/bin/python bench/plan_scale.py [--sizes 1 64 512 1024]

Each measurement runs in its own process, so peak RSS belongs to that run alone.
"""

from __future__ import annotations

import argparse
import json
import resource
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 512, 1024])
    parser.add_argument("--child", nargs=2, metavar=("KIND", "ARG"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1])
        return

    print(f"{'slices':>7} {'resources':>9} {'plan s':>7} {'sdk floor':>9} {'x':>5} {'raw floor':>9} {'x':>5} "
          f"{'plan MB':>7} {'sdk MB':>6} {'x':>5} {'ms/slice':>8}")
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            replay = f"{tmp}/replay.json"
            run_child("replay", f"{n}:{replay}")
            real, sdk, raw = run_child("real", str(n)), run_child("sdk", replay), run_child("raw", replay)
        print(f"{n:>7} {real['resources']:>9} {real['seconds']:>7.2f} {sdk['seconds']:>9.2f} "
              f"{real['seconds'] / sdk['seconds']:>5.2f} {raw['seconds']:>9.2f} {real['seconds'] / raw['seconds']:>5.2f} "
              f"{real['peak_rss_mb']:>7.0f} {sdk['peak_rss_mb']:>6.0f} {real['peak_rss_mb'] / sdk['peak_rss_mb']:>5.2f} "
              f"{1000 * real['seconds'] / n:>8.2f}")


if __name__ == "__main__":
    main()
