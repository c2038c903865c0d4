"""The worker process of `LocalSidecar`: runs cloudpickled calls the way a colocated-Python sidecar does.

Started by the client as `python -m tpuplane.runtime.sidecar_worker --connect 127.0.0.1:PORT` with the
client's secret in the environment. It dials back to the client (which listens), says `hello`, then serves one
request at a time until `shutdown` or until the client goes away. Every failure inside a call (unpickling the
request, running the function, pickling the result) is sent back with its traceback; only the process dying
ends a call without a reply.

`--report-versions` and `--fault` exist only so the client's tests can play a skewed image or a broken worker
with a real process; a real sidecar never uses them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import traceback
from typing import Any

from tpuplane.runtime import sidecar_protocol as protocol

# Test-only misbehaviours: never dial back; answer with the next request's id; answer with an id never sent.
FAULTS = ("never-connect", "wrong-reply-id", "stale-reply-id")
_REPLY_ID_OFFSETS = {"wrong-reply-id": 1, "stale-reply-id": -1}


def main(argv: list[str] | None = None) -> int:
    options = _parse_args(argv)
    token = os.environ.pop(protocol.TOKEN_ENV, "")  # user code running here has no business reading it
    if options.fault == "never-connect":
        while True:
            signal.pause()
    host, _, port = options.connect.rpartition(":")
    with socket.create_connection((host, int(port))) as sock:
        protocol.configure_socket(sock)
        versions = {**protocol.local_versions().to_json(), **options.report_versions}
        protocol.send_message(
            sock,
            {"type": protocol.HELLO, "protocol": protocol.PROTOCOL_VERSION, "token": token, "pid": os.getpid(),
             "versions": versions},
        )
        _serve(sock, reply_id_offset=_REPLY_ID_OFFSETS.get(options.fault, 0))
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tpuplane.runtime.sidecar_worker", description=__doc__)
    parser.add_argument("--connect", required=True, help="HOST:PORT where the client listens")
    parser.add_argument(
        "--report-versions", type=json.loads, default={},
        help='test only: JSON object overriding versions sent in hello, e.g. {"jax": "0.4.0"} (a skewed image)',
    )
    parser.add_argument("--fault", choices=FAULTS, help="test only: behave like a broken worker")
    return parser.parse_args(argv)


def _serve(sock: socket.socket, *, reply_id_offset: int) -> None:
    while True:
        try:
            request = protocol.recv_message(sock)
        except protocol.PeerClosed:
            return  # the client went away: nothing left to serve
        reply_id = request.header.get("id", 0) + reply_id_offset
        if request.type == protocol.SHUTDOWN:
            protocol.send_message(sock, {"type": protocol.BYE, "id": reply_id})
            return
        if request.type == protocol.CAPABILITY_PROBE:
            probe = _capabilities(with_jax=bool(request.header.get("jax")))
            protocol.send_message(sock, {"type": protocol.CAPABILITIES, "id": reply_id, **probe})
        elif request.type == protocol.CALL:
            header, frames = _run_call(request.frames)
            protocol.send_message(sock, {**header, "id": reply_id}, frames)
        else:
            error = protocol.ProtocolError(f"unknown request type {request.type!r}")
            protocol.send_message(sock, {**_error_header(error, "protocol"), "id": reply_id})


def _run_call(frames: list[bytearray]) -> tuple[dict[str, Any], list[Any]]:
    """Each phase that can fail names itself, so the client can tell a missing dependency from a bug."""
    try:
        fn, args, kwargs = protocol.load_payload(frames)
    except BaseException as exc:  # noqa: BLE001 - any failure to unpickle is the caller's to see
        return _error_header(exc, "load"), []
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt in user code too
        return _error_header(exc, "run"), []
    try:
        return {"type": protocol.RESULT}, protocol.dump_payload(result)
    except BaseException as exc:  # noqa: BLE001
        return _error_header(exc, "dump"), []


def _error_header(exc: BaseException, phase: str) -> dict[str, Any]:
    return {
        "type": protocol.ERROR,
        "phase": phase,
        "exc_type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc)),
    }


def _capabilities(*, with_jax: bool) -> dict[str, Any]:
    """What this process can use. jax is imported only when asked: importing it costs a second or more."""
    probe: dict[str, Any] = {
        "pid": os.getpid(),
        "python": sys.version.split()[0],
        "platform": sys.platform,
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_total_bytes": os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
        "memory_available_bytes": _memory_available(),
        "jax_devices": None,
        "jax_error": None,
    }
    if with_jax:
        try:
            import jax

            probe["jax_devices"] = [
                {"id": d.id, "platform": d.platform, "device_kind": d.device_kind, "process_index": d.process_index}
                for d in jax.devices()
            ]
        except Exception as exc:  # noqa: BLE001 - the probe reports why jax is unusable instead of failing
            probe["jax_error"] = f"{type(exc).__name__}: {exc}"
    return probe


def _memory_available() -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


if __name__ == "__main__":
    sys.exit(main())
