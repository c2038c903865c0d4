"""The worker process of `LocalSidecar`: runs cloudpickled calls the way a colocated-Python sidecar does.

Started by the client as `python -m tpuplane.runtime.sidecar_worker --connect 127.0.0.1:PORT --client-pid PID`
with the client's secret in the environment. It dials back to the client (which listens), says `hello`, then serves
one request at a time until `shutdown` or until the client goes away. Every failure inside a call (unpickling the
request, running the function, pickling the result) is sent back with its traceback, bounded in size, whatever
the exception does in `__str__`; only the process dying ends a call without a reply. A function is unpickled once
and kept, as a real sidecar keeps it: the client sends the same pickle for every call of the same function.

The worker dies with its client however the client dies, and takes everything it started with it:
- a parent-death signal: the kernel sends SIGTERM when the client's spawning thread ends (the client spawns from
  a thread that lives as long as its process), and SIGTERM kills every descendant, then the worker;
- a watchdog thread on the connection: the client's end closing (the kernel closes it when the client dies, even
  by SIGKILL) does the same, also while a call runs;
- the worker is a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`), so orphans of double forks and `setsid`
  helpers become its children, and whatever ends it kills and reaps all its descendants first;
- descendants carry the client's `TPUPLANE_SIDECAR_SESSION` marker in their environment, by which the client
  finds them when the worker itself was killed before it could clean up.

A function that forks must end its child with `os._exit()` (or exec): a child that returns from the function into
the worker never touches the connection; it reports itself and exits, and the worker answers the call, or the
next one, with an error phase `fork`.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import pickle
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections import OrderedDict
from typing import Any

from tpuplane.runtime import sidecar_protocol as protocol
from tpuplane.runtime import sidecar_wire as wire

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
MAX_ERROR_MESSAGE_CHARS = 64 * 1024  # an exception's message in an error reply; the rest is cut with a marker
MAX_TRACEBACK_CHARS = 256 * 1024
# Unpickled functions kept for later calls, by the id the client gave each function object (least recently used
# first out).
MAX_CACHED_FUNCTIONS = 128
PARENT_DEATH_SIGNAL = signal.SIGTERM
_CLIENT_GONE = select.POLLRDHUP | select.POLLHUP | select.POLLERR | select.POLLNVAL


def main(argv: list[str] | None = None) -> int:
    options = _parse_args(argv)
    token = os.environ.pop(protocol.TOKEN_ENV, "")  # user code running here has no business reading it
    _become_subreaper()
    signal.signal(signal.SIGTERM, _exit_on_signal)
    _die_with_parent(options.client_pid)
    _forked_returns.open()
    try:
        host, _, port = options.connect.rpartition(":")
        with socket.create_connection((host, int(port))) as sock:
            protocol.configure_socket(sock)
            _watch_connection(sock)
            wire.send(sock, protocol.HELLO, meta={"protocol": protocol.PROTOCOL_VERSION, "token": token,
                                                  "pid": os.getpid(), "versions": protocol.local_versions().to_json()})
            _serve(sock)
    finally:
        kill_descendants()
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tpuplane.runtime.sidecar_worker", description=__doc__)
    parser.add_argument("--connect", required=True, help="HOST:PORT where the client listens")
    parser.add_argument("--client-pid", type=int, help="the client's pid: exit at once if it is already gone")
    return parser.parse_args(argv)


def _exit_on_signal(signum: int, _frame: Any) -> None:
    _exit_with_descendants(128 + signum)


def _exit_with_descendants(status: int) -> None:
    """Kill every descendant, then end this process at once: nothing of the user's code runs any more (an
    exception would unwind through it, and a call may catch any exception)."""
    kill_descendants()
    os._exit(status)


def _prctl(option: int, value: int) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _become_subreaper() -> None:
    """Orphans of the processes a call starts are reparented here, not to init, so they can be found and killed."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def _die_with_parent(client_pid: int | None) -> None:
    """Have the kernel signal this worker when the client dies. The client may have died before this ran: then the
    parent is already another process, and the worker exits now."""
    _prctl(_PR_SET_PDEATHSIG, PARENT_DEATH_SIGNAL)
    if client_pid is not None and os.getppid() != client_pid:
        _exit_with_descendants(128 + PARENT_DEATH_SIGNAL)


