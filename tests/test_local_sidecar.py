"""LocalSidecar against real worker processes over real loopback sockets.

Broken or skewed workers are real processes too: tests/faulty_sidecar_worker.py runs the real worker patched to
misbehave or to claim other versions (a sidecar image built with them); the shipped worker has no such switch.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from importlib import metadata
from pathlib import Path

import cpu_jax  # noqa: F401 (JAX on 8 CPU devices, set before any backend exists)
from conftest import poll_until
import numpy as np
import pytest
import typer
from jax.experimental.colocated_python import colocated_python
from typer.testing import CliRunner

from tpuplane.cli.sidecar_run import sidecar_run_command
from tpuplane.runtime import sidecar_protocol as protocol
from tpuplane.runtime.colocated import colocated
from tpuplane.runtime.marked_processes import marked_pids
from tpuplane.runtime.local_sidecar import (
    SESSION_ENV,
    LocalSidecar,
    RemoteError,
    SidecarDied,
    SidecarError,
    SidecarPicklingError,
    SidecarResultError,
    SidecarStartError,
    SidecarTimeout,
    SidecarVersionMismatch,
    pickled_by_value,
    run_target,
)

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _ship_this_module_by_value():
    """The worker cannot import this test module; its helper functions travel by value, as from a script."""
    with pickled_by_value(sys.modules[__name__]):
        yield


@pytest.fixture
def sidecar():
    with LocalSidecar() as started:
        yield started


def assert_reaped(pid: int) -> None:
    """waitpid fails for a pid that is no child of ours any more: the worker was reaped, no zombie is left."""
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def scale(values, *, factor=1):
    return [value * factor for value in values]


def fail(message):
    raise ValueError(message)


def sleep_after_marker(marker: str, seconds: float = 60, result=None):
    Path(marker).write_text("in call")
    time.sleep(seconds)
    return result


def sleep_then_return(seconds, result):
    time.sleep(seconds)
    return result


def sleep_then_make_bytes(seconds, size):
    time.sleep(seconds)
    return bytes(size)


def _write_pid_file(pid_file: str) -> None:
    Path(pid_file + ".tmp").write_text(str(os.getpid()))
    os.replace(pid_file + ".tmp", pid_file)


def fork_child_holding_the_connection(pid_file: str, *, escape_group: bool = False) -> int:
    """Fork a child that inherits the worker's connection and sleeps 30 s, as a data-loader helper would."""
    child = os.fork()
    if child == 0:
        if escape_group:
            os.setsid()  # out of the worker's process group, out of reach of a group kill
        _write_pid_file(pid_file)
        time.sleep(30)
        os._exit(0)
    while not Path(pid_file).exists():
        time.sleep(0.01)
    return child


def fork_child_then_exit(pid_file: str, status: int, *, escape_group: bool = False) -> None:
    fork_child_holding_the_connection(pid_file, escape_group=escape_group)
    os._exit(status)


