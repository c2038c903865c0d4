"""Host processes of the sandbox: started detached (they outlive `sandbox up`), found again by pid and start time
(so a recycled pid is never taken for ours), stopped with their whole process group.

Every process gets `TPUPLANE_SANDBOX=<state dir>` in its environment: the marker `sandbox down` and the tests
look for to prove nothing was left behind.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tpuplane.runtime.marked_processes import marked_pids, process_state

MARKER_ENV = "TPUPLANE_SANDBOX"


class ProcessFailed(RuntimeError):
    """A process exited or never became ready: the message names it and quotes the end of its log."""


@dataclass(frozen=True)
class Started:
    """What `sandbox status` and `down` need to find a process again."""

    name: str
    pid: int
    start_time: int  # clock ticks since boot (/proc/<pid>/stat field 22): tells our pid from a recycled one
    log: str


def go_gc() -> dict[str, str]:
    """Go's collector for the sandbox's processes (every one is a Go program): a heap five times the live one before
    each collection rather than twice, unless the user set GOGC. Installing the charts' CRDs is mostly garbage: this
    takes a fifth off the sandbox's CPU while it comes up, for about 450 MB more memory (kube-apiserver 0.5 -> 0.9
    GB)."""
    return {"GOGC": os.environ.get("GOGC", "400")}


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[19])  # fields after the command name; 22nd overall


Recorder = Callable[[Started], None]


def start(name: str, argv: list[str], *, log: Path, marker: str, record: Recorder,
          env: dict[str, str] | None = None, cwd: Path | None = None) -> Started:
    """Start `argv` in its own session, stdin from /dev/null, output to `log`; `record` it at once, so that
    whoever cleans up finds it even if it never becomes ready."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, **go_gc(), **(env or {}), MARKER_ENV: marker}, cwd=cwd,
                                   start_new_session=True)
    started = Started(name, process.pid, _start_time(process.pid) or 0, str(log))
    record(started)
    return started


@dataclass(frozen=True)
class Launcher:
    """Starts a sandbox's processes: each with the sandbox's marker, its log in `logs`, recorded at once."""

    marker: str
    logs: Path
    record: Recorder

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Started:
        return start(name, argv, log=self.logs / f"{name}.log", marker=self.marker, record=self.record, env=env)


def alive(started: Started) -> bool:
    """The process is running and is the one we started (same pid and start time), not a zombie."""
    if _start_time(started.pid) != started.start_time:
        return False
    return process_state(started.pid) not in (None, "Z")


def stop(*processes: Started, grace: float = 10.0) -> None:
    """SIGTERM the processes' groups all at once, SIGKILL what is left after `grace` seconds; reap our own
    children. All at once: each takes its own second or two to shut down gracefully, and none waits for another."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        running = [p for p in processes if alive(p)]
        for process in running:
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while running and time.monotonic() < deadline:
            for process in [p for p in running if not alive(p)]:
                _reap(process.pid, block=True)
                running.remove(process)
            if running:
                time.sleep(0.05)
        if not running:
            return


def _reap(pid: int, block: bool = False) -> None:
    """Collect the exit status of our own child (a process this one started), so it leaves no zombie."""
    try:
        os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: its parent (or init) reaps it


def marked(marker: str) -> list[int]:
    """Pids of live processes whose environment carries `MARKER_ENV=<marker>`: every process a sandbox started,
    and whatever those started in turn, found without the state file."""
    return marked_pids(MARKER_ENV, marker)


def kill_marked(marker: str) -> list[int]:
    """SIGKILL every process still carrying the marker (a crashed `up` may leave some the state file never
    recorded); returns their pids."""
    pids = marked(marker)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _reap(pid, block=False)
    return pids


def log_tail(started: Started, lines: int = 12) -> str:
    try:
        text = Path(started.log).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def wait_until(started: Started, ready: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `ready` until it holds; ProcessFailed if the process dies first or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(started):
            _reap(started.pid, block=True)
            raise ProcessFailed(f"{started.name} exited before {what}; the end of {started.log}:\n"
                                f"{log_tail(started)}")
        if ready():
            return
        time.sleep(0.1)
    raise ProcessFailed(f"{started.name} was not {what} after {timeout:.0f} s; the end of {started.log}:\n"
                        f"{log_tail(started)}")


def https_ok(url: str, ca_file: Path | None = None, token: str | None = None) -> bool:
    """GET `url` answers 200 (TLS checked against `ca_file`, or plain HTTP)."""
    context = ssl.create_default_context(cafile=str(ca_file)) if ca_file else None
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0