def _watch_connection(sock: socket.socket) -> None:
    """A daemon thread that ends the worker when the client's end of the connection closes, even in the middle of
    a call (the main thread is then running the user's function, not reading)."""

    def watch() -> None:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLRDHUP)  # HUP, ERR and NVAL are always reported
        while True:
            if any(events & _CLIENT_GONE for _, events in poller.poll()):
                _exit_with_descendants(0)

    threading.Thread(target=watch, name="tpuplane-sidecar-watchdog", daemon=True).start()


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


class _ForkedReturns:
    """Children forked by a call that returned from it into the worker, reported through a pipe.

    Such a child holds a copy of the connection and of the serving loop: left alone it would answer requests
    meant for the worker. Instead it reports the function it returned from and exits; the worker then answers the
    call, or the next one if the child was late, with a `fork` error.
    """

    def __init__(self) -> None:
        self._read = self._write = -1
        self._forked = False  # in the worker: no fork yet, so nothing can report and a call reads no pipe
        self.in_forked_child = False  # in a child forked by a call

    def open(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.register_at_fork(after_in_parent=self._note_fork, after_in_child=self._note_child)

    def _note_fork(self) -> None:
        self._forked = True

    def _note_child(self) -> None:
        self.in_forked_child = True

    def report_and_exit(self, name: str) -> None:
        """In a forked child back from the user's function: say so to the worker, then end without unwinding."""
        with contextlib.suppress(OSError):
            os.write(self._write, (name[:200] + "\n").encode())
        os._exit(1)

    def take(self) -> list[str]:
        """The functions forked children returned from since the last look (none: empty)."""
        if not self._forked:
            return []
        reported = b""
        while True:
            try:
                chunk = os.read(self._read, 65536)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            reported += chunk
        return [name for name in reported.decode(errors="replace").splitlines() if name]


_forked_returns = _ForkedReturns()


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
        if (late := _forked_returns.take()):  # a child of an earlier call returned after the worker answered it
            wire.send(sock, protocol.ERROR, request.id, _forked_meta(late, ran_this_request=False))
        elif request.type == protocol.CAPABILITY_PROBE:
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
    except SystemExit as exc:
        if _forked_returns.in_forked_child:  # sys.exit() in a forked child: it wanted to end, so it ends
            os._exit(exc.code if isinstance(exc.code, int) else 1)
        return protocol.ERROR, _error_meta(exc, "run"), []
    except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt in user code too
        if _forked_returns.in_forked_child:
            _forked_returns.report_and_exit(_name_of(fn))
        return protocol.ERROR, _error_meta(exc, "run"), []
    if _forked_returns.in_forked_child:
        _forked_returns.report_and_exit(_name_of(fn))
    if (forked := _forked_returns.take()):
        return protocol.ERROR, _forked_meta(forked, ran_this_request=True), []
    try:
        return protocol.RESULT, None, wire.dump_payload(result)
    except BaseException as exc:  # noqa: BLE001
        return protocol.ERROR, _error_meta(exc, "dump"), []


def _name_of(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else type(fn).__qualname__


def _forked_meta(names: list[str], *, ran_this_request: bool) -> dict[str, Any]:
    functions = ", ".join(dict.fromkeys(names))
    outcome = "its result is dropped" if ran_this_request else "this request did not run"
    message = (f"{functions} returned twice: it forked, and the child process returned from it into the sidecar "
               f"worker as well; the child was ended and {outcome}. End a forked child with os._exit() (or exec), "
               f"or start processes with subprocess or multiprocessing's 'spawn'")
    return {"phase": "fork", "exc_type": "tpuplane.runtime.ForkedReturn", "message": message, "traceback": ""}


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
        "message": _bounded(protocol.exception_text(exc), MAX_ERROR_MESSAGE_CHARS),
        "traceback": _bounded(_safe_traceback(exc), MAX_TRACEBACK_CHARS),
    }


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
