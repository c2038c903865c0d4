"""`KubeApi` over the real `kubernetes` client, against local HTTP servers.

No Kubernetes API server can exist here. A small `http.server` on 127.0.0.1 stands in for one: it records each
request (method, path, query, content type, body) and answers with canned API objects, so these tests check the
requests the real client sends and that its answers come back as the dicts the callers read. A second stand-in
accepts connections and never answers: the stalled API server every call must give up on in bounded time.
"""

from __future__ import annotations

import http.server
import json
import textwrap
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pytest

from tpuplane.infra.pathways import proxy
from tpuplane.runtime.janitor import SERVER_CLOCK, last_seen
from tpuplane.runtime.kube import FIELD_MANAGER, ApiException, ApiUnreachable, KubeApi

JOB = {"apiVersion": "batch/v1", "kind": "Job",
       "metadata": {"name": "tpuplane-proxy-alice-ab1cd", "namespace": "team-a",
                    "labels": dict(proxy.PROXY_LABELS),
                    "annotations": {proxy.HEARTBEAT_ANNOTATION: "1800000000"},
                    "managedFields": [{"manager": FIELD_MANAGER, "operation": "Update", "apiVersion": "batch/v1",
                                       "time": "2027-01-15T08:00:00Z", "fieldsType": "FieldsV1",
                                       "fieldsV1": {"f:metadata": {"f:annotations": {
                                           f"f:{proxy.HEARTBEAT_ANNOTATION}": {}}}}}]},
       "spec": {"template": {"spec": {"containers": [{"name": "pathways-proxy", "image": "r/proxy_server:1"}],
                                      "restartPolicy": "Never"}}}}
JOBS = "/apis/batch/v1/namespaces/team-a/jobs"
JOBSET = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "pw", "namespace": "pw"},
          "spec": {"replicatedJobs": []}}


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str | None
    body: Any


def answer(method: str, path: str) -> tuple[int, dict]:
    """What the stand-in API server says to a request."""
    if path.startswith("/apis/jobset.x-k8s.io/"):
        return 200, JOBSET
    if method == "DELETE":
        return 200, {"apiVersion": "v1", "kind": "Status", "status": "Success"}
    if method in ("POST", "PATCH"):
        return 201 if method == "POST" else 200, JOB
    if path.endswith("/jobs"):
        return 200, {"apiVersion": "batch/v1", "kind": "JobList", "metadata": {}, "items": [JOB]}
    kind = "PodList" if path.endswith("/pods") else "EventList"
    return 200, {"apiVersion": "v1", "kind": kind, "metadata": {}, "items": []}


class RecordingHandler(http.server.BaseHTTPRequestHandler):
    """Records each request on its server (`server.requests`) and answers with `server.reply(method, path)`."""

    def _handle(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.requests.append(Recorded(self.command, url.path, urllib.parse.parse_qs(url.query),
                                             self.headers.get("Content-Type"), json.loads(raw) if raw else None))
        if url.path.endswith("/log"):
            self._stream_log()
            return
        status, body = self.server.reply(self.command, url.path)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream_log(self) -> None:
        """A followed log, as the API server sends it: chunks written as lines come, then silence or the end."""
        self.protocol_version = "HTTP/1.1"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for line in self.server.log_lines:
            data = line.encode() + b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        if not self.server.log_stalls.is_set():  # else the container goes on running, silent: no end of stream
            self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST = do_PATCH = do_DELETE = _handle

    def log_message(self, format: str, *args: Any) -> None:
        pass


def kubeconfig(tmp_path, monkeypatch, port: int) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(textwrap.dedent(f"""\
        apiVersion: v1
        kind: Config
        clusters: [{{name: local, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
        users: [{{name: u, user: {{token: not-a-secret}}}}]
        contexts: [{{name: local, context: {{cluster: local, user: u, namespace: team-a}}}}]
        current-context: local
    """))
    monkeypatch.setenv("KUBECONFIG", str(path))


@dataclass
class StandIn:
    kube: KubeApi  # a real KubeApi, from a kubeconfig pointing at `server`
    requests: list[Recorded]
    server: http.server.ThreadingHTTPServer


@pytest.fixture
def recorder(tmp_path, monkeypatch) -> Iterator[StandIn]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingHandler)
    server.requests = []
    server.reply = answer
    server.log_lines = []
    server.log_stalls = threading.Event()  # set: a followed log stays silent after its lines
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig(tmp_path, monkeypatch, server.server_address[1])
    try:
        yield StandIn(KubeApi.from_context(), server.requests, server)
    finally:
        server.shutdown()
        server.server_close()


