"""The worker process of `LocalSidecar`: runs cloudpickled calls the way a colocated-Python sidecar does.

Started by the client as `python -m tpuplane.runtime.sidecar_worker --connect 127.0.0.1:PORT` with the
client's secret in the environment. It dials back to the client (which listens), says `hello`, then serves one
request at a time until `shutdown` or until the client goes away. Every failure inside a call (unpickling the
request, running the function, pickling the result) is sent back with its traceback, bounded in size, whatever
the exception does in `__str__`; only the process dying ends a call without a reply. A function is unpickled once
and kept, as a real sidecar keeps it: the client sends the same pickle for every call of the same function.

Every process a called function starts dies with the worker, whatever it does to its session or process group:
the worker is a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`), so orphans of double forks and `setsid`
helpers become its children, and it kills and reaps all its descendants before it exits. Descendants also carry
the client's `TPUPLANE_SIDECAR_SESSION` marker in their environment, by which the client finds them when the
worker itself was killed before it could clean up.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pickle
import signal
import socket
import sys
import time
import traceback
from collections import OrderedDict
from typing import Any

from tpuplane.runtime import sidecar_protocol as protocol
from tpuplane.runtime import sidecar_wire as wire

_PR_SET_CHILD_SUBREAPER = 36
MAX_ERROR_MESSAGE_CHARS = 64 * 1024  # an exception's message in an error reply; the rest is cut with a marker
MAX_TRACEBACK_CHARS = 256 * 1024
# Unpickled functions kept for later calls, by the id the client gave each function object (least recently used
# first out).
MAX_CACHED_FUNCTIONS = 128


def main(argv: list[str] | None = None) -> int:
    options = _parse_args(argv)
    token = os.environ.pop(protocol.TOKEN_ENV, "")  # user code running here has no business reading it
    _become_subreaper()
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        host, _, port = options.connect.rpartition(":")
        with socket.create_connection((host, int(port))) as sock:
            protocol.configure_socket(sock)
            wire.send(sock, protocol.HELLO, meta={"protocol": protocol.PROTOCOL_VERSION, "token": token,
                                                  "pid": os.getpid(), "versions": protocol.local_versions().to_json()})
            _serve(sock)
    finally:
        kill_descendants()
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tpuplane.runtime.sidecar_worker", description=__doc__)
    parser.add_argument("--connect", required=True, help="HOST:PORT where the client listens")
    return parser.parse_args(argv)


def _exit_on_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through main's finally: descendants die first


def _become_subreaper() -> None:
    """Orphans of the processes a call starts are reparented here, not to init, so they can be found and killed."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _children(pid: int) -> list[int]:
    children: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return children
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                children += [int(c) for c in handle.read().split()]
        except OSError:
            continue
    return children


def _descendants(pid: int) -> list[int]:
    found, stack = [], _children(pid)
    while stack:
        child = stack.pop()
        found.append(child)
        stack += _children(child)
    return found


def kill_descendants(timeout: float = 5.0) -> None:
    """SIGKILL every descendant and reap the ones that are ours (as a subreaper, every orphan below is), until
    none is left: a dying process may have forked once more. Gives up after `timeout` (a process stuck in the
    kernel cannot be killed any faster)."""
    me, deadline = os.getpid(), time.monotonic() + timeout
    while True:
        _reap_exited()
        found = _descendants(me)
        if not found or time.monotonic() > deadline:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.005)


def _reap_exited() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _serve(sock: socket.socket) -> None:
    reader = wire.Reader(sock)
    while True:
        try:
            request = reader.receive()
        except protocol.PeerClosed:
            return  # the client went away: nothing left to serve
        if request.type == protocol.SHUTDOWN:
            wire.send(sock, protocol.BYE, request.id)
            return
        if request.type == protocol.CAPABILITY_PROBE:
            wire.send(sock, protocol.CAPABILITIES, request.id, _capabilities(with_jax=bool(request.meta.get("jax"))))
        elif request.type == protocol.CALL:
            reply_type, meta, frames = _run_call(request.frames)
            wire.send(sock, reply_type, request.id, meta, frames)
        else:
            error = protocol.ProtocolError(f"unknown request type {request.type!r}")
            wire.send(sock, protocol.ERROR, request.id, _error_meta(error, "protocol"))


def _run_call(frames: list[Any]) -> tuple[str, dict[str, Any] | None, list[Any]]:
    """Each phase that can fail names itself, so the client can tell a missing dependency from a bug."""
    try:
        if len(frames) < 3 or len(frames[0]) != wire.FUNCTION_ID.size:
            raise protocol.ProtocolError("a call carries a function id, the function and its arguments")
        fn = _load_function(wire.FUNCTION_ID.unpack(frames[0])[0], frames[1])
        args, kwargs = wire.load_payload(frames[2:])
    except BaseException as exc:  # noqa: BLE001 - any failure to unpickle is the caller's to see
        return protocol.ERROR, _error_meta(exc, "load"), []
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt in user code too
        return protocol.ERROR, _error_meta(exc, "run"), []
    try:
        return protocol.RESULT, None, wire.dump_payload(result)
    except BaseException as exc:  # noqa: BLE001
        return protocol.ERROR, _error_meta(exc, "dump"), []


_functions: OrderedDict[int, Any] = OrderedDict()


def _load_function(function_id: int, pickled: Any) -> Any:
    """The function the client knows by `function_id`, unpickled at its first call and kept (0: never kept)."""
    if not function_id:
        return pickle.loads(pickled)
    fn = _functions.get(function_id)
    if fn is None:
        fn = _functions[function_id] = pickle.loads(pickled)
        if len(_functions) > MAX_CACHED_FUNCTIONS:
            _functions.popitem(last=False)
    _functions.move_to_end(function_id)
    return fn


def _error_meta(exc: BaseException, phase: str) -> dict[str, Any]:
    """An error reply that always fits the wire's metadata limit, whatever the exception's message is or does."""
    return {
        "phase": phase,
        "exc_type": _bounded(f"{type(exc).__module__}.{type(exc).__qualname__}", 1024),
        "message": _bounded(_safe_str(exc), MAX_ERROR_MESSAGE_CHARS),
        "traceback": _bounded(_safe_traceback(exc), MAX_TRACEBACK_CHARS),
    }


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except BaseException as failure:  # noqa: BLE001 - a broken __str__ must not end the worker
        return f"<str() of the exception failed: {type(failure).__name__}>"


def _safe_traceback(exc: BaseException) -> str:
    try:
        return "".join(traceback.format_exception(exc))
    except BaseException as failure:  # noqa: BLE001
        return f"<the traceback could not be formatted: {type(failure).__name__}>"


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... [{len(text) - limit} more characters cut by the sidecar worker]"


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
