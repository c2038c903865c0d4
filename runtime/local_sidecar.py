"""Run colocated functions in a separate Python process before deploying them to a sidecar.

On Pathways a colocated function is cloudpickled on the client and run in the sidecar image, so what breaks
there is what an in-process test never sees: a closure that cannot be pickled, a module the image lacks, a result
that cannot travel back, a version skew. `LocalSidecar` reproduces that boundary on one machine: a worker process
(optionally in a venv built from the sidecar's requirements file) that receives cloudpickled calls over loopback.

Design: the client listens and the worker dials back. The port is then known before the worker starts (no
port-report channel through the worker's stdout, which imports and user code may write to), and the client can
wait in one poll for "the worker connected" or "the worker exited" (a pidfd), so a worker that dies during
start-up is reported at once with its exit status instead of after a timeout. The connection is non-blocking and
every later wait (for a reply, for room to send) is the same poll, so a death mid-call is seen at once too, even
while a child the worker forked still holds the connection open.

Messages use the binary format of `sidecar_wire`: a call or a result is one fixed header plus its pickled frames,
sent in one system call and received in one when small, large arrays straight into their new memory.

cloudpickle is imported only when something is pickled, so importing this module (the pytest plugin does) works
without the `runtime` extra; `LocalSidecar()` then raises an ImportError that says what to install.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import hashlib
import importlib
import inspect
import json
import itertools
import math
import os
import pickletools
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpuplane.runtime import sidecar_protocol as protocol
from tpuplane.runtime import sidecar_wheel
from tpuplane.runtime import sidecar_wire as wire
from tpuplane.runtime.marked_processes import marked_pids
from tpuplane.runtime.sidecar_protocol import ProtocolError, SidecarError

__all__ = [
    "Capabilities", "LocalSidecar", "ProtocolError", "RemoteError", "SidecarDied", "SidecarError",
    "SidecarPicklingError", "SidecarResultError", "SidecarStartError", "SidecarTimeout", "SidecarVersionMismatch",
    "TargetError", "ensure_sidecar_venv", "pickled_by_value", "resolve_target", "run_target",
]

WORKER_MODULE = "tpuplane.runtime.sidecar_worker"
SESSION_ENV = "TPUPLANE_SIDECAR_SESSION"
_BROKEN = select.POLLHUP | select.POLLERR | select.POLLNVAL


class SidecarStartError(SidecarError):
    """The worker never completed the handshake: it exited first (returncode set) or did not connect in time."""

    def __init__(self, message: str, returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode


class SidecarVersionMismatch(SidecarError):
    """The worker breaks the lock-step rule, so pickled functions cannot be trusted to travel."""

    def __init__(self, mismatches: Sequence[str]) -> None:
        super().__init__(
            "sidecar worker breaks the lock-step rule (jax and jaxlib identical, Python major.minor identical, "
            "cloudpickle identical): " + "; ".join(mismatches)
            + ". Pin the client's versions in the sidecar requirements or rebuild the image."
        )
        self.mismatches = list(mismatches)


class SidecarDied(SidecarError):
    """The worker process ended while the client waited for it."""

    def __init__(self, message: str, returncode: int | None) -> None:
        super().__init__(message)
        self.returncode = returncode


class SidecarTimeout(SidecarError):
    """A reply did not start within the request's `timeout`. The call was cancelled: its worker was killed, and
    the next request starts a new one."""


class SidecarPicklingError(SidecarError):
    """The call could not be pickled on the client; the message names the object that could not."""


class SidecarResultError(SidecarError):
    """The worker's result arrived but cannot be unpickled here; the message names the function and what the
    result refers to (usually a module that exists only in the sidecar environment)."""


class RemoteError(SidecarError):
    """The call failed inside the worker. `phase` says where: load (unpickling the call: usually a module missing
    from the sidecar environment), run (the function raised) or dump (the result cannot be pickled)."""

    def __init__(self, exc_type: str, message: str, remote_traceback: str, phase: str) -> None:
        super().__init__(f"{exc_type}: {message} (in the sidecar worker, {_PHASES.get(phase, phase)})\n"
                         f"--- remote traceback ---\n{remote_traceback}")
        self.exc_type = exc_type
        self.remote_message = message
        self.remote_traceback = remote_traceback
        self.phase = phase


_PHASES = {
    "load": "while unpickling the call: is a module the function needs missing from the sidecar environment?",
    "run": "while running the function",
    "dump": "while pickling the result",
    "protocol": "rejecting the request",
    "fork": "a process the function forked returned from it too",
}


@dataclass(frozen=True)
class Capabilities:
    """What the worker process can use, as it reports it."""

    pid: int
    python: str
    platform: str
    cpu_count: int | None
    usable_cpus: int | None
    memory_total_bytes: int
    memory_available_bytes: int | None
    jax_devices: tuple[dict[str, Any], ...] | None  # None unless asked for with probe(jax=True)
    jax_error: str | None  # why jax could not list devices, when asked


class LocalSidecar:
    """A worker process that runs cloudpickled calls, like a colocated-Python sidecar.

    `python` is the worker's interpreter (default: this one). With `venv_requirements`, the worker runs in a venv
    built from that file with `python`, cached by its content (see `ensure_sidecar_venv`). `env` adds variables
    to the worker's environment (e.g. XLA_FLAGS). `shutdown_timeout` bounds every wait on a worker that is going
    away: for its `bye`, for its exit, and for its connection to close once it has exited. `worker_command` is how
    the interpreter runs the worker (default `-m tpuplane.runtime.sidecar_worker`); tests run a misbehaving one.

    The worker reads nothing from this process's stdin (it gets /dev/null) and writes its output unbuffered, so a
    print just before it dies is not lost. Nothing it starts outlives the sidecar, nor this process: the worker dies
    with its client however the client dies (a parent-death signal and a watchdog on the connection, see
    `sidecar_worker`) and kills all its descendants first; it runs in its own session and process group, killed as
    a whole on close and on the worker's death (its own session also keeps a Ctrl-C meant for the client from
    reaching it); and when the worker itself had to be killed, the processes that still carry this sidecar's
    `TPUPLANE_SIDECAR_SESSION` marker (`session`) in their environment are killed too.

    A call abandoned by its `timeout` or interrupted (Ctrl-C) is cancelled: the worker is killed with everything it
    started, and the next request starts a fresh one, so the sidecar stays usable and `close()` never waits for an
    abandoned call. What the old worker kept (module globals, a function's state) is gone; functions are sent again.
    Calls from several threads are safe: they run one at a time.
    """

    def __init__(
        self,
        python: str | os.PathLike[str] | None = None,
        venv_requirements: Path | None = None,
        *,
        venv_cache_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
        connect_timeout: float = 30.0,
        shutdown_timeout: float = 5.0,
        worker_command: Sequence[str] = ("-m", WORKER_MODULE),
    ) -> None:
        protocol.require_cloudpickle()  # fail here, with what to install, rather than at the first call
        interpreter = str(python or sys.executable)
        if venv_requirements is not None:
            interpreter = str(ensure_sidecar_venv(Path(venv_requirements), python=interpreter,
                                                  cache_dir=venv_cache_dir))
        self.python = interpreter
        self.connect_timeout = connect_timeout
        self.shutdown_timeout = shutdown_timeout
        self.versions: protocol.RuntimeVersions | None = None  # the worker's, once the handshake is done
        self.session = secrets.token_hex(8)  # marks every process of this sidecar (see `_kill_marked`)
        self._command = [interpreter, *worker_command]
        self._extra_env = dict(env or {})
        self._lock = threading.Lock()  # one request at a time, whichever thread sends it
        self._last_returncode: int | None = None  # of the last worker reaped
        self._started = False
        self._closed = False
        self._pids: list[int] = []  # every worker this sidecar started, newest last
        self._reset_worker()
        self._next_id = 1
        # Each function object: the id the worker keeps it under, and its pickle (see `call`).
        self._functions: weakref.WeakKeyDictionary[types.FunctionType, tuple[bytes, bytes]] = \
            weakref.WeakKeyDictionary()
        self._function_ids = itertools.count(1)  # never reused, even once a function object is gone

    def _reset_worker(self) -> None:
        """No worker: before the first start, and after one was killed (the next request starts another)."""
        self._process: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._reader: wire.Reader | None = None
        self._pidfd: int | None = None
        # One poll set for the whole life of a worker (its pidfd, then the listener, then the connection); a poll
        # object, not a `selectors` selector, whose Python layer costs more than the wait on a small call.
        self._poll = select.poll()
        self._exit_deadline: float | None = None  # once the worker has exited: until when its connection is read

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> LocalSidecar:
        """Spawn the worker, wait for it to connect and check its hello. Closes the sidecar on any failure."""
        with self._lock:
            if self._closed:
                raise SidecarError("this LocalSidecar is closed")
            if not self._started:
                self._started = True
                try:
                    self._spawn()
                except BaseException:
                    self._closed = True
                    raise
        return self

    def _spawn(self) -> None:
        """Start a worker and complete its handshake; kill it on any failure (the caller decides what follows)."""
        token = secrets.token_hex(16)
        with socket.create_server(("127.0.0.1", 0), backlog=1) as listener:
            port = listener.getsockname()[1]
            env = {**os.environ, **self._extra_env, protocol.TOKEN_ENV: token, SESSION_ENV: self.session,
                   "PYTHONUNBUFFERED": "1",
                   # The real sidecar has none of the client's working directory: do not import from it either.
                   "PYTHONSAFEPATH": "1"}
            self._process = _spawn_for_life(
                [*self._command, "--connect", f"127.0.0.1:{port}", "--client-pid", str(os.getpid())], env)
            self._pids.append(self._process.pid)
            self._pidfd = _open_pidfd(self._process.pid)
            if self._pidfd is not None:
                self._poll.register(self._pidfd, select.POLLIN)
            try:
                self._sock = self._accept(listener)
                self._handshake(token)
            except BaseException:
                self._kill_worker()
                raise

    def _accept(self, listener: socket.socket) -> socket.socket:
        deadline = time.monotonic() + self.connect_timeout
        self._poll.register(listener, select.POLLIN)
        try:
            if not self._wait_for(listener, select.POLLIN, deadline):
                raise SidecarStartError(
                    f"sidecar worker (pid {self.pid}) did not connect within {self.connect_timeout:g} s; killed it "
                    f"(command: {' '.join(self._command)})"
                )
        finally:
            self._poll.unregister(listener)
        sock, _ = listener.accept()
        protocol.configure_socket(sock)
        # Never block in a send or a receive: every wait goes through the poll, which also watches the worker.
        sock.setblocking(False)
        self._reader = wire.Reader(sock, wait=lambda: self._wait_for(sock, select.POLLIN, None))
        return sock

    def _handshake(self, token: str) -> None:
        deadline = time.monotonic() + self.connect_timeout
        if not self._wait_for(self._connection(), select.POLLIN, deadline):
            raise SidecarStartError(f"sidecar worker (pid {self.pid}) connected but sent no hello within "
                                    f"{self.connect_timeout:g} s")
        hello = self._receive("the handshake")
        if hello.type != protocol.HELLO:
            raise ProtocolError(f"expected hello from the sidecar worker, got {hello.type!r}")
        if not secrets.compare_digest(str(hello.meta.get("token", "")), token):
            raise ProtocolError("the process that connected did not present this sidecar's token")
        versions = protocol.RuntimeVersions.from_json(hello.meta.get("versions"))
        mismatches = protocol.lockstep_mismatches(protocol.local_versions(), versions)
        if hello.meta.get("protocol") != protocol.PROTOCOL_VERSION:
            mismatches.insert(0, f"protocol: client {protocol.PROTOCOL_VERSION}, worker {hello.meta.get('protocol')}")
        if mismatches:
            raise SidecarVersionMismatch(mismatches)
        self.versions = versions

    def close(self) -> None:
        """Ask the worker to shut down, then kill its process group and reap it. Safe to call any number of times,
        from any thread.

        The worker gets `shutdown_timeout` to answer and as long again to exit. A call still running in another
        thread after `shutdown_timeout` is ended by killing the worker (that call raises SidecarDied).
        """
        if not self._lock.acquire(timeout=self.shutdown_timeout):
            self._kill_group()  # the call in flight sees the worker die and closes the sidecar; then we go on
            self._lock.acquire()
        try:
            if self._closed:
                return
            self._closed = True
            if self._sock is not None and self._process is not None and self._exit_status() is None:
                try:
                    self._exchange(protocol.SHUTDOWN, None, (), what=protocol.SHUTDOWN,
                                   deadline=time.monotonic() + self.shutdown_timeout)
                except (SidecarError, OSError):
                    pass  # no bye (gone, or past the deadline): nothing to wait for, the kill below ends it
                else:
                    self._wait_exit(self.shutdown_timeout)
        finally:
            try:
                self._kill_worker()
            finally:
                self._lock.release()

    def _kill_worker(self) -> None:
        """Kill the worker's process group, reap the worker, kill what still carries the session marker, release
        the socket and the pidfd. The sidecar itself stays open: the next request starts a new worker."""
        if self._process is not None:
            self._kill_group()
            self._last_returncode = self._process.wait()
            _kill_marked(self.session)
        if self._sock is not None:
            self._sock.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
        self._reset_worker()

    def _terminate(self) -> None:
        """Kill the worker and close the sidecar for good: the stream broke or the worker died on its own."""
        self._closed = True
        self._kill_worker()

    def _kill_group(self) -> None:
        """SIGKILL the worker and every process it started in its group (a zombie leader ignores it).

        Only while the worker is unreaped: until then its pid, which is the group's id, cannot be reused.
        """
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)

    def __enter__(self) -> LocalSidecar:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The pid of the newest worker, which is also its process group's id."""
        return self._pids[-1] if self._pids else None

    @property
    def returncode(self) -> int | None:
        """The newest worker's exit status once it has exited (negative: killed by that signal)."""
        if self._process is not None:
            return self._exit_status()
        return self._last_returncode

    # -- the worker's exit -------------------------------------------------------------------------------------

    def _exit_status(self) -> int | None:
        """The worker's exit status once it has exited (negative: killed by that signal), without reaping it."""
        assert self._process is not None
        if self._process.returncode is not None:
            return self._process.returncode
        try:
            info = os.waitid(os.P_PID, self._process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped behind our back (someone waited for any child): let Popen tell
            return self._process.poll()
        if info is None:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def _wait_exit(self, timeout: float) -> int | None:
        """Wait up to `timeout` seconds for the worker to exit; its status, or None if it is still running."""
        deadline = time.monotonic() + timeout
        while (status := self._exit_status()) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if self._pidfd is not None:
                select.select([self._pidfd], [], [], remaining)
            else:
                time.sleep(min(remaining, 0.05))
        return status

    def _died(self, when: str) -> SidecarDied:
        """The stream broke: the worker is exiting, so wait briefly for its status, then kill and reap it."""
        returncode = self._wait_exit(self.shutdown_timeout)
        self._terminate()
        status = "still running after closing its connection; killed it" if returncode is None else (
            _describe_status(returncode))
        return SidecarDied(f"sidecar worker (pid {self.pid}) died {when}: {status}", returncode)

    def _wait_for(self, sock: socket.socket, events: int, deadline: float | None) -> int:
        """Wait until `sock` is ready for some of `events` (POLLIN, POLLOUT; return those) or `deadline` passes
        (return 0). A broken connection counts as ready for all of them: the receive or send then says how.

        The worker's pidfd is in the same poll, so its exit is seen at once. Then its process group is killed,
        which closes the copies of the connection its children inherited, and the connection is read only until
        `shutdown_timeout` more has passed: a reply the worker wrote before exiting is still read, and a child
        that left the group cannot keep the client waiting. Past that, SidecarDied.
        """
        assert self._process is not None
        fd = sock.fileno()
        self._poll.register(fd, events)  # (re)sets what is watched on it: no system call
        while True:
            limit = deadline if self._exit_deadline is None else (
                min(math.inf if deadline is None else deadline, self._exit_deadline))
            timeout = None if limit is None else max(0.0, limit - time.monotonic())
            if self._pidfd is None and self._exit_deadline is None:  # no pidfd: look at the process every 50 ms
                timeout = 0.05 if timeout is None else min(timeout, 0.05)
            for ready_fd, ready in self._poll.poll(None if timeout is None else timeout * 1000):
                if ready_fd == fd and ready & (events | _BROKEN):
                    return events if ready & _BROKEN else ready & events
            if self._exit_deadline is None and (returncode := self._exit_status()) is not None:
                if self._sock is None:
                    raise SidecarStartError(
                        f"sidecar worker (pid {self.pid}) exited before connecting: "
                        f"{_describe_status(returncode)} (command: {' '.join(self._command)})", returncode)
                self._kill_group()
                if self._pidfd is not None:
                    self._poll.unregister(self._pidfd)  # readable for good now: stop polling it
                self._exit_deadline = time.monotonic() + self.shutdown_timeout
                continue
            now = time.monotonic()
            if self._exit_deadline is not None and now >= self._exit_deadline:
                returncode = self._exit_status()
                assert returncode is not None  # its exit is what set the deadline
                self._terminate()
                raise SidecarDied(
                    f"sidecar worker (pid {self.pid}) died ({_describe_status(returncode)}), but its connection "
                    f"stayed open: a process it started outside its process group holds it; gave up after "
                    f"{self.shutdown_timeout:g} s", returncode)
            if deadline is not None and now >= deadline:
                return 0

    # -- requests ----------------------------------------------------------------------------------------------

    def probe(self, *, jax: bool = False, timeout: float | None = None) -> Capabilities:
        """CPUs and memory of the worker; with `jax=True` also its jax devices (this imports jax in the worker)."""
        reply = self._request(protocol.CAPABILITY_PROBE, {"jax": jax}, expect=protocol.CAPABILITIES, timeout=timeout)
        fields = {name: reply.meta.get(name) for name in Capabilities.__dataclass_fields__}
        if fields["jax_devices"] is not None:
            fields["jax_devices"] = tuple(fields["jax_devices"])
        return Capabilities(**fields)

    def call(self, fn: Callable[..., Any], /, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """Run `fn(*args, **kwargs)` in the worker and return its result, unpickled here.

        `timeout` (seconds; None waits for ever) bounds the wait for the reply to start: past it, SidecarTimeout,
        and the call is cancelled (see the class). `timeout` is not passed to `fn`: to give `fn` an argument of
        that name, call `functools.partial(fn, timeout=...)`. A function decorated with JAX's `@colocated_python`
        (or tpuplane's `colocated`) runs as the function it wraps, as the sidecar runs it.

        A function (a `def` or a lambda) is pickled once per sidecar, as `jax.experimental.colocated_python`
        pickles it once per specialization, and the worker unpickles it once: the globals and closure values it
        carries by value are those of its first call, and its state in the worker lasts from call to call (for
        the 128 functions called last; two function objects never share state, however alike).
        """
        fn = _unwrap_colocated(fn)
        try:
            frames = [*self._pickled_function(fn), *wire.dump_payload((args, kwargs))]
        except Exception as exc:
            raise SidecarPicklingError(_describe_unpicklable(fn, args, kwargs, exc)) from exc
        reply = self._request(protocol.CALL, frames=frames, expect=protocol.RESULT, what=_name_of(fn),
                              timeout=timeout)
        try:
            return wire.load_payload(reply.frames)
        except Exception as exc:
            raise SidecarResultError(_describe_unloadable(fn, reply.frames, exc)) from exc

    def _pickled_function(self, fn: Callable[..., Any]) -> tuple[bytes, bytes]:
        """The function's id frame and its cloudpickle, pickled once per function object: pickling one by value
        costs more than the whole round trip of a small call. The worker keeps the function under that id, so
        two function objects never share one, whatever their pickles. Other callables (partials, objects with
        __call__) may change between calls: id 0, pickled and unpickled on every call."""
        if type(fn) is not types.FunctionType:
            return wire.FUNCTION_ID.pack(0), protocol.require_cloudpickle().dumps(fn, protocol=5)
        known = self._functions.get(fn)
        if known is None:
            known = self._functions[fn] = (wire.FUNCTION_ID.pack(next(self._function_ids)),
                                           protocol.require_cloudpickle().dumps(fn, protocol=5))
        return known

    def _request(self, type_: str, meta: dict[str, Any] | None = None, frames: Sequence[Any] = (), *, expect: str,
                 what: str | None = None, timeout: float | None = None) -> wire.Message:
        """Send one request and return its reply, starting a worker first if the last one was cancelled.

        Waiting for another thread's request counts against `timeout`. A request abandoned half-way (timeout,
        KeyboardInterrupt) kills the worker; a dead worker or a broken stream closes this sidecar.
        """
        what = what or type_
        _check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        if not (self._lock.acquire() if timeout is None else self._lock.acquire(timeout=timeout)):
            raise SidecarTimeout(f"{what} waited {timeout:g} s for another thread's request to this sidecar "
                                 f"to finish; it was not sent")
        try:
            if self._closed:
                raise SidecarError("this LocalSidecar is closed")
            if not self._started:
                raise SidecarError("LocalSidecar is not started: use start() or `with LocalSidecar() as sidecar:`")
            if self._process is None:
                self._spawn()  # the last worker was killed with a cancelled call
            reply = self._exchange(type_, meta, frames, what=what, deadline=deadline, timeout=timeout)
        finally:
            self._lock.release()
        if reply.type == protocol.ERROR:
            raise RemoteError(str(reply.meta.get("exc_type")), str(reply.meta.get("message")),
                              str(reply.meta.get("traceback")), str(reply.meta.get("phase")))
        if reply.type != expect:
            with self._lock:
                self._terminate()
            raise ProtocolError(f"expected {expect!r} in reply to {what}, got {reply.type!r}")
        return reply

    def _exchange(self, type_: str, meta: dict[str, Any] | None, frames: Sequence[Any], *, what: str,
                  deadline: float | None, timeout: float | None = None) -> wire.Message:
        """Send one request and read its reply (holding the lock). Cancels by killing the worker when abandoned."""
        sock = self._connection()
        request_id = self._next_id
        self._next_id += 1
        try:
            self._send(sock, type_, request_id, meta, frames, deadline, what)
            if not self._reader.buffered and not self._wait_for(sock, select.POLLIN, deadline):
                limit = f"within {timeout:g} s" if timeout is not None else "in time"
                raise SidecarTimeout(f"sidecar worker (pid {self.pid}) did not answer {what} {limit}; the call was "
                                     f"cancelled: the worker was killed, and the next request starts a new one")
            reply = self._receive(what)
        except SidecarDied:
            raise  # the sidecar is closed already
        except ProtocolError:
            self._terminate()  # a malformed message: the stream cannot be trusted any more
            raise
        except BaseException:
            self._kill_worker()  # a timeout or an interrupt: cancel the call, keep the sidecar
            raise
        if reply.id != request_id:
            self._terminate()
            raise ProtocolError(f"reply to request {request_id} ({what}) carries id {reply.id!r}: the stream is "
                                f"out of step")
        return reply

    def _send(self, sock: socket.socket, type_: str, request_id: int, meta: dict[str, Any] | None,
              frames: Sequence[Any], deadline: float | None, what: str) -> None:
        def wait_writable() -> None:
            if not self._wait_for(sock, select.POLLOUT, deadline):
                raise SidecarTimeout(f"sidecar worker (pid {self.pid}) took no more of request {what} in time; "
                                     f"the call was cancelled: the worker was killed, and the next request starts "
                                     f"a new one")

        self._transfer(lambda: wire.send(sock, type_, request_id, meta, frames, wait=wait_writable),
                       f"while sending {what}")

    def _receive(self, during: str) -> wire.Message:
        self._connection()
        assert self._reader is not None  # made with the connection
        return self._transfer(self._reader.receive, f"during {during}")

    def _transfer(self, move_one_message: Callable[[], Any], when: str) -> Any:
        """Send or receive one whole message; a stream that breaks means the worker died."""
        try:
            return move_one_message()
        except (protocol.PeerClosed, OSError) as exc:
            raise self._died(when) from exc

    def _connection(self) -> socket.socket:
        if self._sock is None:
            raise SidecarError("LocalSidecar is not started: use start() or `with LocalSidecar() as sidecar:`")
        return self._sock


def _check_timeout(timeout: Any) -> None:
    """None (wait for ever), or a number of seconds above 0 that a lock and a poll can wait."""
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= threading.TIMEOUT_MAX:
        raise ValueError(f"timeout: got {timeout!r}; allowed: None (wait for ever) or seconds above 0, at most "
                         f"{threading.TIMEOUT_MAX:g}")


_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tpuplane-sidecar-spawner")


def _spawn_for_life(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start a worker from one thread that lives as long as this process.

    The kernel's parent-death signal follows the thread that forked, not the process: a worker started from a
    short-lived thread would be signalled when that thread ends. The worker gets /dev/null for stdin and its own
    session (a Ctrl-C at the terminal reaches the client only).
    """
    spawned = _SPAWNER.submit(subprocess.Popen, argv, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        return spawned.result()
    except BaseException:
        # Interrupted while the spawner thread starts it: kill the worker whenever it exists.
        spawned.add_done_callback(lambda done: done.exception() is None and _kill_spawned(done.result()))
        raise


def _kill_spawned(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _unwrap_colocated(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The function a `@colocated_python` callable wraps: what the sidecar runs. The callable itself holds JAX's
    per-specialization caches and locks, which cannot be pickled."""
    wrapped = getattr(fn, "__wrapped__", None)
    if wrapped is not None and callable(getattr(fn, "specialize", None)):
        return _unwrap_colocated(wrapped)
    return fn


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux >= 5.3
        return None


def _describe_status(returncode: int) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by signal {signal.Signals(-returncode).name}"
        return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def _name_of(fn: Any) -> str:
    """A short name for messages and the request header: never a callable object's whole repr."""
    name = getattr(fn, "__qualname__", None)
    return name[:200] if isinstance(name, str) and name else _short_repr(fn)


def _describe_unpicklable(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], exc: Exception) -> str:
    """Find which part of the call cannot be pickled: the function, a variable it captures, or an argument."""
    suspects: list[tuple[str, Any]] = []
    with contextlib.suppress(TypeError, ValueError):
        captured = inspect.getclosurevars(fn)
        suspects += [(f"variable {name!r} captured by {_name_of(fn)}", value)
                     for name, value in {**captured.globals, **captured.nonlocals}.items()
                     if not isinstance(value, types.ModuleType)]
    suspects += [(f"argument {index}", value) for index, value in enumerate(args)]
    suspects += [(f"keyword argument {name!r}", value) for name, value in kwargs.items()]
    for label, value in suspects:
        try:
            protocol.require_cloudpickle().dumps(value)
        except Exception as inner:  # noqa: BLE001 - any failure names the culprit
            return f"cannot pickle {label} = {_short_repr(value)} for the sidecar: {inner}"
    return f"cannot pickle function {_name_of(fn)} = {_short_repr(fn)} for the sidecar: {exc}"


def _describe_unloadable(fn: Any, frames: Sequence[Any], exc: Exception) -> str:
    """Say which function's result could not be unpickled here, and what it refers to by name."""
    referenced = _pickled_globals(frames[0]) if frames else []
    refers = f"; it refers to {', '.join(referenced[:8])}" if referenced else ""
    return (f"the result of {_name_of(fn)} came back from the sidecar worker but cannot be unpickled here: "
            f"{type(exc).__name__}: {exc}{refers}. A result may only refer to modules and classes this client can "
            f"import too: return plain data (numbers, strings, lists, dicts, numpy arrays) or install the module here")


def _pickled_globals(stream: Any) -> list[str]:
    """`module.name` of each class or function a pickle refers to, in order (read, never loaded)."""
    names: list[str] = []
    strings: list[str] = []
    try:
        for opcode, argument, _ in pickletools.genops(bytes(stream)):
            if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
                strings.append(argument)
            elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
                names.append(f"{strings[-2]}.{strings[-1]}")
            elif opcode.name == "GLOBAL":
                names.append(str(argument).replace(" ", "."))
    except Exception:  # noqa: BLE001 - a stream pickletools cannot walk: name nothing rather than fail
        pass
    return list(dict.fromkeys(names))


def _short_repr(value: Any, limit: int = 120) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__} whose repr() failed: {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kill_marked(session: str) -> None:
    """SIGKILL the processes that carry this sidecar's session marker: descendants of a worker that was killed
    before it could kill them itself (they were reparented away from it)."""
    for pid in marked_pids(SESSION_ENV, session):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# -- running one function ---------------------------------------------------------------------------------------


class TargetError(ValueError):
    """A `module:function` target that cannot be had here: malformed, not importable, or not callable."""


_TARGET = re.compile(r"(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<attribute>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")


class _ExitAtImport(BaseException):
    """`os._exit(code)` called by a module while `_import` imports it."""


@contextlib.contextmanager
def _import_guard() -> Iterator[list[int]]:
    """While a target's module is imported in this process (it must be: its function is pickled by reference):
    `os._exit` raises `_ExitAtImport` instead of ending the process with no word, and a real Ctrl-C is recorded
    (the list yielded) so it is told apart from a KeyboardInterrupt the module raises itself. What ends the
    process by other means (a signal it sends itself) cannot be caught here."""
    interrupted: list[int] = []

    def exit_now(code: int) -> None:
        raise _ExitAtImport(code)

    def on_interrupt(signum: int, frame: Any) -> None:
        interrupted.append(signum)
        raise KeyboardInterrupt

    real_exit, os._exit = os._exit, exit_now  # type: ignore[assignment]
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_interrupt) if main else None
    try:
        yield interrupted
    finally:
        os._exit = real_exit
        if main:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def _import(module_name: str) -> types.ModuleType:
    """The module, imported here; whatever importing it does wrong (a syntax error, an exception, `sys.exit()`,
    `os._exit()` or a KeyboardInterrupt at import) is a TargetError naming it, never this process ending."""
    with _import_guard() as interrupted:
        try:
            return importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise TargetError(str(exc)) from None
        except SyntaxError as exc:
            raise TargetError(f"{module_name} does not compile: {exc.msg} ({exc.filename}, line {exc.lineno})") \
                from None
        except SystemExit as exc:
            raise TargetError(f"{module_name} exited while being imported (sys.exit({_short_repr(exc.code)}))") \
                from None
        except _ExitAtImport as exc:
            raise TargetError(f"{module_name} exited while being imported (os._exit({_short_repr(exc.args[0])}))") \
                from None
        except BaseException as exc:  # the target's own code failed: name it, whatever it raised; not a real Ctrl-C
            if interrupted:
                raise
            raise TargetError(f"importing {module_name} raised {type(exc).__name__}"
                              + (f": {text[:300]}" if (text := protocol.exception_text(exc)) else "")) from None


def resolve_target(target: str) -> Callable[..., Any]:
    """'package.module:function' -> the function, imported here like `python -m` would (cwd importable).
    Raises TargetError for anything else: a path, a relative name, a module that cannot be imported."""
    match = _TARGET.fullmatch(target)
    if match is None:
        raise TargetError(f"target must be 'package.module:function' (dotted names: no path, no relative import), "
                          f"got {_short_repr(target)}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    obj: Any = _import(match["module"])
    for part in match["attribute"].split("."):
        try:
            obj = getattr(obj, part)
        except Exception as exc:  # noqa: BLE001 - AttributeError, or whatever a module's __getattr__ raises
            raise TargetError(f"{match['module']} has no {match['attribute']!r}: {type(exc).__name__}") from None
    if not callable(obj):
        raise TargetError(f"{target!r} is not callable: {_short_repr(obj)}")
    return obj


def run_target(target: str, *args: Any, sidecar: LocalSidecar | None = None, **kwargs: Any) -> Any:
    """Run `module:function(*args, **kwargs)` in a sidecar worker (a fresh default one unless `sidecar` is given).

    The function is pickled by reference, as it would be for a real sidecar: the worker imports its module, so a
    module missing from the sidecar environment fails here as it would there (RemoteError, phase 'load').
    """
    fn = resolve_target(target)
    if sidecar is not None:
        return sidecar.call(fn, *args, **kwargs)
    with LocalSidecar() as fresh:
        return fresh.call(fn, *args, **kwargs)


@contextlib.contextmanager
def pickled_by_value(module: types.ModuleType) -> Iterator[None]:
    """Ship `module`'s functions by value while inside, e.g. a test module the sidecar cannot import."""
    cloudpickle = protocol.require_cloudpickle()
    if module.__name__ in cloudpickle.list_registry_pickle_by_value() or sys.modules.get(module.__name__) is not module:
        yield
        return
    cloudpickle.register_pickle_by_value(module)
    try:
        yield
    finally:
        cloudpickle.unregister_pickle_by_value(module)


# -- the sidecar venv -------------------------------------------------------------------------------------------


def default_venv_cache_dir() -> Path:
    base = os.environ.get("TPUPLANE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tpuplane")
    return Path(base) / "sidecar-venvs"


def ensure_sidecar_venv(requirements: Path, *, python: str | None = None, cache_dir: Path | None = None) -> Path:
    """Build (once) a venv the way the sidecar image is built; return its interpreter.

    It holds `requirements` and the wheel of tpuplane's sidecar runtime (`sidecar_wheel`: the very wheel the image
    installs, not this whole package), with the client's jax, jaxlib and cloudpickle versions as pip constraints,
    the way the image pins them: a requirement that contradicts them fails the build, as it would fail the image
    build. It is cached under a hash of the requirements, the interpreter and the pinned versions; a changed
    runtime is reinstalled into it. A file lock lets parallel test workers share one build.
    """
    python = python or sys.executable
    versions = protocol.local_versions()
    pins = {name: getattr(versions, name) for name in ("jax", "jaxlib", "cloudpickle") if getattr(versions, name)}
    key = hashlib.sha256(json.dumps(
        {"requirements": requirements.read_text(), "python": os.path.realpath(python), "pins": pins,
         "runtime": sidecar_wheel.REQUIREMENTS}, sort_keys=True).encode()).hexdigest()[:16]
    root = cache_dir or default_venv_cache_dir()
    venv = root / key
    interpreter = venv / "bin" / "python"
    installed = venv / ".runtime-wheel"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wheel = sidecar_wheel.build_runtime_wheel(root / f"{key}.runtime")
        if not (venv / ".complete").exists():
            shutil.rmtree(venv, ignore_errors=True)  # a build that was interrupted
            constraints = root / f"{key}.constraints.txt"
            constraints.write_text("".join(f"{name}=={version}\n" for name, version in sorted(pins.items())))
            _run([python, "-m", "venv", str(venv)])
            _run([str(interpreter), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                  "-r", str(requirements), "-c", str(constraints), str(wheel),
                  *(f"{name}=={version}" for name, version in sorted(pins.items()))])
            installed.write_text(wheel.name)
            _run([str(interpreter), "-m", "pip", "check"])
            (venv / ".complete").write_text(key)
        elif installed.read_text() != wheel.name:  # the runtime changed since; its requirements did not (the key)
            _run([str(interpreter), "-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-deps",
                  "--force-reinstall", str(wheel)])
            installed.write_text(wheel.name)
    return interpreter


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SidecarError(f"building the sidecar venv failed: {' '.join(command)} exited "
                           f"{result.returncode}\n{result.stdout}{result.stderr}")
