"""A supervised `kubectl port-forward`: its death is noticed at once, it is restarted once, then it is an error.

`kubectl port-forward` dies quietly when the pod restarts, the API server drops the stream or the laptop sleeps;
JAX then sees only "connection refused". Here a watcher thread waits on the process, so a death is known the
moment it happens, the forwarder is started again on the same local port (JAX_BACKEND_TARGET stays valid), and
after the restart budget is spent the failure is kept, with kubectl's last stderr lines, for the session to raise.

The forwarder runs in its own session (process group): Ctrl-C in the terminal reaches Python, which then shuts the
forwarder down in order, instead of killing it first. That also means nothing else would stop it if Python died
without cleaning up (SIGKILL, OOM): on Linux the kernel is asked to SIGTERM it when its parent dies
(prctl PR_SET_PDEATHSIG, which survives exec). A `preexec_fn` would make subprocess fork a multithreaded process
(JAX warns, and rightly), so a few lines of Python started with `-I -S` set it and then exec kubectl in place.
The kernel ties the signal to the thread that started the process: the first forwarder to the thread that calls
`start()`, a restarted one to the watcher thread, which lives as long as the forwarder is supervised.
"""

from __future__ import annotations

import collections
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

STDERR_TAIL_LINES = 20
_STOP_GRACE_SECONDS = 5.0
# argv: <parent pid> <program> <args...>. PR_SET_PDEATHSIG is 1 in <linux/prctl.h>; 15 is SIGTERM.
_DIE_WITH_PARENT = """\
import ctypes, os, sys
ctypes.CDLL(None, use_errno=True).prctl(1, ctypes.c_ulong(15))
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)  # the parent died before prctl took effect: nobody would ever stop us
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as error:
    sys.exit(f"cannot run {sys.argv[2]}: {error}")
"""


class ForwarderError(RuntimeError):
    """The port-forward could not be started or died more often than it may be restarted."""


def free_local_port() -> int:
    """A port nobody listens on now: the kernel's pick when binding to port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kubectl_port_forward_argv(kubectl: str, namespace: str, pod: str, local_port: int, remote_port: int,
                              context: str | None = None) -> list[str]:
    context_args = ["--context", context] if context else []
    return [kubectl, *context_args, "port-forward", "--namespace", namespace, "--address", "localhost",
            f"pod/{pod}", f"{local_port}:{remote_port}"]


def dying_with_parent(argv: Sequence[str]) -> list[str]:
    """`argv`, started so that the kernel SIGTERMs it when this process dies (Linux); unchanged elsewhere."""
    if not sys.platform.startswith("linux") or not sys.executable:
        return list(argv)
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), *argv]


def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class PortForwarder:
    """Runs `argv` (which must listen on 127.0.0.1:`port`) and keeps it running, restarting it up to `restarts` times.

    `on_failure(error)` is called from the watcher thread when the forwarder is gone for good.
    """

    def __init__(self, argv: Sequence[str], port: int, *, restarts: int = 1, ready_timeout: float = 30.0,
                 on_failure: Callable[[ForwarderError], None] | None = None,
                 on_restart: Callable[[str], None] | None = None):
        self.argv = list(argv)
        self.port = port
        self._restarts_left = restarts
        self._ready_timeout = ready_timeout
        self._on_failure = on_failure
        self._on_restart = on_restart
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._deaths: list[str] = []
        self._watcher: threading.Thread | None = None
        self.failure: ForwarderError | None = None

    @property
    def pid(self) -> int | None:
        with self._lock:
            return self._process.pid if self._process else None

    @property
    def restarts_used(self) -> int:
        return len(self._deaths) - (1 if self.failure else 0)

    def start(self) -> None:
        """Start the forwarder and wait until the local port accepts connections (restarting once if it dies)."""
        self._spawn()
        self._watcher = threading.Thread(target=self._watch, name=f"port-forward-{self.port}", daemon=True)
        self._watcher.start()
        deadline = time.monotonic() + self._ready_timeout
        while time.monotonic() < deadline:
            if self.failure:
                raise self.failure
            if self._running() and _accepts_connections(self.port):
                return
            time.sleep(0.05)
        self.stop()
        raise ForwarderError(self._describe(f"did not accept connections on 127.0.0.1:{self.port} "
                                            f"within {self._ready_timeout:g}s"))

    def stop(self) -> None:
        """Terminate (then kill) the forwarder and reap it. Idempotent; safe from any thread."""
        self._stopping.set()
        with self._lock:
            process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=_STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout=_STOP_GRACE_SECONDS)

    def _running(self) -> bool:
        with self._lock:
            return self._process is not None and self._process.poll() is None

    def _spawn(self) -> None:
        if shutil.which(self.argv[0]) is None:  # said here: behind the wrapper it would only be an exit status
            raise FileNotFoundError(self.argv[0])
        process = subprocess.Popen(dying_with_parent(self.argv), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace",
                                   start_new_session=True)
        reader = threading.Thread(target=self._read_stderr, args=(process,), daemon=True,
                                  name=f"port-forward-stderr-{process.pid}")
        reader.start()
        with self._lock:
            self._process = process
            self._reader = reader

    def _read_stderr(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if line.strip():
                self._stderr.append(line.rstrip())
        process.stderr.close()

    def _watch(self) -> None:
        """Wait on the current process; on an unexpected exit, restart it or record the failure."""
        while True:
            with self._lock:
                process, reader = self._process, self._reader
            assert process is not None
            code = process.wait()
            if self._stopping.is_set():
                return
            if reader is not None:
                reader.join(timeout=1.0)  # collect what it said before dying
            self._deaths.append(f"exited with code {code}")
            if self._restarts_left > 0:
                self._restarts_left -= 1
                if self._on_restart:
                    self._on_restart(self._describe("exited; restarting it"))
                try:
                    self._spawn()
                except OSError as error:  # kubectl gone from PATH mid-session
                    self._deaths[-1] += f", and could not be started again: {error}"
                    break
                if self._stopping.is_set():  # stop() raced with the restart: do not leave the new one behind
                    self.stop()
                    return
                continue
            break
        self.failure = ForwarderError(self._describe("died and the restart budget is spent"))
        if self._on_failure:
            self._on_failure(self.failure)

    def _describe(self, what: str) -> str:
        history = f" ({'; then '.join(self._deaths)})" if self._deaths else ""
        tail = "\n  ".join(self._stderr) or "(no stderr output)"
        return (f"port-forward to local port {self.port} {what}{history}.\n"
                f"Command: {' '.join(self.argv)}\nLast stderr lines:\n  {tail}")
