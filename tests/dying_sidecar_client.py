"""A client that dies in the middle of a LocalSidecar call, for test_local_sidecar.py: run as a script with this
folder on PYTHONPATH. Its call starts helpers that try to outlive everything (one in a session of its own, one
double-forked daemon), writes the session marker and every pid to `--ready` as JSON, then sleeps until the test
kills this process. `--fault` runs the worker with one of its two ways to notice the client's death switched off
(tests/faulty_sidecar_worker.py), so that each is tested on its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

from tpuplane.runtime.local_sidecar import LocalSidecar


def start_helpers_then_sleep(ready: str, session: str) -> None:
    own_session = subprocess.Popen(["sleep", "600"], start_new_session=True).pid
    daemon = int(subprocess.run(["sh", "-c", "setsid sleep 600 >/dev/null 2>&1 & echo $!"], capture_output=True,
                                text=True, check=True).stdout)
    state = {"session": session, "worker": os.getpid(), "helpers": [own_session, daemon]}
    with open(ready + ".tmp", "w") as handle:
        json.dump(state, handle)
    os.replace(ready + ".tmp", ready)
    time.sleep(600)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ready", required=True)
    parser.add_argument("--fault", default="none")
    parser.add_argument("--outside-with", action="store_true", help="start() and never close(), as in a notebook")
    options = parser.parse_args()
    sidecar = LocalSidecar(worker_command=("-m", "faulty_sidecar_worker", "--fault", options.fault))
    if options.outside_with:
        sidecar.start().call(start_helpers_then_sleep, options.ready, sidecar.session)
    with sidecar:
        sidecar.call(start_helpers_then_sleep, options.ready, sidecar.session)


if __name__ == "__main__":
    main()
