"""A misbehaving sidecar worker, for the client's tests only: the real worker module, patched to play a broken or
skewed sidecar image. Run as `python -m faulty_sidecar_worker --fault F [--report-versions JSON] --connect ...`
with this folder on PYTHONPATH (see `faulty` in test_local_sidecar.py); nothing of it ships.
"""

from __future__ import annotations

import argparse
import json
import signal
import struct
import sys

from tpuplane.runtime import sidecar_protocol as protocol
from tpuplane.runtime import sidecar_wire as wire
from tpuplane.runtime import sidecar_worker

# never dial back; answer with the next request's id; answer with an id never sent; say hello in the previous wire
# format (a JSON header behind its big-endian length); die with the client by one mechanism only (each is tested on
# its own); claim other versions
FAULTS = ("never-connect", "wrong-reply-id", "stale-reply-id", "foreign-hello", "no-parent-death-signal",
          "no-watchdog", "none")
_REPLY_ID_OFFSETS = {"wrong-reply-id": 1, "stale-reply-id": -1}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", choices=FAULTS, default="none")
    parser.add_argument("--report-versions", type=json.loads, default={})
    options, rest = parser.parse_known_args()
    if options.fault == "never-connect":
        while True:
            signal.pause()
    if options.report_versions:
        real = protocol.local_versions()
        skewed = protocol.RuntimeVersions.from_json({**real.to_json(), **options.report_versions})
        sidecar_worker.protocol.local_versions = lambda: skewed
    if options.fault == "foreign-hello":
        def send_foreign_hello(sock, type_, request_id=0, meta=None, frames=(), wait=None):
            header = json.dumps({**(meta or {}), "type": type_, "id": request_id, "frames": 0}).encode()
            sock.sendall(struct.pack(">Q", len(header)) + header)

        sidecar_worker.wire.send = send_foreign_hello
    if options.fault == "no-parent-death-signal":
        sidecar_worker._die_with_parent = lambda client_pid: None
    if options.fault == "no-watchdog":
        sidecar_worker._watch_connection = lambda sock: None
    offset = _REPLY_ID_OFFSETS.get(options.fault, 0)
    if offset:
        send = wire.send

        def send_with_wrong_id(sock, type_, request_id=0, meta=None, frames=(), wait=None):
            if type_ != protocol.HELLO:
                request_id += offset
            send(sock, type_, request_id, meta, frames, wait)

        sidecar_worker.wire.send = send_with_wrong_id
    return sidecar_worker.main(rest)


if __name__ == "__main__":
    sys.exit(main())
