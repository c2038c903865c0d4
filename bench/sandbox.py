"""`tpuplane sandbox up` against the least control plane there is, and the e2e tier, and the cold toolchain build.

The baseline is what envtest starts for a controller's tests: etcd and kube-apiserver until /readyz answers, with
the sandbox's own binaries and flags. `sandbox up --stack dev` adds kube-controller-manager, kube-scheduler,
JobSet and Kueue (with their charts' CRDs and webhooks), kwok and the dev stack's nodes, and the dev stack's
Kubernetes half applied by the real Pulumi engine. Each sample is a pair (sandbox up, baseline) run one after the
other, their order alternating, so both see the same machine load; the ratio of each pair is reported (median and
min-max), beside the median seconds.

    .venv/bin/python bench/sandbox.py [--repeat 3] [--e2e] [--cold]

--e2e also times the whole e2e tier (`make e2e`, warm toolchain). --cold builds the toolchain from
nothing into fresh folders (toolchain cache, Go build cache, Go module cache: every module downloaded again from the
proxy): about 30 minutes on 2 cores; the folders are removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TPUPLANE = str(Path(sys.executable).with_name("tpuplane"))
TARGETS = {"up": 30.0, "e2e": 8 * 60.0, "cold": 45 * 60.0}  # seconds (issue 18)


def sandbox_up() -> float:
    """Seconds of `tpuplane sandbox up --stack dev`, as a user runs it; brought down afterwards (not timed)."""
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as scratch:
        folder = Path(scratch) / "sandbox"
        started = time.perf_counter()
        subprocess.run([TPUPLANE, "sandbox", "up", "--stack", "dev", "--dir", str(folder)], cwd=REPO, check=True,
                       capture_output=True)
        seconds = time.perf_counter() - started
        subprocess.run([TPUPLANE, "sandbox", "down", "--dir", str(folder)], check=True, capture_output=True)
    return seconds


def bare_control_plane() -> float:
    """Seconds until etcd and kube-apiserver answer /readyz: envtest's control plane."""
    from tpuplane.sandbox import control_plane
    from tpuplane.sandbox.layout import Paths
    from tpuplane.sandbox.lifecycle import _ports
    from tpuplane.sandbox.processes import Launcher, stop

    with tempfile.TemporaryDirectory(prefix="bench-bare-") as scratch:
        paths = Paths(Path(scratch))
        for folder in (paths.pki, paths.logs):
            folder.mkdir(parents=True)
        started_processes = []
        launcher = Launcher(marker=scratch, logs=paths.logs, record=started_processes.append)
        started = time.perf_counter()
        ports = _ports(None)
        files = control_plane.ControlPlaneFiles(paths, ports)
        try:
            control_plane.start_etcd(paths, ports, launcher)
            control_plane.start_apiserver(paths, ports, files, launcher)
            return time.perf_counter() - started
        finally:
            for process in reversed(started_processes):
                stop(process)


def pairs(repeat: int) -> list[tuple[float, float]]:
    samples = []
    for i in range(repeat):
        if i % 2 == 0:
            up, bare = sandbox_up(), bare_control_plane()
        else:
            bare, up = bare_control_plane(), sandbox_up()
        samples.append((up, bare))
    return samples


def e2e_tier() -> float:
    """Seconds of `make e2e` (the toolchain cached: its build step only checks), as CI runs it."""
    started = time.perf_counter()
    subprocess.run(["make", "e2e"], cwd=REPO, check=True)
    return time.perf_counter() - started


def cold_build() -> float:
    """The whole toolchain, from nothing: no binary, no build cache, no downloaded module."""
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as scratch:
        env = {**os.environ, "TPUPLANE_CACHE": f"{scratch}/cache", "GOCACHE": f"{scratch}/gocache",
               "GOMODCACHE": f"{scratch}/gomod", "GOFLAGS": "-modcacherw"}
        started = time.perf_counter()
        subprocess.run([TPUPLANE, "sandbox", "build"], env=env, check=True)
        seconds = time.perf_counter() - started
        shutil.rmtree(scratch, ignore_errors=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--e2e", action="store_true", help="also time the whole e2e tier")
    parser.add_argument("--cold", action="store_true", help="also build the toolchain from nothing")
    options = parser.parse_args()

    samples = pairs(options.repeat)
    ratios = [up / bare for up, bare in samples]
    up = statistics.median(s[0] for s in samples)
    bare = statistics.median(s[1] for s in samples)
    print(f"{'work':<58} {'tpuplane':>9} {'baseline':>9} {'ratio':>20} {'target':>9}")
    print(f"{'sandbox up --stack dev vs etcd + kube-apiserver (envtest)':<58} {up:>8.1f}s {bare:>8.1f}s "
          f"{statistics.median(ratios):>6.1f}x ({min(ratios):.1f}-{max(ratios):.1f})"
          f" {'<= %.0fs' % TARGETS['up']:>9}")
    if options.e2e:
        print(f"{'the e2e tier, warm':<58} {e2e_tier():>8.0f}s {'':>9} {'':>20} {'<= %.0fs' % TARGETS['e2e']:>9}")
    if options.cold:
        print(f"{'toolchain build, cold':<58} {cold_build():>8.0f}s {'':>9} {'':>20} "
              f"{'<= %.0fs' % TARGETS['cold']:>9}")


if __name__ == "__main__":
    main()
