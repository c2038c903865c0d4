"""Processes found by a marker in their environment: what a process started inherits, so its descendants carry it
too, even those that left its process group or were reparented after it died. Linux only (reads /proc); only
this user's processes are readable, so only they are found."""

from __future__ import annotations

import os
from pathlib import Path


def process_state(pid: int) -> str | None:
    """The state letter of /proc/<pid>/stat (`Z` for a zombie), None once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def marked_pids(name: str, value: str) -> list[int]:
    """Pids of live processes, other than this one, whose environment carries `name=value`; zombies are dead
    already and are left to whoever reaps them."""
    wanted = f"{name}={value}".encode()
    try:
        pids = sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit())
    except OSError:
        return []
    found = []
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0") and process_state(pid) not in (None, "Z"):
            found.append(pid)
    return found