def running_processes(*, pid: int | None = None, group: int | None = None, patience: float = 5.0) -> list[int]:
    """`pid`, or the members of process `group`, still running after `patience` s to finish dying from a SIGKILL.

    Zombies count as gone: the children of a worker are adopted by a reaper that is not this test.
    """
    deadline = time.monotonic() + patience
    while True:
        running = []
        for stat in Path("/proc").glob("[0-9]*/stat" if pid is None else f"{pid}/stat"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                state, _parent, process_group = stat.read_text().rpartition(")")[2].split()[:3]
                if state not in ("Z", "X") and (group is None or int(process_group) == group):
                    running.append(int(stat.parent.name))
        if not running or time.monotonic() >= deadline:
            return running
        time.sleep(0.05)


# -- handshake, probe, call --------------------------------------------------------------------------------------


def test_local_sidecar_handshake_reports_worker_versions(sidecar):
    assert sidecar.versions == protocol.local_versions()
    assert sidecar.pid != os.getpid()


def test_local_sidecar_probe_reports_cpus_and_memory_without_importing_jax(sidecar):
    capabilities = sidecar.probe()
    assert capabilities.pid == sidecar.pid
    assert capabilities.cpu_count == os.cpu_count()
    assert capabilities.memory_total_bytes == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert capabilities.jax_devices is None
    assert sidecar.call(lambda: "jax" in sys.modules) is False


def test_local_sidecar_probe_lists_jax_devices_when_asked(sidecar):
    devices = sidecar.probe(jax=True).jax_devices
    assert devices and {device["platform"] for device in devices} == {"cpu"}


def test_local_sidecar_call_passes_args_and_kwargs(sidecar):
    assert sidecar.call(scale, [1, 2], factor=3) == [3, 6]
    assert sidecar.call(os.getpid) == sidecar.pid


def test_local_sidecar_call_round_trips_64_mib(sidecar):
    payload = os.urandom(64 << 20)
    array = np.frombuffer(payload, dtype=np.uint8).reshape(8192, -1)
    assert sidecar.call(lambda data: data, payload) == payload
    assert np.array_equal(sidecar.call(lambda a: a, array), array)


def test_local_sidecar_call_returns_a_large_array_equal_and_writable(sidecar):
    array = np.random.default_rng(0).standard_normal((1024, 4096))  # 32 MiB, out of band both ways
    result = sidecar.call(lambda a: a * 2, array)
    assert np.array_equal(result, array * 2) and result.flags.writeable
    result[0, 0] = 1.0
    assert result[0, 0] == 1.0


SETTING = {"scale": 1}


def read_setting():
    return SETTING["scale"]


def test_local_sidecar_pickles_a_function_once_like_colocated_python(sidecar):
    """A function travels with its first call: what it captured by value then, it keeps (as on Pathways)."""
    assert sidecar.call(read_setting) == 1
    SETTING["scale"] = 2
    try:
        assert sidecar.call(read_setting) == 1
        assert sidecar.call(lambda: read_setting()) == 2  # a new function is pickled anew
    finally:
        SETTING["scale"] = 1


def test_local_sidecar_worker_keeps_an_unpickled_function_between_calls(sidecar):
    def count_calls():
        count_calls.calls = getattr(count_calls, "calls", 0) + 1
        return count_calls.calls

    assert [sidecar.call(count_calls) for _ in range(3)] == [1, 2, 3]


# -- errors from the function ------------------------------------------------------------------------------------


def test_local_sidecar_remote_exception_carries_remote_traceback(sidecar):
    with pytest.raises(RemoteError) as caught:
        sidecar.call(fail, "boom")
    error = caught.value
    assert (error.exc_type, error.remote_message, error.phase) == ("builtins.ValueError", "boom", "run")
    assert "in fail" in error.remote_traceback and "ValueError: boom" in error.remote_traceback
    assert sidecar.call(scale, [1]) == [1]  # the worker survives its function's exception


def test_local_sidecar_unpicklable_result_is_a_remote_error(sidecar):
    with pytest.raises(RemoteError, match="lock") as caught:
        sidecar.call(threading.Lock)
    assert caught.value.phase == "dump"


def test_local_sidecar_missing_dependency_fails_while_loading(sidecar, tmp_path, monkeypatch):
    (tmp_path / "only_on_client.py").write_text("def answer():\n    return 42\n")
    monkeypatch.syspath_prepend(tmp_path)
    import only_on_client

    with pytest.raises(RemoteError, match="No module named 'only_on_client'") as caught:
        sidecar.call(only_on_client.answer)
    assert caught.value.phase == "load"


def test_local_sidecar_unpicklable_closure_names_the_captured_variable(sidecar):
    lock = threading.Lock()
    with pytest.raises(SidecarPicklingError, match="variable 'lock' captured by .*<lambda>"):
        sidecar.call(lambda: lock.locked())
    assert sidecar.call(scale, [2]) == [2]  # nothing was sent: the worker is still usable


def test_local_sidecar_unpicklable_keyword_argument_is_named(sidecar):
    with pytest.raises(SidecarPicklingError, match="keyword argument 'factor'"):
        sidecar.call(scale, [1], factor=threading.Lock())


# -- a worker that dies or misbehaves ----------------------------------------------------------------------------


def test_local_sidecar_worker_exiting_mid_call_raises_died_with_status(sidecar):
    pid = sidecar.pid
    with pytest.raises(SidecarDied, match="exit status 3") as caught:
        sidecar.call(os._exit, 3)
    assert caught.value.returncode == 3
    assert_reaped(pid)


def test_local_sidecar_worker_killed_from_outside_raises_died(sidecar, tmp_path):
    marker = tmp_path / "in-call"

    def kill_when_in_call():
        while not marker.exists():
            time.sleep(0.01)
        os.kill(sidecar.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_in_call)
    killer.start()
    with pytest.raises(SidecarDied, match="killed by signal SIGKILL") as caught:
        sidecar.call(sleep_after_marker, str(marker))
    killer.join()
    assert caught.value.returncode == -signal.SIGKILL


def test_local_sidecar_refuses_calls_after_the_worker_died(sidecar):
    with pytest.raises(SidecarDied):
        sidecar.call(os._exit, 1)
    with pytest.raises(SidecarError, match="closed"):
        sidecar.call(scale, [1])


def test_local_sidecar_worker_dying_while_its_child_holds_the_connection_raises_died_at_once(tmp_path):
    """The child would keep the connection open 30 s; killing the worker's process group releases it at once.

    shutdown_timeout is 20 s so that only the group kill, not the bounded wait, can answer within 10 s.
    """
    pid_file = tmp_path / "child.pid"
    with LocalSidecar(shutdown_timeout=20) as sidecar:
        group = sidecar.pid
        started = time.monotonic()
        with pytest.raises(SidecarDied, match="exit status 3") as caught:
            sidecar.call(fork_child_then_exit, str(pid_file), 3)
        elapsed = time.monotonic() - started
    assert caught.value.returncode == 3
    assert elapsed < 10
    assert running_processes(pid=int(pid_file.read_text())) == []
    assert running_processes(group=group) == []


def test_local_sidecar_stops_waiting_for_a_connection_held_outside_its_process_group(tmp_path):
    """A child that left the group with setsid() survives the group kill: the wait ends after shutdown_timeout."""
    pid_file = tmp_path / "child.pid"
    try:
        with LocalSidecar(shutdown_timeout=0.5) as sidecar:
            started = time.monotonic()
            with pytest.raises(SidecarDied, match="exit status 3.*connection stayed open") as caught:
                sidecar.call(fork_child_then_exit, str(pid_file), 3, escape_group=True)
            elapsed = time.monotonic() - started
    finally:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert caught.value.returncode == 3
    assert elapsed < 10


def test_local_sidecar_close_kills_processes_the_worker_left_behind(tmp_path):
    sidecar = LocalSidecar().start()
    group = sidecar.pid
    child = sidecar.call(fork_child_holding_the_connection, str(tmp_path / "child.pid"))
    sidecar.close()
    assert sidecar.returncode == 0  # the worker itself still obeyed shutdown
    assert running_processes(pid=child) == []
    assert running_processes(group=group) == []


def test_local_sidecar_worker_exiting_before_connecting_reports_its_status(tmp_path):
    """A venv without tpuplane: the worker module cannot even be imported, as in an image that lacks it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    bare = LocalSidecar(python=tmp_path / "bare" / "bin" / "python", connect_timeout=30)
    started = time.monotonic()
    with pytest.raises(SidecarStartError, match="exited before connecting: exit status 1") as caught:
        bare.start()
    assert caught.value.returncode == 1
    assert time.monotonic() - started < 10  # noticed when it exited, not at the 30 s accept deadline
    assert_reaped(bare.pid)


def faulty(*fault_args: str, **options) -> LocalSidecar:
    """A LocalSidecar whose worker is the real one patched to misbehave (tests/faulty_sidecar_worker.py)."""
    tests = str(Path(__file__).resolve().parent)
    return LocalSidecar(worker_command=("-m", "faulty_sidecar_worker", *fault_args),
                        env={"PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))},
                        **options)


def test_local_sidecar_accept_timeout_kills_a_worker_that_never_connects():
    silent = faulty("--fault", "never-connect", connect_timeout=0.5)
    with pytest.raises(SidecarStartError, match=r"did not connect within 0.5 s"):
        silent.start()
    assert silent.returncode == -signal.SIGKILL
    assert_reaped(silent.pid)


def test_local_sidecar_version_mismatch_names_the_skewed_package():
    """The faulty worker claims another jax, as a sidecar image built for it would."""
    skewed = faulty("--report-versions", '{"jax": "0.4.35"}')
    with pytest.raises(SidecarVersionMismatch, match=r"jax: client \S+, worker 0.4.35") as caught:
        skewed.start()
    assert caught.value.mismatches == [f"jax: client {protocol.local_versions().jax}, worker 0.4.35"]
    assert_reaped(skewed.pid)


def test_local_sidecar_worker_speaking_another_wire_format_is_refused():
    """The faulty worker says hello in the previous format, as an image with another tpuplane would."""
    foreign = faulty("--fault", "foreign-hello")
    with pytest.raises(protocol.ProtocolError, match="another wire format"):
        foreign.start()
    assert_reaped(foreign.pid)


def test_local_sidecar_reply_with_wrong_request_id_is_a_protocol_error():
    with faulty("--fault", "wrong-reply-id") as confused:
        with pytest.raises(protocol.ProtocolError, match=r"reply to request 1 \(capability_probe\) carries id 2"):
            confused.probe()
        assert_reaped(confused.pid)


def test_local_sidecar_reply_with_an_earlier_id_is_a_protocol_error():
    """A cancelled call's worker is killed, so no late reply can ever be due: an earlier id is out of step too."""
    with faulty("--fault", "stale-reply-id") as confused:
        with pytest.raises(protocol.ProtocolError, match=r"reply to request 1 \(capability_probe\) carries id 0"):
            confused.probe()
        assert_reaped(confused.pid)


# -- abandoned calls: timeouts and interrupts ------------------------------------------------------------------


def test_local_sidecar_call_timeout_cancels_the_call_and_the_next_call_works(sidecar, tmp_path):
    marker = tmp_path / "in-call"
    assert sidecar.call(scale, [1]) == [1]  # `scale` is known to the first worker
    first = sidecar.pid
    with pytest.raises(SidecarTimeout, match=r"did not answer sleep_after_marker within 0.5 s; the call was cancelled"):
        sidecar.call(sleep_after_marker, str(marker), 60, "late", timeout=0.5)
    assert marker.exists()  # the call did start: it was cancelled, not refused
    assert running_processes(pid=first) == [] and assert_reaped(first) is None
    assert sidecar.call(scale, [4], factor=2) == [8]  # sent again to a new worker
    assert sidecar.pid != first


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), 1e300, "5", True])
def test_local_sidecar_timeout_that_is_no_time_limit_is_refused_before_sending(sidecar, timeout):
    with pytest.raises(ValueError, match=r"timeout: got .*allowed: None \(wait for ever\) or seconds above 0"):
        sidecar.call(scale, [1], timeout=timeout)
    assert sidecar.call(scale, [1]) == [1]


