"""`tpuplane plan` against a bare Pulumi program of as many node pools, side by side, alternating, repeated.

The bare program is what any Pulumi user pays for the same registrations: it imports pulumi and pulumi_gcp,
sets Pulumi's stock mocks (`pulumi.runtime.set_mocks`, echoing inputs), registers N `gcp.container.NodePool`s
with the arguments tpuplane gives a v6e-16 spot slice, and waits for the engine as `pulumi up` does
(`run_pulumi_func`). None of tpuplane's tuning applies to it.

Each sample is a pair (plan, bare) run one after the other, their order alternating between pairs, so both
see the same machine load; the ratio of each pair is what is reported (median and min-max), beside the median
seconds. Rows:
- `plan --stack dev` vs a bare program of 32 pools, whole process (start, imports, plan, exit);
- a plan of 1,024 slices vs a bare program of 1,024 pools, whole process, and in process (both warmed by a run
  of one pool first, the clock around the second run only);
- peak memory (max RSS) of the whole-process 1,024 runs;
- for reference, in process against the bare program run with the same Pulumi tuning as the offline runner
  (tpuplane.components.pulumi_tuning): what tpuplane's program itself adds.

    .venv/bin/python bench/plan_speed.py [--repeat 5] [--slices 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TPUPLANE = str(Path(sys.executable).with_name("tpuplane"))
TARGETS = {"dev": 2.5, "whole": 1.3, "inproc": 1.3, "memory": 1.5}  # issue 13


def bench_config(slices: int) -> dict:
    """One v6e-16 spot pool group of `slices` slices: one node pool per slice, as in the bare program."""
    return {
        "gcp:project": "acme-ml",
        "gcp:region": "us-east5",
        "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b"},
        "tpuplane:tpuPools": [{"name": "train", "tpuType": "v6e-16", "slices": slices, "capacity": "spot"}],
    }


def bare_program(pools: int) -> None:
    """Register `pools` node pools shaped like tpuplane's v6e-16 spot slices, with nothing of tpuplane."""
    import pulumi
    import pulumi_gcp as gcp

    class Echo(pulumi.runtime.Mocks):
        def new_resource(self, args):
            return f"{args.name}-id", dict(args.inputs)

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(Echo(), project="bare", stack="bare", preview=False)
    for i in range(pools):
        gcp.container.NodePool(
            f"train-{i}", name=f"train-{i}", project="acme-ml", cluster="fleet", location="us-east5",
            node_locations=["us-east5-b"], node_count=4, max_pods_per_node=15,
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(strategy="SURGE", max_surge=0,
                                                                       max_unavailable=1),
            placement_policy=gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology="4x4"),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type="ct6e-standard-4t", spot=True, labels={"tpuplane.dev/capacity": "spot"},
                reservation_affinity=gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                    consume_reservation_type="NO_RESERVATION"),
                taints=[gcp.container.NodePoolNodeConfigTaintArgs(key="google.com/tpu", value="present",
                                                                  effect="NO_SCHEDULE")],
                host_maintenance_policy=gcp.container.NodePoolNodeConfigHostMaintenancePolicyArgs(
                    maintenance_interval="AS_NEEDED"),
                service_account="fleet-nodes@acme-ml.iam.gserviceaccount.com",
                oauth_scopes=["https://www.googleapis.com/auth/cloud-platform"],
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"),
                gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True)))


def run_bare(pools: int) -> None:
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    _sync_await(run_pulumi_func(lambda: bare_program(pools)))


def run_bare_tuned(pools: int) -> None:
    """The bare program with the offline runner's Pulumi tuning: what tpuplane adds beyond the tuning."""
    from tpuplane.components.pulumi_tuning import tuned_runtime

    with tuned_runtime():
        run_bare(pools)


def run_plan(slices: int) -> None:
    from tpuplane.components.offline import run_program_file

    run_program_file(REPO / "stacks" / "__main__.py", bench_config(slices), project="tpuplane", stack="bench")


def child(kind: str, size: int) -> None:
    """One process: `bare` runs whole; the `inproc-*` kinds warm up, then time one run."""
    if kind == "bare":
        run_bare(size)
        return
    run = {"inproc-bare": run_bare, "inproc-bare-tuned": run_bare_tuned, "inproc-plan": run_plan}[kind]
    run(1)  # warm-up: imports and first-use caches
    start = time.perf_counter()
    run(size)
    print(json.dumps({"seconds": time.perf_counter() - start}))


def measure(argv: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MiB, os.wait4 reports it per child) and stdout of one whole process."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True)
        out = proc.stdout.read()  # type: ignore[union-attr]
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status):
            err.seek(0)
            raise SystemExit(f"{' '.join(argv)} failed:\n{err.read().decode(errors='replace')[-3000:]}")
    return seconds, usage.ru_maxrss / 1024, out


def pairs(plan_argv: list[str], bare_argv: list[str], repeat: int, inproc: bool = False) -> list[tuple]:
    """`repeat` (plan, bare) samples, the order inside each pair alternating."""
    samples = []
    for i in range(repeat):
        order = [("plan", plan_argv), ("bare", bare_argv)]
        result = {}
        for kind, argv in (order if i % 2 == 0 else order[::-1]):
            seconds, rss, out = measure(argv)
            result[kind] = (json.loads(out)["seconds"] if inproc else seconds, rss)
        samples.append((result["plan"], result["bare"]))
    return samples


def row(label: str, samples: list[tuple], target: float | None, index: int = 0, unit: str = "s") -> str:
    plan = [p[index] for p, _ in samples]
    bare = [b[index] for _, b in samples]
    ratios = [p / b for p, b in zip(plan, bare)]
    med = statistics.median(ratios)
    return (f"{label:<50} {statistics.median(plan):>8.2f}{unit} {statistics.median(bare):>8.2f}{unit} "
            f"{med:>6.2f}x  ({min(ratios):.2f}-{max(ratios):.2f})  "
            + ("reference" if target is None else f"target <= {target}x {'ok' if med <= target else 'MISSED'}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="samples (pairs) per row")
    parser.add_argument("--slices", type=int, default=1024)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return

    me = [sys.executable, __file__, "--child"]
    n = args.slices
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "Pulumi.bench.yaml"
        config.write_text(json.dumps({"config": bench_config(n)}))  # JSON is YAML
        dev = pairs([TPUPLANE, "plan", "--stack", "dev", "--format", "json"], me + ["bare", "32"], args.repeat)
        whole = pairs([TPUPLANE, "plan", "--config", str(config), "--format", "json"], me + ["bare", str(n)],
                      args.repeat)
    inproc = pairs(me + ["inproc-plan", str(n)], me + ["inproc-bare", str(n)], args.repeat, inproc=True)
    same_tuning = pairs(me + ["inproc-plan", str(n)], me + ["inproc-bare-tuned", str(n)], args.repeat, inproc=True)

    print(f"{'':<50} {'tpuplane':>9} {'bare':>9} {'ratio':>7}  (min-max), {args.repeat} alternating pairs")
    print(row("plan --stack dev vs 32 pools, whole process", dev, TARGETS["dev"]))
    print(row(f"{n} slices vs {n} pools, whole process", whole, TARGETS["whole"]))
    print(row(f"{n} slices vs {n} pools, in process (warm)", inproc, TARGETS["inproc"]))
    print(row(f"{n} slices vs {n} pools, peak RSS", whole, TARGETS["memory"], index=1, unit="M"))
    print(row(f"{n} slices vs {n} pools, both tuned, in process", same_tuning, None))


if __name__ == "__main__":
    main()