# ---- the requests the client sends ----------------------------------------------------------------------------------


def test_kube_api_create_job_posts_the_rendered_manifest_unchanged(recorder):
    """The client turns a dict body into its V1Job model; nothing of the rendered Job may be lost on the way."""
    kube, requests = recorder.kube, recorder.requests
    manifest = proxy.render_proxy_job(proxy.ProxyJobSpec(
        name="tpuplane-proxy-alice-ab1cd", namespace="team-a", service="pw-pathways-head-0-0.pw.pw.svc:29001",
        slices=tuple(proxy.parse_tpus({"v6e-4": 2})), gcs_location="gs://scratch-bucket", heartbeat=1_800_000_000,
        image=proxy.EXAMPLE_PROXY_IMAGE, options=proxy.parse_proxy_options(["use_insecure_credentials:true"])))
    kube.create_job("team-a", manifest)
    (request,) = requests
    assert (request.method, request.path) == ("POST", JOBS)
    assert request.query == {"fieldManager": [FIELD_MANAGER]}
    assert request.body == manifest


def test_kube_api_delete_job_lets_pods_go_in_the_background(recorder):
    kube, requests = recorder.kube, recorder.requests
    kube.delete_job("team-a", "tpuplane-proxy-alice-ab1cd")
    (request,) = requests
    assert (request.method, request.path) == ("DELETE", f"{JOBS}/tpuplane-proxy-alice-ab1cd")
    assert request.query == {"propagationPolicy": ["Background"]}


def test_kube_api_patch_annotations_is_a_merge_patch_of_annotations_only(recorder):
    kube, requests = recorder.kube, recorder.requests
    kube.patch_job_annotations("team-a", "tpuplane-proxy-alice-ab1cd", {proxy.HEARTBEAT_ANNOTATION: "1800000030"})
    (request,) = requests
    assert (request.method, request.path) == ("PATCH", f"{JOBS}/tpuplane-proxy-alice-ab1cd")
    assert request.content_type == "application/merge-patch+json"
    assert request.body == {"metadata": {"annotations": {proxy.HEARTBEAT_ANNOTATION: "1800000030"}}}
    assert request.query == {"fieldManager": [FIELD_MANAGER]}


@pytest.mark.parametrize("namespace, path", [("team-a", "/apis/batch/v1/namespaces/team-a/jobs"),
                                             (None, "/apis/batch/v1/jobs")])
def test_kube_api_list_jobs_by_label_selector(recorder, namespace, path):
    kube, requests = recorder.kube, recorder.requests
    (job,) = kube.list_jobs(namespace, proxy.PROXY_LABEL_SELECTOR)
    (request,) = requests
    assert (request.method, request.path) == ("GET", path)
    assert request.query == {"labelSelector": [proxy.PROXY_LABEL_SELECTOR]}
    assert job["metadata"]["labels"] == proxy.PROXY_LABELS


def test_kube_api_listed_jobs_carry_the_server_time_the_janitor_reads(recorder):
    """The client turns managedFields times into datetimes and back; the janitor must still read them."""
    kube = recorder.kube
    (job,) = kube.list_jobs("team-a", proxy.PROXY_LABEL_SELECTOR)
    assert last_seen(job) == (datetime(2027, 1, 15, 8, tzinfo=timezone.utc).timestamp(), SERVER_CLOCK)


def test_kube_api_list_pods_and_events_select_by_job_and_object(recorder):
    kube, requests = recorder.kube, recorder.requests
    assert kube.list_pods("team-a", "job-name=tpuplane-proxy-alice-ab1cd") == []
    assert kube.list_events("team-a", "tpuplane-proxy-alice-ab1cd-x7k2p") == []
    pods, events = requests
    assert (pods.path, pods.query) == ("/api/v1/namespaces/team-a/pods",
                                       {"labelSelector": ["job-name=tpuplane-proxy-alice-ab1cd"]})
    assert (events.path, events.query) == ("/api/v1/namespaces/team-a/events",
                                           {"fieldSelector": ["involvedObject.name=tpuplane-proxy-alice-ab1cd-x7k2p"]})