def test_local_sidecar_close_after_a_timeout_has_no_abandoned_call_to_wait_for(tmp_path):
    sidecar = LocalSidecar(shutdown_timeout=60).start()
    first = sidecar.pid
    with pytest.raises(SidecarTimeout):
        sidecar.call(sleep_after_marker, str(tmp_path / "in-call"), 60, timeout=0.5)
    assert running_processes(pid=first) == []  # nothing left that close() could wait for
    sidecar.close()
    assert sidecar.pid == first  # close() started no new worker


def test_local_sidecar_interrupted_call_is_cancelled_and_the_next_call_works(sidecar, tmp_path):
    """A real SIGINT to the main thread while it waits for the reply, as Ctrl-C in a notebook delivers it."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers can only be installed from the main thread")
    marker = tmp_path / "in-call"
    main_thread = threading.get_ident()
    first = sidecar.pid

    def interrupt_when_in_call():
        while not marker.exists():
            time.sleep(0.01)
        signal.pthread_kill(main_thread, signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupter = threading.Thread(target=interrupt_when_in_call)
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            sidecar.call(sleep_after_marker, str(marker), 60, "late")
    finally:
        interrupter.join()
        signal.signal(signal.SIGINT, previous)
    assert running_processes(pid=first) == []
    assert sidecar.call(scale, [4], factor=2) == [8]


def test_local_sidecar_timed_out_large_request_is_cancelled_mid_send(sidecar):
    """The worker is busy, so a 256 MiB request fills the socket buffers: the timeout cancels it half-sent."""
    with pytest.raises(SidecarTimeout):
        sidecar.call(sleep_then_return, 60, bytes(256 << 20), timeout=0.5)
    payload = os.urandom(1 << 20)
    assert sidecar.call(lambda data: data[::-1], payload) == payload[::-1]


# -- the client dies ---------------------------------------------------------------------------------------------


def marked_processes(session: str) -> list[int]:
    """Processes still running with this sidecar's session marker in their environment."""
    return marked_pids(SESSION_ENV, session)


