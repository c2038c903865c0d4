"""connect(): validation, the proxy Job's life, readiness diagnosis, the supervised port-forward, and cleanup.

A Kubernetes API server cannot exist here, so every test talks to `FakeKube`: an in-memory stand-in implementing
the methods of `tpuplane.runtime.kube.KubeApi`, raising the client's real `ApiException` when a fault is injected.
The port-forward is real: a real subprocess (`fake kubectl`, a tiny Python script given as `kubectl=`) that
listens on the local port it is asked for, which tests kill to play a dying `kubectl port-forward`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from kubernetes.client import ApiException
from rich.console import Console

from tpuplane.infra import proxy
from tpuplane.infra.errors import ConfigError
from tpuplane.runtime import connect as connect_module
from tpuplane.runtime.connect import ConnectError, ProxyNotReady, connect, describe_pod, recent_events
from tpuplane.runtime.janitor import stale_proxies

SERVICE = "pathways-service-pathways-head-0-0.pathways-service:29001"

READY = {"phase": "Running",
         "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
         "containerStatuses": [{"name": "pathways-proxy", "ready": True, "state": {"running": {}}}]}
SCHEDULING = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
              "containerStatuses": [{"name": "pathways-proxy", "state": {"waiting": {"reason": "ContainerCreating"}}}]}
UNSCHEDULABLE = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                     "message": "0/3 nodes are available: 3 Insufficient cpu."}]}
PULL_BACKOFF = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{"name": "pathways-proxy", "state": {"waiting": {
                    "reason": "ImagePullBackOff", "message": 'Back-off pulling image "proxy_server:nope"'}}}]}
CRASH_LOOP = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}],
              "containerStatuses": [{"name": "pathways-proxy", "state": {"waiting": {
                  "reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container"}}}]}
FAILED_SCHEDULING_EVENT = {"type": "Warning", "reason": "FailedScheduling", "count": 4,
                           "lastTimestamp": "2026-01-01T00:00:05Z",
                           "message": "0/3 nodes are available: 3 Insufficient cpu. preemption: not helpful"}


def api_error(status: int, reason: str, message: str = "") -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps({"message": message}) if message else None
    return error


class FakeKube:
    """In-memory stand-in for `KubeApi` (no API server can exist here). Thread-safe: the heartbeat patches from
    its own thread. `pod_states` are the pod statuses successive polls see (the last one repeats); `hooks` run on
    a call, outside the lock, so a hook may send a signal whose handler calls back in."""

    def __init__(self, pod_states=(READY,), context_namespace=None, events=()):
        self.jobs: dict[tuple[str, str], dict] = {}
        self.calls: list[tuple[str, str]] = []  # (method, namespace)
        self.pod_states = list(pod_states)
        self.events = list(events)
        self.polls = 0
        self.patches = 0
        self.create_errors: list[ApiException] = []
        self.delete_errors: list[ApiException] = []
        self.hooks: dict[str, callable] = {}
        self._context_namespace = context_namespace
        self._lock = threading.Lock()

    def context_namespace(self):
        return self._context_namespace

    def _called(self, method, namespace):
        with self._lock:
            self.calls.append((method, namespace))
        if method in self.hooks:
            self.hooks[method]()

    def create_job(self, namespace, manifest):
        self._called("create_job", namespace)
        if self.create_errors:
            raise self.create_errors.pop(0)
        with self._lock:
            self.jobs[(namespace, manifest["metadata"]["name"])] = json.loads(json.dumps(manifest))

    def delete_job(self, namespace, name):
        self._called("delete_job", namespace)
        if self.delete_errors:
            raise self.delete_errors.pop(0)
        with self._lock:
            if self.jobs.pop((namespace, name), None) is None:
                raise api_error(404, "Not Found")

    def patch_job_annotations(self, namespace, name, annotations):
        self._called("patch_job_annotations", namespace)
        with self._lock:
            if (namespace, name) not in self.jobs:
                raise api_error(404, "Not Found")
            self.jobs[(namespace, name)]["metadata"]["annotations"].update(annotations)
            self.patches += 1

    def list_jobs(self, namespace, label_selector):
        with self._lock:
            return [json.loads(json.dumps(job)) for (ns, _), job in self.jobs.items() if namespace in (None, ns)]

    def list_pods(self, namespace, label_selector):
        self._called("list_pods", namespace)
        job_name = label_selector.removeprefix("job-name=")
        with self._lock:
            if (namespace, job_name) not in self.jobs:
                return []
            status = self.pod_states[min(self.polls, len(self.pod_states) - 1)]
            self.polls += 1
        return [{"metadata": {"name": f"{job_name}-x7k2p", "namespace": namespace,
                              "creationTimestamp": "2026-01-01T00:00:00Z"}, "status": status}]

    def list_events(self, namespace, involved_object):
        self._called("list_events", namespace)
        return list(self.events) if involved_object.endswith("-x7k2p") else []


FAKE_KUBECTL = textwrap.dedent("""\
    import json, os, socket, sys
    argv = sys.argv[1:]
    with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
        log.write(json.dumps(argv) + "\\n")
    if os.environ.get("FAKE_KUBECTL_FAIL"):
        print("error: unable to forward port because pod is not running", file=sys.stderr, flush=True)
        sys.exit(1)
    local = int(argv[-1].split(":")[0])
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", local))
    server.listen()
    print(f"fake kubectl: listening on 127.0.0.1:{local}", file=sys.stderr, flush=True)
    while True:
        server.accept()[0].close()