def test_kube_api_get_jobset_reads_the_custom_object(recorder):
    kube, requests = recorder.kube, recorder.requests
    assert kube.get_jobset("pw", "pw") == JOBSET
    (request,) = requests
    assert (request.method, request.path) == ("GET", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/pw/jobsets/pw")


def test_kube_api_follows_a_container_log_line_by_line_to_its_end(recorder):
    kube, requests = recorder.kube, recorder.requests
    recorder.server.log_lines = ["I0101 placement requested", "Transition slice 0 from unplaced -> placed"]
    lines = list(kube.follow_pod_log("team-a", "tpuplane-proxy-alice-ab1cd-x7k2p", "pathways-proxy"))
    assert lines == recorder.server.log_lines
    (request,) = requests
    assert request.path == "/api/v1/namespaces/team-a/pods/tpuplane-proxy-alice-ab1cd-x7k2p/log"
    assert request.query == {"container": ["pathways-proxy"], "follow": ["true"]}


def test_kube_api_followed_log_that_falls_silent_gives_up_after_the_time_left(recorder):
    recorder.server.log_lines = ["one line, then nothing"]
    recorder.server.log_stalls.set()
    seen: list[str] = []

    def follow() -> None:
        seen.extend(recorder.kube.follow_pod_log("team-a", "p", "pathways-proxy", within=0.3))

    error, _ = outcome_within(10, follow)
    assert seen == ["one line, then nothing"]
    assert isinstance(error, ApiUnreachable) and "the log of pod team-a/p stopped" in str(error)


def test_kube_api_context_namespace_comes_from_the_kubeconfig(recorder):
    kube = recorder.kube
    assert kube.context_namespace() == "team-a"


# ---- a stalled API server -------------------------------------------------------------------------------------------

CALLS: dict[str, Callable[[KubeApi], object]] = {
    "create_job": lambda kube: kube.create_job("team-a", JOB),
    "delete_job": lambda kube: kube.delete_job("team-a", "j"),
    "patch_job_annotations": lambda kube: kube.patch_job_annotations("team-a", "j", {"a": "b"}),
    "list_jobs": lambda kube: kube.list_jobs("team-a", "a=b"),
    "list_pods": lambda kube: kube.list_pods("team-a", "a=b"),
    "list_events": lambda kube: kube.list_events("team-a", "j"),
    "get_jobset": lambda kube: kube.get_jobset("pw", "pw"),
    "follow_pod_log": lambda kube: list(kube.follow_pod_log("team-a", "p", "pathways-proxy")),
}


def outcome_within(seconds: float, call: Callable[[], object]) -> tuple[BaseException | None, float]:
    """Run `call` in a thread; (what it raised, how long it took), or fail if it is still running after `seconds`."""
    result: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            call()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            result["error"] = error
        result["took"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the call still hangs after {seconds}s"
    return result.get("error"), result["took"]


@pytest.mark.parametrize("method", sorted(CALLS))
def test_kube_api_gives_up_on_a_stalled_server(method, silent_port, tmp_path, monkeypatch):
    kubeconfig(tmp_path, monkeypatch, silent_port)
    kube = KubeApi.from_context(request_timeout=(1.0, 1.0))
    error, took = outcome_within(10, lambda: CALLS[method](kube))
    assert isinstance(error, ApiUnreachable) and "no answer from the Kubernetes API" in str(error)
    assert took < 3.5  # one read timeout, not four: urllib3's own retries are off


def test_kube_api_wait_caps_the_request_by_the_time_left(silent_port, tmp_path, monkeypatch):
    kubeconfig(tmp_path, monkeypatch, silent_port)
    kube = KubeApi.from_context()  # default (5, 30) s: the cap must win
    error, took = outcome_within(10, lambda: kube.list_pods("team-a", "a=b", within=0.3))
    assert isinstance(error, ApiUnreachable) and "0.3s to read" in str(error)


def test_connect_against_a_stalled_server_fails_within_bounds(silent_port, tmp_path, monkeypatch, jax_without_backend):
    from rich.console import Console

    from tpuplane.runtime.session import ConnectError, connect

    kubeconfig(tmp_path, monkeypatch, silent_port)
    kube = KubeApi.from_context(request_timeout=(0.5, 0.5))
    session = connect("pw-pathways-head-0-0.pw.pw.svc:29001", {"v6e-4": 1}, "gs://scratch-bucket", kube=kube,
                      proxy_image="registry.example.com/pathways/proxy_server:1", timeout=1,
                      console=Console(file=open("/dev/null", "w")))
    error, _ = outcome_within(30, session.__enter__)
    assert isinstance(error, ConnectError)
    assert "got no answer" in str(error) and "could not delete" in str(error)


def test_kube_api_refusals_stay_api_exceptions(recorder):
    """A server that answered is never `ApiUnreachable`: callers read the status (404 = gone, 403 = refused)."""
    kube = recorder.kube
    recorder.server.reply = lambda method, path: (
        403, {"apiVersion": "v1", "kind": "Status", "code": 403, "message": "forbidden"})
    with pytest.raises(ApiException) as raised:
        kube.delete_job("team-a", "j")
    assert raised.value.status == 403
