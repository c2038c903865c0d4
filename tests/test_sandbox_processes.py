"""The sandbox's processes: found again by pid and start time, and by their marker when no record names them."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import poll_until
from tpuplane.sandbox.processes import Launcher, alive, kill_marked, marked, stop


def sleeper(tmp_path, marker: str):
    records = []
    launcher = Launcher(marker=marker, logs=tmp_path, record=records.append)
    return launcher.start("sleeper", ["sleep", "60"]), records


def marked_soon(marker: str) -> list[int]:
    """`marked`, once a just-started process's environment is readable: Popen returns when exec closes its pipe,
    a moment before the kernel has set up the new program's environment (under load, long enough to read none)."""
    poll_until(lambda: marked(marker), patience=5)
    return marked(marker)


def test_a_started_process_is_recorded_at_once_and_carries_its_marker(tmp_path):
    started, records = sleeper(tmp_path, str(tmp_path))
    try:
        assert records == [started] and alive(started)
        assert marked_soon(str(tmp_path)) == [started.pid]
    finally:
        stop(started)
    assert not alive(started)


def test_a_recycled_pid_is_not_taken_for_ours(tmp_path):
    started, _ = sleeper(tmp_path, str(tmp_path))
    try:
        assert not alive(dataclasses.replace(started, start_time=started.start_time + 1))
    finally:
        stop(started)


def test_processes_no_record_names_are_killed_by_their_marker(tmp_path):
    started, _ = sleeper(tmp_path, str(tmp_path))
    other, _ = sleeper(tmp_path, str(tmp_path / "another-sandbox"))
    try:
        assert marked_soon(str(tmp_path)) == [started.pid]
        assert kill_marked(str(tmp_path)) == [started.pid]
        poll_until(lambda: not alive(started), patience=5)
        assert not alive(started) and alive(other)
    finally:
        stop(other)


def test_stopping_several_at_once_kills_those_that_outlive_the_grace(tmp_path):
    launcher = Launcher(marker=str(tmp_path), logs=tmp_path, record=lambda _: None)
    polite = launcher.start("polite", ["sleep", "60"])
    stubborn = launcher.start("stubborn", ["sh", "-c", "trap '' TERM; sleep 60"])  # its sleep ignores TERM too
    try:
        poll_until(lambda: marked(str(tmp_path)), patience=5)
        stop(polite, stubborn, grace=0.5)
        assert not alive(polite) and not alive(stubborn)
    finally:
        kill_marked(str(tmp_path))


@pytest.mark.parametrize("users, collects_at", [(None, "400"), ("100", "100")])
def test_a_started_process_collects_garbage_less_often_unless_the_user_says(tmp_path, monkeypatch, users,
                                                                            collects_at):
    if users is None:
        monkeypatch.delenv("GOGC", raising=False)
    else:
        monkeypatch.setenv("GOGC", users)
    launcher = Launcher(marker=str(tmp_path), logs=tmp_path, record=lambda _: None)
    started = launcher.start("printer", ["sh", "-c", 'echo "GOGC=$GOGC"'])
    poll_until(lambda: not alive(started), patience=5)
    assert (tmp_path / "printer.log").read_text() == f"GOGC={collects_at}\n"