@pytest.fixture
def dying_client(tmp_path):
    """Start tests/dying_sidecar_client.py; wait until its call has started its helpers; return (process, state)."""
    tests = str(Path(__file__).resolve().parent)
    started: list[subprocess.Popen] = []

    def start(*args: str):
        ready = tmp_path / "ready.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))}
        client = subprocess.Popen([sys.executable, str(Path(tests) / "dying_sidecar_client.py"), "--ready",
                                   str(ready), *args], env=env, stdin=subprocess.DEVNULL)
        started.append(client)
        assert poll_until(lambda: ready.exists() or client.poll() is not None), "the client never started its call"
        assert client.poll() is None, f"the client exited with {client.returncode} before its call started"
        state = json.loads(ready.read_text())
        assert set(marked_processes(state["session"])) >= {state["worker"], *state["helpers"]}
        return client, state

    yield start
    for client in started:
        if client.poll() is None:
            client.kill()
        client.wait()


@pytest.mark.parametrize("fault", ["no-watchdog", "no-parent-death-signal"],
                         ids=["parent-death signal alone", "connection watchdog alone"])
def test_local_sidecar_worker_and_its_helpers_die_with_a_client_killed_mid_call(dying_client, fault):
    client, state = dying_client("--fault", fault)
    client.kill()  # SIGKILL: the client runs no cleanup at all
    client.wait()
    assert poll_until(lambda: not marked_processes(state["session"])), marked_processes(state["session"])