""")


@pytest.fixture
def kubectl(tmp_path: Path, monkeypatch) -> Path:
    """A real executable standing in for `kubectl port-forward`; its argv lines land in `<path>.log`."""
    script = tmp_path / "kubectl"
    script.write_text(f"#!{sys.executable}\n{FAKE_KUBECTL}")
    script.chmod(0o755)
    monkeypatch.setenv("FAKE_KUBECTL_LOG", str(tmp_path / "kubectl.log"))
    return script


def forwarder_argvs(kubectl: Path) -> list[list[str]]:
    log = kubectl.parent / "kubectl.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture(autouse=True)
def clean_jax_env(monkeypatch):
    for name in connect_module.JAX_SETTINGS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def console() -> Console:
    return Console(file=open(os.devnull, "w"), force_terminal=False)


def session_of(kube, kubectl, console, **overrides):
    arguments = dict(pathways_service=SERVICE, tpus={"v6e-4": 2}, gcs_bucket="gs://scratch-bucket/tmp",
                     kube=kube, kubectl=str(kubectl), console=console, timeout=5)
    arguments.update(overrides)
    return connect(**arguments)


def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# ---- validation ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides, path", [
    ({"pathways_service": "pathways-head:29001:1"}, "pathways_service"),
    ({"pathways_service": "Pathways-Head:29001"}, "pathways_service"),
    ({"pathways_service": "pathways-head:0"}, "pathways_service"),
    ({"pathways_service": "pathways-head:65536"}, "pathways_service"),
    ({"pathways_service": "pathways_head:29001"}, "pathways_service"),
    ({"tpus": {"v6e-3": 1}}, "tpus['v6e-3']"),
    ({"tpus": {"tpuv6e:3x3": 1}}, "tpus['tpuv6e:3x3']"),
    ({"tpus": {"v6e-4": 0}}, "tpus['v6e-4']"),
    ({"tpus": {"v6e-4": True}}, "tpus['v6e-4']"),
    ({"tpus": {}}, "tpus"),
    ({"tpus": {"v6e-4": 1, "tpuv6e:2x2": 1}}, "tpus['tpuv6e:2x2']"),
    ({"gcs_bucket": "gs://ab"}, "gcs_bucket"),
    ({"gcs_bucket": "gs://My-Bucket"}, "gcs_bucket"),
    ({"gcs_bucket": "gs://-bucket"}, "gcs_bucket"),
    ({"gcs_bucket": "gs://192.168.1.10"}, "gcs_bucket"),
    ({"gcs_bucket": "gs://google-scratch"}, "gcs_bucket"),
    ({"gcs_bucket": "gs://" + "a" * 64}, "gcs_bucket"),
    ({"proxy_options": ["sidecar"]}, "proxy_options[0]"),
    ({"proxy_options": ["colour:blue"]}, "proxy_options[0]"),
    ({"proxy_options": ["sidecar:yes"]}, "proxy_options[0]"),
    ({"proxy_options": ['xla_flags:"--tpu_foo=1"']}, "proxy_options[0]"),
    ({"proxy_options": ["sidecar:true", "SIDECAR:false"]}, "proxy_options[1]"),
    ({"proxy_options": "sidecar:true"}, "proxy_options"),
    ({"proxy_image": "Not An Image"}, "proxy_image"),
    ({"namespace": "Team_A"}, "namespace"),
    ({"timeout": 0}, "timeout"),
    ({"heartbeat_interval": -1}, "heartbeat_interval"),
    ({"max_lifetime": 3, "timeout": 10}, "max_lifetime"),
])
def test_connect_rejects_bad_input_before_creating_anything(overrides, path, kubectl, console):
    kube = FakeKube()
    with pytest.raises(ConfigError) as raised:
        session_of(kube, kubectl, console, **overrides)
    assert [problem.path for problem in raised.value.problems] == [path]
    assert kube.calls == []


def test_connect_lists_every_bad_parameter_at_once(kubectl, console):
    with pytest.raises(ConfigError) as raised:
        session_of(FakeKube(), kubectl, console, pathways_service="x", tpus={"v9z-4": 1}, gcs_bucket="g")
    assert [p.path for p in raised.value.problems] == ["pathways_service", "tpus['v9z-4']", "gcs_bucket"]


@pytest.mark.parametrize("tpus, expected", [
    ({"v6e-4": 2}, "tpuv6e:2x2,tpuv6e:2x2"),
    ({"tpuv6e:2x2": 1, "v5p-8": 1}, "tpuv6e:2x2,tpuv5:2x2x1"),
    ({"v5litepod-16": 1}, "tpuv5e:4x4"),
    ({"tpu7x-8": 1}, "tpu7x:2x2x1"),
])
def test_connect_asks_for_virtual_slices_by_pathways_instance_type(tpus, expected, kubectl, console):
    kube = FakeKube()
    with session_of(kube, kubectl, console, tpus=tpus):
        (job,) = kube.jobs.values()
        args = job["spec"]["template"]["spec"]["containers"][0]["args"]
        assert f"--virtual_slices={expected}" in args


# ---- the happy path -----------------------------------------------------------------------------------------------


def test_connect_sets_jax_target_then_removes_everything(kubectl, console):
    import jax

    kube = FakeKube(pod_states=[SCHEDULING, READY])
    previous_term = signal.getsignal(signal.SIGTERM)
    with session_of(kube, kubectl, console) as session:
        port, pid = session.local_port, session.forwarder.pid
        assert os.environ["JAX_PLATFORMS"] == "proxy"
        assert os.environ["JAX_BACKEND_TARGET"] == f"grpc://localhost:{port}"
        assert jax.config.jax_platforms == "proxy"
        assert accepts(port)
        assert len(kube.jobs) == 1
    assert kube.jobs == {}
    assert "JAX_PLATFORMS" not in os.environ and "JAX_BACKEND_TARGET" not in os.environ
    assert jax.config.jax_platforms is None
    assert process_gone(pid)
    assert signal.getsignal(signal.SIGTERM) == previous_term


def test_connect_restores_previous_jax_environment(kubectl, console, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    with session_of(FakeKube(), kubectl, console):
        assert os.environ["JAX_PLATFORMS"] == "proxy"
    assert os.environ["JAX_PLATFORMS"] == "cpu"
    assert "JAX_BACKEND_TARGET" not in os.environ


def test_connect_uses_one_namespace_from_the_kube_context(kubectl, console):
    kube = FakeKube(context_namespace="team-a")
    with session_of(kube, kubectl, console) as session:
        assert session.namespace == "team-a"
    assert {namespace for _, namespace in kube.calls} == {"team-a"}
    (argv,) = forwarder_argvs(kubectl)
    assert argv[argv.index("--namespace") + 1] == "team-a"


def test_connect_namespace_argument_beats_the_context(kubectl, console):
    kube = FakeKube(context_namespace="team-a")
    with session_of(kube, kubectl, console, namespace="team-b", context="gke_p_z_c"):
        pass
    assert {namespace for _, namespace in kube.calls} == {"team-b"}
    (argv,) = forwarder_argvs(kubectl)
    assert argv[argv.index("--namespace") + 1] == "team-b"
    assert argv[argv.index("--context") + 1] == "gke_p_z_c"


def test_connect_namespace_defaults_to_default(kubectl, console):
    kube = FakeKube()
    with session_of(kube, kubectl, console) as session:
        assert session.namespace == "default"


def test_connect_proxy_job_is_labelled_named_and_bounded(kubectl, console):
    kube = FakeKube()
    before = int(time.time())
    with session_of(kube, kubectl, console, max_lifetime=7200) as session:
        ((namespace, name), job), = kube.jobs.items()
        assert name == session.job_name
        assert name.startswith(proxy.PROXY_NAME_PREFIX + "-") and len(name) <= 63
        assert job["metadata"]["labels"] == proxy.PROXY_LABELS
        assert job["spec"]["activeDeadlineSeconds"] == 7200
        assert job["spec"]["ttlSecondsAfterFinished"] > 0
        assert int(job["metadata"]["annotations"][proxy.HEARTBEAT_ANNOTATION]) >= before


def test_connect_renews_the_heartbeat_until_exit(kubectl, console):
    kube = FakeKube()
    with session_of(kube, kubectl, console, heartbeat_interval=0.05):
        wait_until(lambda: kube.patches >= 2)
    beats = kube.patches
    time.sleep(0.2)
    assert kube.patches == beats


# ---- readiness ----------------------------------------------------------------------------------------------------


def test_connect_gives_up_on_an_unschedulable_pod_with_reason_and_events(kubectl, console):
    kube = FakeKube(pod_states=[UNSCHEDULABLE], events=[FAILED_SCHEDULING_EVENT])
    with pytest.raises(ProxyNotReady) as raised:
        with session_of(kube, kubectl, console, timeout=0.5):
            pass
    message = str(raised.value)
    assert "not Ready after 0.5s" in message and "unschedulable" in message
    assert "Warning FailedScheduling: 0/3 nodes are available: 3 Insufficient cpu." in message
    assert kube.jobs == {}


def test_connect_times_out_naming_an_image_pull_error(kubectl, console):
    kube = FakeKube(pod_states=[PULL_BACKOFF])
    with pytest.raises(ProxyNotReady, match=r"(?s)image pull error.*ImagePullBackOff"):
        with session_of(kube, kubectl, console, timeout=0.5):
            pass
    assert kube.jobs == {}


def test_connect_fails_fast_on_a_crash_loop(kubectl, console):
    kube = FakeKube(pod_states=[CRASH_LOOP])
    started = time.monotonic()
    with pytest.raises(ProxyNotReady, match="crash loop"):
        with session_of(kube, kubectl, console, timeout=30):
            pass
    assert time.monotonic() - started < 10
    assert kube.jobs == {}


@pytest.mark.parametrize("pod, phase, fatal", [
    (None, "creating pod", False),
    ({"status": UNSCHEDULABLE}, "unschedulable", False),
    ({"status": PULL_BACKOFF}, "image pull error", False),
    ({"status": CRASH_LOOP}, "crash loop", True),
    ({"status": {"phase": "Failed", "containerStatuses": [{"name": "pathways-proxy", "state": {
        "terminated": {"exitCode": 1, "reason": "Error"}}}]}}, "crashed", True),
    ({"status": READY}, "ready", False),
])
def test_describe_pod_names_the_phase(pod, phase, fatal):
    progress = describe_pod(pod)
    assert (progress.phase, progress.fatal, progress.ready) == (phase, fatal, phase == "ready")


def test_recent_events_keeps_the_newest_trimmed():
    events = [{"type": "Normal", "reason": f"R{i}", "message": "m" * 500, "lastTimestamp": f"2026-01-01T00:00:{i:02d}Z"}
              for i in range(12)]
    lines = recent_events(events, limit=3, width=40)
    assert [line.split(":")[0] for line in lines] == ["Normal R9", "Normal R10", "Normal R11"]
    assert all(len(line) == 40 and line.endswith("...") for line in lines)


# ---- the port-forward ---------------------------------------------------------------------------------------------


def test_connect_restarts_a_dead_forwarder_once_on_the_same_port(kubectl, console):
    kube = FakeKube()
    with session_of(kube, kubectl, console) as session:
        first = session.forwarder.pid
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: session.forwarder.pid != first and accepts(session.local_port))
        session.check()
        assert os.environ["JAX_BACKEND_TARGET"] == f"grpc://localhost:{session.local_port}"
    assert len(forwarder_argvs(kubectl)) == 2
    assert kube.jobs == {}


def test_connect_reports_a_forwarder_that_dies_twice(kubectl, console):
    kube = FakeKube()
    with pytest.raises(ConnectError) as raised:
        with session_of(kube, kubectl, console) as session:
            first = session.forwarder.pid
            os.kill(first, signal.SIGKILL)
            wait_until(lambda: session.forwarder.pid != first and accepts(session.local_port))
            os.kill(session.forwarder.pid, signal.SIGKILL)
            wait_until(lambda: session.forwarder.failure is not None)
            with pytest.raises(ConnectError, match="restart budget is spent"):
                session.check()
    message = str(raised.value)
    assert "exited with code -9; then exited with code -9" in message
    assert "fake kubectl: listening on 127.0.0.1" in message  # the stderr tail
    assert kube.jobs == {}


def test_connect_fails_clearly_when_the_forwarder_cannot_start(kubectl, console, monkeypatch):
    monkeypatch.setenv("FAKE_KUBECTL_FAIL", "1")
    kube = FakeKube()
    with pytest.raises(ConnectError, match=r"(?s)exited with code 1; then exited with code 1.*pod is not running"):
        with session_of(kube, kubectl, console):
            pass
    assert kube.jobs == {}
    assert "JAX_PLATFORMS" not in os.environ


# ---- signals and interpreter exit ---------------------------------------------------------------------------------


class Terminated(Exception):
    pass


@pytest.fixture
def restore_signals():
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_connect_sigterm_during_wait_cleans_up_then_runs_the_previous_handler(kubectl, console, restore_signals):
    seen = []

    def previous(signum, frame):
        seen.append(signum)
        raise Terminated

    signal.signal(signal.SIGTERM, previous)
    kube = FakeKube(pod_states=[SCHEDULING])
    kube.hooks["list_pods"] = lambda: os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(Terminated):
        with session_of(kube, kubectl, console):
            pass
    assert seen == [signal.SIGTERM]
    assert kube.jobs == {}
    assert signal.getsignal(signal.SIGTERM) is previous
    assert forwarder_argvs(kubectl) == []


def test_connect_sigterm_with_default_handler_exits_143_after_cleanup(kubectl, console, restore_signals):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    kube = FakeKube(pod_states=[SCHEDULING])
    kube.hooks["list_pods"] = lambda: os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(SystemExit) as raised:
        with session_of(kube, kubectl, console):
            pass
    assert raised.value.code == 128 + signal.SIGTERM
    assert kube.jobs == {}
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_connect_sigint_inside_the_session_is_a_keyboard_interrupt_after_cleanup(kubectl, console, restore_signals):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    kube = FakeKube()
    with pytest.raises(KeyboardInterrupt):
        with session_of(kube, kubectl, console) as session:
            pid = session.forwarder.pid
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler runs between bytecodes, long before this ends
    assert kube.jobs == {}
    assert process_gone(pid)
    assert "JAX_PLATFORMS" not in os.environ


CHILD = textwrap.dedent("""\
    import json, sys
    from rich.console import Console
    from tpuplane.runtime.connect import connect

    class FileKube:
        '''Stand-in for KubeApi (no API server here) that keeps its Jobs in a JSON file the test reads.'''
        def __init__(self, path): self.path = path; self._save({})
        def _load(self): return json.load(open(self.path))
        def _save(self, jobs): json.dump(jobs, open(self.path, "w"))
        def context_namespace(self): return None
        def create_job(self, ns, manifest): self._save({**self._load(), manifest["metadata"]["name"]: manifest})
        def delete_job(self, ns, name): jobs = self._load(); jobs.pop(name); self._save(jobs)
        def patch_job_annotations(self, ns, name, annotations): pass
        def list_pods(self, ns, selector):
            return [{"metadata": {"name": "p"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}]
        def list_events(self, ns, name): return []

    session = connect("svc:29001", {"v6e-4": 1}, "scratch-bucket", kube=FileKube(sys.argv[1]), kubectl=sys.argv[2],
                      console=Console(stderr=True))
    session.__enter__()
    print(session.forwarder.pid, flush=True)
    # leave without __exit__: only the atexit hook can clean up now
""")


def test_connect_cleans_up_at_interpreter_exit(tmp_path, kubectl):
    state = tmp_path / "jobs.json"
    child = subprocess.run([sys.executable, "-c", CHILD, str(state), str(kubectl)], capture_output=True, text=True,
                           timeout=60)
    assert child.returncode == 0, child.stderr
    assert json.loads(state.read_text()) == {}
    assert process_gone(int(child.stdout.split()[0]))


# ---- API errors ---------------------------------------------------------------------------------------------------


def test_connect_forbidden_create_is_a_clear_error_with_nothing_to_clean(kubectl, console):
    kube = FakeKube()
    kube.create_errors.append(api_error(403, "Forbidden", 'jobs.batch is forbidden: User "me" cannot create'))
    with pytest.raises(ConnectError, match=r"403 Forbidden: jobs.batch is forbidden.*Hint: your account needs"):
        with session_of(kube, kubectl, console):
            pass
    assert [method for method, _ in kube.calls] == ["create_job"]
    assert kube.jobs == {}


def test_connect_retries_a_failing_delete(kubectl, console):
    kube = FakeKube()
    kube.delete_errors.extend([api_error(500, "Internal Server Error"), api_error(503, "Service Unavailable")])
    with session_of(kube, kubectl, console):
        pass
    assert [method for method, _ in kube.calls].count("delete_job") == 3
    assert kube.jobs == {}


def test_connect_reports_an_undeletable_proxy_for_the_janitor(kubectl, console):
    kube = FakeKube()
    kube.delete_errors.extend([api_error(500, "Internal Server Error")] * 4)
    with pytest.raises(ConnectError) as raised:
        with session_of(kube, kubectl, console) as session:
            name = session.job_name
    message = str(raised.value)
    assert name in message and "500 Internal Server Error" in message and "tpuplane janitor" in message
    later = time.time() + proxy.DEFAULT_STALE_AFTER_SECONDS + 1
    assert [p.name for p in stale_proxies(kube.list_jobs(None, proxy.PROXY_LABEL_SELECTOR), later,
                                          proxy.DEFAULT_STALE_AFTER_SECONDS)] == [name]


def test_connect_close_is_idempotent(kubectl, console):
    kube = FakeKube()
    session = session_of(kube, kubectl, console)
    with session:
        session.close()
        session.close()
        assert kube.jobs == {}
    assert [method for method, _ in kube.calls].count("delete_job") == 1


# ---- the real client wrapper --------------------------------------------------------------------------------------

KUBECONFIG = textwrap.dedent("""\
    apiVersion: v1
    kind: Config
    clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
    users: [{name: u, user: {token: not-a-secret}}]
    contexts:
    - {name: plain, context: {cluster: c, user: u}}
    - {name: team, context: {cluster: c, user: u, namespace: team-a}}
    current-context: plain
""")


@pytest.mark.parametrize("context, namespace", [(None, None), ("team", "team-a"), ("plain", None)])
def test_kube_api_reads_the_namespace_of_the_chosen_context(tmp_path, monkeypatch, context, namespace):
    """Reads a real kubeconfig file; no request is sent (no API server can exist here)."""
    from tpuplane.runtime.kube import KubeApi

    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert KubeApi.from_context(context).context_namespace() == namespace
