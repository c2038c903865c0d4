"""connect(): validation, the proxy Job's life, readiness diagnosis, the supervised port-forward, and cleanup.

A Kubernetes API server cannot exist here, so every test talks to `FakeKube`: an in-memory stand-in implementing
the methods of `tpuplane.runtime.kube.KubeApi`, raising the client's real `ApiException` (or `ApiUnreachable`)
when a fault is injected, and holding the service's JobSet as rendered by `tpuplane.infra.pathways.service`.
The port-forward is real: a real subprocess (`fake kubectl`, a tiny Python script given as `kubectl=`) that
listens on the local port it is asked for, which tests kill to play a dying `kubectl port-forward`.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from importlib import metadata
from pathlib import Path

import cpu_jax  # noqa: F401 (JAX on 8 CPU devices, set before any backend exists)
import pytest
from kubernetes.client import ApiException
from rich.console import Console

from tpuplane.infra.pathways import proxy
from tpuplane.infra.fleet.catalog import resolve_tpu_type
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.pathways.service import pathways_service_address, render_pathways_service_jobset
from fake_kubectl import forwarder_argvs, kubectl  # noqa: F401 (fixture)
from tpuplane.runtime import session as session_module
from tpuplane.runtime.session import (
    ConnectError,
    ProxyNotPlaced,
    ProxyNotReady,
    connect,
    describe_pod,
    recent_events,
)
from tpuplane.runtime.janitor import stale_proxies
from tpuplane.runtime.kube import ApiUnreachable

SERVICE = "pw-pathways-head-0-0.pw.pw.svc:29001"  # what the stack exports for a service named pw
CLIENT_JAX = metadata.version("jax")  # the service's images run this client's JAX, unless a test says otherwise
SERVER_IMAGE = f"us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-{CLIENT_JAX}"
MATCHING_PROXY = f"us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:jax-{CLIENT_JAX}"
EXPLICIT_PROXY = "registry.example.com/pathways/proxy_server:custom"


def service_jobset(name="pw", tpu="v6e-4", server_image=SERVER_IMAGE, sidecar_image=None) -> dict:
    """The service's JobSet exactly as the stack renders it."""
    return render_pathways_service_jobset(
        name, spec=resolve_tpu_type(tpu), slices=2, capacity="on-demand", server_image=server_image,
        gcs_scratch_location="gs://scratch-bucket", cpu_pool="cpu", node_pools=["tpu-0", "tpu-1"],
        sidecar_image=sidecar_image)

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
    a call, outside the lock, so a hook may send a signal whose handler calls back in; the hook
    `create_job:stored` runs after the Job is stored, and `create_lost` errors are raised after storing it: the
    server kept the Job but the client never heard so (a lost response, a timeout, a signal).

    `pod_logs` are the proxy's log as successive reads see it (the last one repeats); by default a proxy that
    finds free TPUs, logging one placement per virtual slice its Job asks for. After its lines a read ends, or with
    `log_stalls` falls silent (ApiUnreachable, as the real read timeout); `log_errors` are raised by the next reads."""

    def __init__(self, pod_states=(READY,), context_namespace=None, events=(), jobsets=None, pod_logs=None,
                 log_stalls=False):
        self.jobs: dict[tuple[str, str], dict] = {}
        self.jobsets = {("pw", "pw"): service_jobset()} if jobsets is None else jobsets
        self.jobset_reads: list[tuple[str, str]] = []
        self.calls: list[tuple[str, str]] = []  # (method, namespace) of the proxy's own calls
        self.pod_states = list(pod_states)
        self.events = list(events)
        self.polls = 0
        self.patches = 0
        self.create_errors: list[ApiException] = []
        self.create_lost: list[BaseException] = []
        self.delete_errors: list[ApiException] = []
        self.jobset_errors: list[Exception] = []
        self.hooks: dict[str, callable] = {}
        self.pod_logs = pod_logs
        self.log_stalls = log_stalls
        self.log_errors: list[Exception] = []
        self.log_reads = 0
        self._context_namespace = context_namespace
        self._lock = threading.Lock()

    def context_namespace(self):
        return self._context_namespace

    def _called(self, method, namespace):
        with self._lock:
            self.calls.append((method, namespace))
        if method in self.hooks:
            self.hooks[method]()

    @staticmethod
    def _stamp(job):
        """What an API server records on each write: the writer's fields and the server's time (managedFields)."""
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        job["metadata"]["managedFields"] = [{
            "manager": "tpuplane", "operation": "Update", "apiVersion": "batch/v1", "time": when,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{proxy.HEARTBEAT_ANNOTATION}": {}}}}}]

    def get_jobset(self, namespace, name):
        self.jobset_reads.append((namespace, name))
        if self.jobset_errors:
            raise self.jobset_errors.pop(0)
        if (namespace, name) not in self.jobsets:
            raise api_error(404, "Not Found", f'jobsets.jobset.x-k8s.io "{name}" not found')
        return json.loads(json.dumps(self.jobsets[(namespace, name)]))

    def create_job(self, namespace, manifest):
        self._called("create_job", namespace)
        if self.create_errors:
            raise self.create_errors.pop(0)
        stored = json.loads(json.dumps(manifest))
        self._stamp(stored)
        with self._lock:
            self.jobs[(namespace, manifest["metadata"]["name"])] = stored
        if "create_job:stored" in self.hooks:
            self.hooks["create_job:stored"]()
        if self.create_lost:
            raise self.create_lost.pop(0)

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
            self._stamp(self.jobs[(namespace, name)])
            self.patches += 1

    def list_jobs(self, namespace, label_selector):
        with self._lock:
            return [json.loads(json.dumps(job)) for (ns, _), job in self.jobs.items() if namespace in (None, ns)]

    def list_pods(self, namespace, label_selector, within=None):
        self._called("list_pods", namespace)
        job_name = label_selector.removeprefix("job-name=")
        with self._lock:
            if (namespace, job_name) not in self.jobs:
                return []
            status = self.pod_states[min(self.polls, len(self.pod_states) - 1)]
            self.polls += 1
        return [{"metadata": {"name": f"{job_name}-x7k2p", "namespace": namespace,
                              "creationTimestamp": "2026-01-01T00:00:00Z"}, "status": status}]

    def follow_pod_log(self, namespace, pod, container, within=None):
        self._called("follow_pod_log", namespace)
        with self._lock:
            reads, self.log_reads = self.log_reads, self.log_reads + 1
            job = self.jobs.get((namespace, pod.removesuffix("-x7k2p")))
        if self.log_errors:
            raise self.log_errors.pop(0)
        if self.pod_logs is not None:
            lines = self.pod_logs[min(reads, len(self.pod_logs) - 1)]
        else:
            args = job["spec"]["template"]["spec"]["containers"][0]["args"] if job else []
            slices = next(arg for arg in args if arg.startswith("--virtual_slices=")).split("=", 1)[1].split(",")
            lines = [f"I0101 placement.cc:42] Transition slice {index} ({name}) from unplaced -> placed"
                     for index, name in enumerate(slices)]
        yield from lines
        if self.log_stalls:
            time.sleep(min(within or 0.05, 0.05))
            raise ApiUnreachable("no line of the log within the read timeout")

    def list_events(self, namespace, involved_object, within=None):
        self._called("list_events", namespace)
        return list(self.events) if involved_object.endswith("-x7k2p") else []


@pytest.fixture(autouse=True)
def clean_jax_env(monkeypatch, jax_without_backend):
    for name in session_module.JAX_SETTINGS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def console() -> Console:
    return Console(file=open(os.devnull, "w"), force_terminal=False)


@pytest.fixture
def shown() -> tuple[Console, io.StringIO]:
    """A console whose output a test reads (no terminal, so progress lines are printed, not animated)."""
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=400), out


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
    """No such process, or only its zombie (a container's PID 1 may never reap an orphan)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


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
    ({"heartbeat_interval": proxy.DEFAULT_STALE_AFTER_SECONDS / 4 + 1}, "heartbeat_interval"),
    ({"pathways_service": "pathways-rm.team-a.svc:29001"}, "proxy_image"),  # no JobSet to read the image from
    ({"max_lifetime": 3, "timeout": 10}, "max_lifetime"),
    ({"max_lifetime": float("nan")}, "max_lifetime"),
    ({"max_lifetime": float("inf")}, "max_lifetime"),
    ({"max_lifetime": 2**70}, "max_lifetime"),
    ({"max_lifetime": 3600.5}, "max_lifetime"),
    ({"timeout": float("nan")}, "timeout"),
    ({"heartbeat_interval": float("nan")}, "heartbeat_interval"),
    ({"placement_timeout": 0}, "placement_timeout"),
    ({"placement_timeout": float("nan")}, "placement_timeout"),
    ({"placement_timeout": "10"}, "placement_timeout"),
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


def test_connect_accepts_the_largest_heartbeat_interval(kubectl, console):
    largest = proxy.DEFAULT_STALE_AFTER_SECONDS / 4
    with session_of(FakeKube(), kubectl, console, heartbeat_interval=largest) as session:
        assert session._heartbeat._interval == largest  # the heartbeat renews at the interval given


@pytest.mark.parametrize("tpus, expected", [
    ({"v6e-4": 2}, "tpuv6e:2x2,tpuv6e:2x2"),
    ({"tpuv6e:2x2": 1, "v5p-8": 1}, "tpuv6e:2x2,tpuv5:2x2x1"),
    ({"v5litepod-16": 1}, "tpuv5e:4x4"),
    ({"tpu7x-8": 1}, "tpu7x:2x2x1"),
])
def test_connect_asks_for_virtual_slices_by_pathways_instance_type(tpus, expected, kubectl, console):
    kube = FakeKube()
    with session_of(kube, kubectl, console, tpus=tpus, proxy_image=EXPLICIT_PROXY):
        (job,) = kube.jobs.values()
        args = job["spec"]["template"]["spec"]["containers"][0]["args"]
        assert f"--virtual_slices={expected}" in args


# ---- matching the service ------------------------------------------------------------------------------------------


def proxy_image_of(kube: FakeKube) -> str:
    (job,) = kube.jobs.values()
    return job["spec"]["template"]["spec"]["containers"][0]["image"]


@pytest.mark.parametrize("address", [SERVICE, "pw-pathways-head-0-0.pw:29001",
                                     "pw-pathways-head-0-0.pw.pw.svc.cluster.local:29001"])
def test_connect_runs_the_proxy_built_with_the_service_server_image(address, kubectl, console):
    kube = FakeKube()
    with session_of(kube, kubectl, console, pathways_service=address) as session:
        assert proxy_image_of(kube) == MATCHING_PROXY == session.proxy_image
    assert kube.jobset_reads == [("pw", "pw")]


def test_connect_reads_the_jobset_in_the_namespace_the_address_names(kubectl, console):
    server = f"registry.example.com/platform/pathways/server:jax-{CLIENT_JAX}"
    kube = FakeKube(jobsets={("platform", "pw"): service_jobset(server_image=server)})
    with session_of(kube, kubectl, console, pathways_service="pw-pathways-head-0-0.pw.platform.svc:29001"):
        assert proxy_image_of(kube) == f"registry.example.com/platform/pathways/proxy_server:jax-{CLIENT_JAX}"
    assert kube.jobset_reads == [("platform", "pw")]


def test_connect_address_of_the_stack_is_read_back_to_its_jobset():
    assert proxy.service_jobset(pathways_service_address("pw")) == ("pw", "pw")
    assert proxy.service_jobset("pw-pathways-head-0-0.pw:29001") == ("pw", "pw")
    assert proxy.service_jobset("pathways-head:29001") is None


def test_connect_explicit_proxy_image_skips_the_jobset(kubectl, console):
    kube = FakeKube(jobsets={})
    with session_of(kube, kubectl, console, proxy_image=EXPLICIT_PROXY):
        assert proxy_image_of(kube) == EXPLICIT_PROXY
    assert kube.jobset_reads == []


def test_connect_rejects_a_tpu_type_the_service_does_not_offer(kubectl, console):
    kube = FakeKube()
    with pytest.raises(ConfigError) as raised:
        with session_of(kube, kubectl, console, tpus={"v6e-4": 1, "v6e-16": 1}):
            pass
    (problem,) = raised.value.problems
    assert problem.path == "tpus['v6e-16']"
    assert "tpuv6e:2x2" in problem.allowed and "tpuv6e:4x4" in problem.hint
    assert kube.calls == [] and kube.jobs == {}


@pytest.mark.parametrize("error, why", [
    (api_error(403, "Forbidden", "jobsets.jobset.x-k8s.io is forbidden"), "may not get jobsets"),
    (api_error(404, "Not Found"), "pathways_service output"),
    (ApiUnreachable("no answer from the Kubernetes API"), "no answer"),
])
def test_connect_unreadable_jobset_asks_for_proxy_image(error, why, kubectl, console):
    kube = FakeKube()
    kube.jobset_errors.append(error)
    with pytest.raises(ConnectError, match="Pass proxy_image= explicitly") as raised:
        with session_of(kube, kubectl, console):
            pass
    assert why in str(raised.value) and "JobSet pw in namespace pw" in str(raised.value)
    assert kube.calls == [] and kube.jobs == {}


def test_connect_jobset_without_a_server_image_asks_for_proxy_image(kubectl, console):
    jobset = service_jobset(server_image="registry.example.com/pathways/custom-worker:1")
    kube = FakeKube(jobsets={("pw", "pw"): jobset})
    with pytest.raises(ConfigError) as raised:
        with session_of(kube, kubectl, console):
            pass
    (problem,) = raised.value.problems
    assert problem.path == "proxy_image" and "custom-worker:1" in problem.hint
    assert kube.jobs == {}


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
    assert jax.config.jax_platforms == "cpu"  # as tests/conftest.py set it
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


# ---- JAX in the client ---------------------------------------------------------------------------------------------


def test_connect_initialises_pathways_so_jax_dials_the_proxy_through_the_forward(kubectl, console, monkeypatch):
    """pathwaysutils.initialize() for real: JAX's first call in the session creates the `proxy` backend, which
    dials the forwarded port. The fake kubectl there hangs up, so the dial fails there and then, not with
    "backend 'proxy' is not in the list of known backends"."""
    import jax

    monkeypatch.setenv("PATHWAYS_PROXY_CONNECTION_TIMEOUT_SECS", "1")
    with session_of(FakeKube(), kubectl, console) as session:
        with pytest.raises(RuntimeError, match=rf"Unable to initialize backend 'proxy'.*localhost:{session.local_port}"):
            jax.devices()


def test_connect_registers_the_proxy_backend_after_an_earlier_initialize_did_not(kubectl, console, monkeypatch):
    """pathwaysutils.initialize() acts once per process: called before connect() (at the top of a script), it saw no
    JAX_PLATFORMS=proxy and registered nothing, and ignores the session's call."""
    from jax._src import xla_bridge
    from pathwaysutils import _initialize

    monkeypatch.setattr(_initialize, "_initialization_count", 1)
    monkeypatch.delitem(xla_bridge._backend_factories, "proxy", raising=False)
    with session_of(FakeKube(), kubectl, console):
        assert "proxy" in xla_bridge._backend_factories


def test_connect_refuses_a_process_whose_jax_already_has_a_backend(kubectl, console):
    import jax

    jax.devices()  # as a notebook cell run before connect() would
    kube = FakeKube()
    with pytest.raises(ConnectError, match=r"JAX already has a backend.*jax.extend.backend.clear_backends\(\)"):
        with session_of(kube, kubectl, console):
            pass
    assert kube.calls == [] and kube.jobset_reads == []


def test_connect_clears_jax_backends_and_caches_on_exit(kubectl, console):
    import jax
    from jax._src import xla_bridge

    with session_of(FakeKube(), kubectl, console):
        jax.config.update("jax_platforms", "cpu")
        jax.devices()  # a backend made during the session
        assert xla_bridge.backends_are_initialized()
    assert not xla_bridge.backends_are_initialized()
    assert jax.config.jax_platforms == "cpu"


def test_connect_without_pathwaysutils_says_what_to_install(kubectl, console, monkeypatch):
    monkeypatch.setitem(sys.modules, "pathwaysutils", None)  # `import pathwaysutils` fails, as when not installed
    with pytest.raises(ConnectError, match=r"pathwaysutils, which cannot be imported .*pip install 'tpuplane\[jax\]'"):
        session_of(FakeKube(), kubectl, console)


# ---- the same JAX everywhere ------------------------------------------------------------------------------------


OTHER_JAX = "0.9.0"


OTHER_SERVER = SERVER_IMAGE.replace(CLIENT_JAX, OTHER_JAX)
OTHER_SIDECAR = f"us-east5-docker.pkg.dev/p/r/sidecar:jax-{OTHER_JAX}-ctx-0123456789abcdef0123"


@pytest.mark.parametrize("server, sidecar, skewed, fix", [
    (OTHER_SERVER, None, f"server image {OTHER_SERVER}", f"pip install jax=={OTHER_JAX} jaxlib=={OTHER_JAX}"),
    (OTHER_SERVER, OTHER_SIDECAR, f"sidecar image {OTHER_SIDECAR}", f"pip install jax=={OTHER_JAX} jaxlib=={OTHER_JAX}"),
    (SERVER_IMAGE, OTHER_SIDECAR, f"sidecar image {OTHER_SIDECAR}", "the service's own images disagree: rebuild them"),
])
def test_connect_refuses_a_service_on_another_jax_before_creating_anything(server, sidecar, skewed, fix, kubectl,
                                                                            console):
    kube = FakeKube(jobsets={("pw", "pw"): service_jobset(server_image=server, sidecar_image=sidecar)})
    with pytest.raises(ConnectError) as raised:
        with session_of(kube, kubectl, console):
            pass
    message = str(raised.value)
    assert f"{skewed} runs jax {OTHER_JAX}" in message and f"this client has jax {CLIENT_JAX}" in message
    assert f"Fix: {fix}" in message
    assert kube.calls == [] and kube.jobs == {}


def test_connect_accepts_a_sidecar_built_for_the_clients_jax(kubectl, console):
    sidecar = f"us-east5-docker.pkg.dev/p/r/sidecar:jax-{CLIENT_JAX}-ctx-0123456789abcdef0123"
    kube = FakeKube(jobsets={("pw", "pw"): service_jobset(sidecar_image=sidecar)})
    with session_of(kube, kubectl, console, proxy_options=["sidecar:true"]):
        assert len(kube.jobs) == 1


def test_connect_refuses_an_explicit_proxy_image_of_another_jax(kubectl, console):
    with pytest.raises(ConnectError, match=rf"the proxy image .*:jax-{OTHER_JAX} runs jax {OTHER_JAX}"):
        with session_of(FakeKube(), kubectl, console, proxy_image=f"registry.example.com/proxy_server:jax-{OTHER_JAX}"):
            pass


def test_connect_says_when_an_image_tag_does_not_tell_its_jax(kubectl, shown):
    console, out = shown
    with session_of(FakeKube(jobsets={}), kubectl, console, proxy_image=EXPLICIT_PROXY):
        pass
    assert f"cannot tell the JAX of the proxy image {EXPLICIT_PROXY} from its tag; it must be jax {CLIENT_JAX}" in (
        " ".join(out.getvalue().split()))


def test_jax_skew_between_the_services_own_images_asks_to_rebuild_them():
    error, _ = session_module.jax_skew("0.10.0", "0.10.0", [session_module.JaxOf("its server image s", "0.10.0"),
                                                            session_module.JaxOf("its sidecar image c", "0.9.0")])
    assert "the service's own images disagree" in error


def test_jax_skew_counts_the_clients_jaxlib_too():
    error, _ = session_module.jax_skew("0.10.0", "0.9.0", [session_module.JaxOf("its server image s", "0.10.0")])
    assert "jaxlib 0.9.0" in error and error.endswith("pip install jax==0.10.0 jaxlib==0.10.0")


# ---- placement ----------------------------------------------------------------------------------------------------

ASKED = "I0101 rm_client.cc:88] Signaling to RM: asking for placement of 2 virtual slices of tpuv6e:2x2"
REFUSED = "W0101 rm_client.cc:91] FAILED_PRECONDITION: no free tpuv6e:2x2 slice; 2 of 2 held by other clients"
PLACED = "I0101 placement.cc:42] Transition slice {} (tpuv6e:2x2) from unplaced -> placed"


def test_connect_streams_placement_messages_until_every_slice_is_placed(kubectl, shown):
    console, out = shown
    kube = FakeKube(pod_logs=[[ASKED, "I0101 some other line", REFUSED, PLACED.format(0), PLACED.format(1)]])
    with session_of(kube, kubectl, console):
        pass
    lines = out.getvalue().splitlines()
    for message in (ASKED, REFUSED, PLACED.format(0), PLACED.format(1)):
        assert sum(message in line for line in lines) == 1
    assert not any("some other line" in line for line in lines)


def test_connect_gives_up_on_placement_after_the_timeout_with_the_reason(kubectl, console):
    kube = FakeKube(pod_logs=[[ASKED, REFUSED, PLACED.format(0)]], log_stalls=True)
    with pytest.raises(ProxyNotPlaced) as raised:
        with session_of(kube, kubectl, console, placement_timeout=0.5):
            pass
    message = str(raised.value)
    assert "placed 1 of the 2 slice(s) asked for (2 x v6e-4) within 0.5 s" in message
    assert REFUSED in message and "raise placement_timeout=" in message
    assert kube.jobs == {}


def test_connect_reads_a_log_that_fell_silent_again_without_repeating_it(kubectl, shown):
    """Each read of a followed log starts at its beginning: placements are counted anew, messages shown once."""
    console, out = shown
    kube = FakeKube(pod_logs=[[ASKED, PLACED.format(0)], [ASKED, PLACED.format(0), PLACED.format(1)]],
                    log_stalls=True)
    with session_of(kube, kubectl, console):
        pass
    assert kube.log_reads == 2
    assert out.getvalue().count(PLACED.format(0)) == 1 and out.getvalue().count(ASKED) == 1


def test_connect_that_may_not_read_the_proxy_log_says_what_permission_is_missing(kubectl, console):
    kube = FakeKube()
    kube.log_errors.append(api_error(403, "Forbidden", 'pods "p" is forbidden: cannot get resource "pods/log"'))
    with pytest.raises(ConnectError, match=r"needs get on pods/log there; or pass placement_timeout=None"):
        with session_of(kube, kubectl, console):
            pass
    assert kube.jobs == {}


def test_connect_without_placement_timeout_does_not_wait_for_placement(kubectl, console):
    kube = FakeKube(pod_logs=[[ASKED]], log_stalls=True)
    with session_of(kube, kubectl, console, placement_timeout=None):
        assert kube.log_reads == 0


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


def test_connect_names_a_missing_kubectl(tmp_path, console):
    kube = FakeKube()
    with pytest.raises(ConnectError, match="not found: install kubectl or pass kubectl="):
        with session_of(kube, tmp_path / "no-kubectl", console):
            pass
    assert kube.jobs == {}


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


def test_connect_sigterm_while_create_is_in_flight_leaves_no_job(kubectl, console, restore_signals):
    def previous(signum, frame):
        raise Terminated

    signal.signal(signal.SIGTERM, previous)
    kube = FakeKube()
    kube.hooks["create_job:stored"] = lambda: os.kill(os.getpid(), signal.SIGTERM)  # stored, answer not yet read
    with pytest.raises(Terminated):
        with session_of(kube, kubectl, console):
            pass
    assert kube.jobs == {}
    assert [method for method, _ in kube.calls] == ["create_job", "delete_job"]


@pytest.mark.parametrize("first_ctrl_c", [True, False], ids=["cleanup-by-first-ctrl-c", "cleanup-by-exit"])
def test_connect_ctrl_c_during_cleanup_still_deletes_the_job(first_ctrl_c, kubectl, console, restore_signals):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    kube = FakeKube()
    kube.hooks["delete_job"] = lambda: os.kill(os.getpid(), signal.SIGINT)  # impatient Ctrl-C, mid-delete
    with pytest.raises(KeyboardInterrupt):
        with session_of(kube, kubectl, console) as session:
            pid = session.forwarder.pid
            if first_ctrl_c:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)  # the handler runs between bytecodes, long before this ends
    assert kube.jobs == {}
    assert process_gone(pid)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


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
    from tpuplane.runtime.session import connect

    class FileKube:
        '''Stand-in for KubeApi (no API server here) that keeps its Jobs in a JSON file the test reads.'''
        def __init__(self, path): self.path = path; self._save({})
        def _load(self): return json.load(open(self.path))
        def _save(self, jobs): json.dump(jobs, open(self.path, "w"))
        def context_namespace(self): return None
        def create_job(self, ns, manifest): self._save({**self._load(), manifest["metadata"]["name"]: manifest})
        def delete_job(self, ns, name): jobs = self._load(); jobs.pop(name); self._save(jobs)
        def patch_job_annotations(self, ns, name, annotations): pass
        def list_pods(self, ns, selector, within=None):
            return [{"metadata": {"name": "p"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}]
        def list_events(self, ns, name, within=None): return []
        def follow_pod_log(self, ns, pod, container, within=None):
            yield "Transition slice 0 (tpuv6e:2x2) from unplaced -> placed"

    session = connect("svc:29001", {"v6e-4": 1}, "scratch-bucket", kube=FileKube(sys.argv[1]), kubectl=sys.argv[2],
                      proxy_image="registry.example.com/pathways/proxy_server:1", console=Console(stderr=True))
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


FORWARDER_PARENT = textwrap.dedent("""\
    import sys, time
    from tpuplane.runtime.port_forward import PortForwarder, free_local_port, kubectl_port_forward_argv
    port = free_local_port()
    forwarder = PortForwarder(kubectl_port_forward_argv(sys.argv[1], "default", "p", port, 29000), port)
    forwarder.start()
    print(forwarder.pid, flush=True)
    time.sleep(120)
""")


def test_port_forward_dies_with_a_sigkilled_client(kubectl):
    parent = subprocess.Popen([sys.executable, "-c", FORWARDER_PARENT, str(kubectl)], stdout=subprocess.PIPE,
                              text=True)
    forwarder = int(parent.stdout.readline())
    try:
        parent.kill()  # SIGKILL: no cleanup runs in the client
        parent.wait(timeout=10)
        wait_until(lambda: process_gone(forwarder))
    finally:
        if not process_gone(forwarder):
            os.kill(forwarder, signal.SIGKILL)
        parent.stdout.close()


# ---- API errors ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lost", [ApiUnreachable("read timed out"), KeyboardInterrupt()])
def test_connect_deletes_a_job_stored_before_the_response_was_lost(lost, kubectl, console):
    kube = FakeKube()
    kube.create_lost.append(lost)
    with pytest.raises((ConnectError, KeyboardInterrupt)):
        with session_of(kube, kubectl, console):
            pass
    assert [method for method, _ in kube.calls] == ["create_job", "delete_job"]
    assert kube.jobs == {}


def test_connect_conflict_leaves_the_other_job_alone(kubectl, console, monkeypatch):
    monkeypatch.setattr(session_module, "_random_suffix", lambda: "taken")
    kube = FakeKube()
    name = proxy.proxy_job_name(session_module._user(), "taken")
    kube.jobs[("default", name)] = {"metadata": {"name": name}}
    kube.create_errors.append(api_error(409, "Conflict", f'jobs.batch "{name}" already exists'))
    with pytest.raises(ConnectError, match="409 Conflict"):
        with session_of(kube, kubectl, console):
            pass
    assert list(kube.jobs) == [("default", name)]


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