def test_local_sidecar_worker_and_its_helpers_die_with_an_uncaught_ctrl_c_outside_with(dying_client):
    client, state = dying_client("--outside-with")
    client.send_signal(signal.SIGINT)
    assert client.wait() != 0
    assert poll_until(lambda: not marked_processes(state["session"])), marked_processes(state["session"])


def test_local_sidecar_worker_started_from_a_thread_that_ends_lives_on():
    """The parent-death signal follows the thread that forked: the worker must not die with a short-lived one."""
    made: list[LocalSidecar] = []
    starter = threading.Thread(target=lambda: made.append(LocalSidecar().start()))
    starter.start()
    starter.join()
    with made[0] as sidecar:
        assert sidecar.call(scale, [3]) == [3]
        assert running_processes(pid=sidecar.pid) == [sidecar.pid]


# -- what a worker gets, whatever the client does ----------------------------------------------------------------


def stdin_of_this_process() -> str:
    return os.readlink("/proc/self/fd/0")


def test_local_sidecar_worker_reads_nothing_of_the_clients_stdin(sidecar):
    assert sidecar.call(stdin_of_this_process) == "/dev/null"


def print_then_die(text: str) -> None:
    print(text)
    os._exit(3)


def test_local_sidecar_worker_output_is_not_lost_when_it_dies(capfd, monkeypatch):
    """The worker writes to the client's stdout: a file here, which Python would buffer by blocks."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # the worker must not depend on the client's setting
    with LocalSidecar() as sidecar, pytest.raises(SidecarDied):
        sidecar.call(print_then_die, "last words before dying")
    assert "last words before dying" in capfd.readouterr().out


def test_local_sidecar_calls_from_several_threads_each_get_their_own_result(sidecar):
    barrier = threading.Barrier(4)
    results: dict[int, list] = {}

    def caller(index: int) -> None:
        barrier.wait()
        results[index] = [sidecar.call(sleep_then_return, 0.01, (index, round_)) for round_ in range(10)]

    threads = [threading.Thread(target=caller, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {index: [(index, round_) for round_ in range(10)] for index in range(4)}


def test_local_sidecar_timeout_counts_the_wait_for_another_threads_call(sidecar, tmp_path):
    marker = tmp_path / "in-call"
    busy = threading.Thread(target=lambda: sidecar.call(sleep_after_marker, str(marker), 2))
    busy.start()
    try:
        assert poll_until(marker.exists)
        with pytest.raises(SidecarTimeout, match="another thread's request"):
            sidecar.call(scale, [1], timeout=0.1)
    finally:
        busy.join()
    assert sidecar.call(scale, [2]) == [2]


@colocated_python
def double_on_the_host(x):
    return x * 2


def test_local_sidecar_runs_the_function_a_colocated_python_decorator_wraps(sidecar):
    assert np.array_equal(sidecar.call(double_on_the_host, np.arange(4)), np.arange(4) * 2)


def test_local_sidecar_runs_the_function_tpuplanes_colocated_wraps(sidecar):
    assert sidecar.call(colocated(scale), [1, 2], factor=2) == [2, 4]


def test_local_sidecar_result_the_client_cannot_import_names_the_function_and_the_class(tmp_path):
    (tmp_path / "only_in_the_worker.py").write_text("class Reading:\n    pass\n")
    with LocalSidecar(env={"PYTHONPATH": str(tmp_path)}) as sidecar:
        with pytest.raises(SidecarResultError, match=r"the result of make_reading came back .*No module named "
                                                     r"'only_in_the_worker'.*refers to only_in_the_worker.Reading"):
            sidecar.call(make_reading)
        assert sidecar.call(scale, [1]) == [1]  # the reply was read whole: the sidecar goes on


def make_reading():
    import only_in_the_worker

    return only_in_the_worker.Reading()


def fork_and_return():
    return os.fork()


def test_local_sidecar_function_whose_forked_child_returns_too_is_a_clear_error(sidecar):
    """The child returns right after the worker answered, or a little later: the error comes with that call or with
    a later one, never as a reply out of step."""
    worker = sidecar.pid
    outcome: list[RemoteError] = []

    def call_failed(fn) -> bool:
        try:
            sidecar.call(fn)
        except RemoteError as error:
            outcome.append(error)
        return bool(outcome)

    assert call_failed(fork_and_return) or poll_until(lambda: call_failed(os.getpid))
    (error,) = outcome
    assert error.phase == "fork" and "fork_and_return returned twice" in str(error) and "os._exit()" in str(error)
    assert sidecar.pid == worker and sidecar.call(scale, [5]) == [5]  # the same worker goes on, in step
    assert running_processes(group=worker) == [worker]  # the child that returned is gone


def fork_child_that_exits_with_sys_exit():
    if os.fork() == 0:
        sys.exit(0)
    return "parent"


def test_local_sidecar_forked_child_ending_with_sys_exit_is_no_error(sidecar):
    assert [sidecar.call(fork_child_that_exits_with_sys_exit) for _ in range(3)] == ["parent"] * 3
    assert sidecar.call(scale, [1]) == [1]


# -- lifecycle ---------------------------------------------------------------------------------------------------


def test_local_sidecar_close_is_idempotent_and_reaps_the_worker():
    sidecar = LocalSidecar().start()
    pid = sidecar.pid
    sidecar.close()
    sidecar.close()
    assert sidecar.returncode == 0  # it obeyed shutdown rather than being killed
    assert_reaped(pid)


def test_local_sidecar_call_before_start_explains_how_to_start():
    with pytest.raises(SidecarError, match="not started"):
        LocalSidecar().call(scale, [1])


# -- run_target and the CLI --------------------------------------------------------------------------------------


def test_run_target_runs_an_importable_function():
    assert run_target("operator:add", 2, 3) == 5


def test_run_target_rejects_a_target_without_function():
    with pytest.raises(ValueError, match="module:function"):
        run_target("operator")


@pytest.fixture
def cli():
    app = typer.Typer()
    app.command()(sidecar_run_command)
    return lambda *args: CliRunner().invoke(app, list(args))


def test_sidecar_run_command_prints_the_result_repr(cli):
    result = cli("json:loads", "[1, 2]")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "[1, 2]"


def test_sidecar_run_command_exits_1_with_remote_traceback(cli):
    result = cli("json:loads", "{")
    assert result.exit_code == 1
    assert "json.decoder.JSONDecodeError" in result.stderr and "Traceback" in result.stderr


# -- the pytest plugin -------------------------------------------------------------------------------------------


def _plugin_args() -> list[str]:
    """Load the plugin by module unless it is already installed as the `tpuplane` pytest11 entry point."""
    registered = metadata.entry_points(group="pytest11", name="tpuplane")
    return [] if registered else ["-p", "tpuplane.runtime.pytest_plugin"]


def test_pytest_plugin_local_sidecar_fixture_catches_pickling_errors(pytester):
    pytester.makepyfile(
        """
        import os
        import threading

        import pytest

        from tpuplane.runtime.local_sidecar import SidecarPicklingError

        def double(x):
            return 2 * x

        def test_function_of_this_module_runs_out_of_process(local_sidecar):
            assert local_sidecar.call(double, 21) == 42
            assert local_sidecar.call(os.getpid) != os.getpid()

        def test_closure_over_a_lock_fails_before_deploying(local_sidecar):
            lock = threading.Lock()
            with pytest.raises(SidecarPicklingError, match="'lock'"):
                local_sidecar.call(lambda: lock)
        """
    )
    pytester.runpytest(*_plugin_args()).assert_outcomes(passed=2)


def test_pytest_plugin_reaps_the_worker_after_each_test(pytester):
    pytester.makepyfile(
        """
        pids = []

        def test_one(local_sidecar):
            pids.append(local_sidecar.pid)

        def test_two(local_sidecar):
            import os
            pids.append(local_sidecar.pid)
            try:
                os.waitpid(pids[0], os.WNOHANG)
            except ChildProcessError:
                pass
            else:
                raise AssertionError("the first test's worker was not reaped")
            assert pids[0] != pids[1]
        """
    )
    pytester.runpytest(*_plugin_args()).assert_outcomes(passed=2)


def test_pytest_plugin_starts_without_cloudpickle_and_the_fixture_says_what_to_install(tmp_path):
    """An environment without the `runtime` extra: pytest still starts; only a test taking the fixture fails."""
    (tmp_path / "test_uses_sidecar.py").write_text(textwrap.dedent(
        """
        def test_without_the_fixture():
            pass

        def test_with_the_fixture(local_sidecar):
            pass
        """
    ))
    pytest_args = ["-p", "no:cacheprovider", "-p", "no:xdist", *_plugin_args(), "test_uses_sidecar.py"]
    run_pytest_without_cloudpickle = (
        "import sys\n"
        "sys.modules['cloudpickle'] = None  # makes `import cloudpickle` fail, as when it is not installed\n"
        "import pytest\n"
        f"sys.exit(pytest.main({pytest_args!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", run_pytest_without_cloudpickle], cwd=tmp_path,
                            capture_output=True, text=True)
    assert "1 passed, 1 error" in result.stdout, result.stdout + result.stderr
    assert "ImportError" in result.stdout and "pip install 'tpuplane[runtime]'" in result.stdout


# -- whatever a function does, it cannot outlive the sidecar, break it, or flood it --------------------------------


def _alive(pid: int) -> bool:
    """Running (a zombie has exited: it only waits for its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_dead(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid)


def start_session_helper() -> int:
    """A helper in a session of its own, as `start_new_session=True` makes it: outside the worker's group."""
    return subprocess.Popen(["sleep", "600"], start_new_session=True, stdout=subprocess.DEVNULL).pid


def start_double_forked_helper() -> int:
    """A daemon-style helper: `setsid` in a background job of a shell that exits at once (an orphan)."""
    out = subprocess.run(["sh", "-c", "setsid sleep 600 >/dev/null 2>&1 & echo $!"], capture_output=True,
                         text=True, check=True)
    return int(out.stdout)


def start_helper_then_die(pid_file: str) -> None:
    """A helper outside the group, then the worker killed hard: it never gets to clean up after itself."""
    Path(pid_file).write_text(str(start_double_forked_helper()))
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize("start", [start_session_helper, start_double_forked_helper])
def test_local_sidecar_close_kills_helpers_that_left_the_workers_session(start):
    with LocalSidecar() as sidecar:
        helper = sidecar.call(start)
        assert _alive(helper)
    assert _wait_dead(helper)


def test_local_sidecar_close_kills_helpers_of_a_worker_that_was_killed_hard(tmp_path):
    pid_file = tmp_path / "helper.pid"
    sidecar = LocalSidecar().start()
    with pytest.raises(SidecarDied):
        sidecar.call(start_helper_then_die, str(pid_file))
    sidecar.close()
    assert _wait_dead(int(pid_file.read_text()))


class UnprintableError(Exception):
    def __str__(self):
        raise RuntimeError("__str__ is broken too")


def raise_unprintable():
    raise UnprintableError()


def raise_huge(size):
    raise ValueError("x" * size)


def test_local_sidecar_exception_whose_str_raises_comes_back_as_remote_error(sidecar):
    with pytest.raises(RemoteError) as caught:
        sidecar.call(raise_unprintable)
    assert caught.value.exc_type.endswith("UnprintableError")
    assert "str() of the exception failed" in caught.value.remote_message
    assert sidecar.call(scale, [1]) == [1]  # the worker lives on


def test_local_sidecar_exception_message_over_a_megabyte_is_cut_not_fatal(sidecar):
    with pytest.raises(RemoteError) as caught:
        sidecar.call(raise_huge, 3 << 20)
    assert len(caught.value.remote_message) < 100_000
    assert "more characters cut by the sidecar worker" in caught.value.remote_message
    assert sidecar.call(scale, [2]) == [2]


def test_local_sidecar_exception_message_of_wide_characters_is_cut_not_fatal(sidecar):
    """JSON escapes each of these characters to 12 bytes: the cut message and traceback must still fit a reply."""
    with pytest.raises(RemoteError) as caught:
        sidecar.call(raise_huge_wide, 1 << 20)
    assert "more characters cut by the sidecar worker" in caught.value.remote_message
    assert sidecar.call(scale, [2]) == [2]


def raise_huge_wide(size):
    raise ValueError("\U0001F600" * size)


class HugeRepr:
    def __repr__(self):
        return "r" * (2 << 20)

    def __call__(self):
        os._exit(3)


def test_local_sidecar_died_message_stays_short_whatever_the_callables_repr(sidecar):
    with pytest.raises(SidecarDied) as caught:
        sidecar.call(HugeRepr())
    assert len(str(caught.value)) < 2000


def test_sidecar_worker_ships_no_test_switches():
    help_text = subprocess.run([sys.executable, "-m", "tpuplane.runtime.sidecar_worker", "--help"],
                               capture_output=True, text=True, check=True).stdout
    assert "--connect" in help_text
    assert "--fault" not in help_text and "--report-versions" not in help_text


def make_counter():
    count = 0

    def counter():
        nonlocal count
        count += 1
        return count
    return counter


def test_local_sidecar_two_equal_closures_keep_their_own_state(sidecar):
    """Two function objects with the same pickle are two functions in the worker, as in the client."""
    first, second = make_counter(), make_counter()
    assert [sidecar.call(first), sidecar.call(first), sidecar.call(second), sidecar.call(first)] == [1, 2, 1, 3]
