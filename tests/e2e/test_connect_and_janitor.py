"""connect() and the proxy janitor against the sandbox's real API server, on the pathways stack (its Shared
Pathways Service applied by the engine): the proxy Job connect() renders is accepted (real validation, real
admission), its pod is scheduled on the CPU pool and comes up Ready, and the Job is deleted when the session ends,
whether it ends well or not; the janitor deletes a proxy whose client fell silent and keeps the others.

Port-forwarding needs a kubelet, which kwok does not run: `kubectl port-forward` alone is played by the fake of
tests/fake_kubectl.py. Following the proxy's log for placement needs a kubelet too, so sessions here do not wait
for placement (`placement_timeout=None`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from importlib import metadata

import pytest
from rich.console import Console

from e2e.conftest import PATHWAYS
from fake_kubectl import kubectl  # noqa: F401 (fixture)
from tpuplane.infra.pathways.proxy import PROXY_LABEL_SELECTOR
from tpuplane.infra.pathways.service import pathways_service_address
from tpuplane.runtime.janitor import delete_proxies, find_stale_proxies
from tpuplane.runtime.kube import KubeApi
from tpuplane.runtime.session import ConnectError, connect

NAMESPACE = "research"  # a team of the pathways stack: the service admits proxies from its namespace


pytestmark = pytest.mark.sandbox(PATHWAYS)


@pytest.fixture
def kube(sandbox, monkeypatch) -> KubeApi:
    monkeypatch.setenv("KUBECONFIG", sandbox.kubeconfig)
    return KubeApi.from_context()


def proxies(kube: KubeApi) -> list[dict]:
    return kube.list_jobs(NAMESPACE, PROXY_LABEL_SELECTOR)


def gone(kube: KubeApi, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while proxies(kube) and time.monotonic() < deadline:
        time.sleep(0.3)
    return not proxies(kube)


# The stack's service runs jax 0.10.0; this environment's may differ, and connect() refuses a skew. Sessions name
# the proxy of this client's JAX instead of the service's (the first test shows the refusal itself).
CLIENT_PROXY = f"us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:jax-{metadata.version('jax')}"


def session(kubectl, **overrides):
    options = {"proxy_image": CLIENT_PROXY, **overrides}
    return connect(pathways_service_address("pw"), {"v6e-16": 1}, "gs://acme-ml-shared-pw-pathways",
                   namespace=NAMESPACE, kubectl=str(kubectl), placement_timeout=None, timeout=90,
                   console=Console(quiet=True), **options)


def test_a_service_running_another_jax_is_refused_before_anything_is_created(kube, kubectl, jax_without_backend):
    """The service's images are read from its JobSet on the API server."""
    if metadata.version("jax") == "0.10.0":
        pytest.skip("this environment runs the service's jax: there is no skew to refuse")
    with pytest.raises(ConnectError, match="version skew: the service's server image"):
        with session(kubectl, proxy_image=None):
            pass
    assert proxies(kube) == []


def test_the_proxy_job_is_accepted_runs_on_the_cpu_pool_and_goes_with_the_session(kube, kubectl,
                                                                                  jax_without_backend):
    with session(kubectl) as connected:
        [job] = proxies(kube)
        assert job["metadata"]["name"] == connected.job_name
        [pod] = [p for p in kube.list_pods(NAMESPACE, f"job-name={connected.job_name}")
                 if p["metadata"]["name"] == connected.pod_name]
        assert pod["spec"]["nodeName"].startswith("gke-shared-cpu-")
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])
    assert gone(kube)


def test_the_proxy_job_goes_when_the_session_fails(kube, kubectl, monkeypatch, jax_without_backend):
    monkeypatch.setenv("FAKE_KUBECTL_FAIL", "1")  # the port-forward dies at once, after the Job was created
    with pytest.raises(ConnectError):
        with session(kubectl):
            pass
    assert gone(kube)


ABANDONED_CLIENT = """
import sys, time
from rich.console import Console
from tpuplane.infra.pathways.service import pathways_service_address
from tpuplane.runtime.session import connect
session = connect(pathways_service_address("pw"), {"v6e-16": 1}, "gs://acme-ml-shared-pw-pathways",
                  namespace=sys.argv[1], kubectl=sys.argv[2], proxy_image=sys.argv[3], placement_timeout=None,
                  timeout=90, heartbeat_interval=1, console=Console(quiet=True))
with session:
    print(session.job_name, flush=True)
    time.sleep(3600)
"""


def test_the_janitor_deletes_the_proxy_of_a_killed_client_and_keeps_a_live_one(kube, kubectl, tmp_path,
                                                                               jax_without_backend):
    """A client killed with SIGKILL cannot clean up: its proxy stays until the janitor finds its heartbeat
    silent (a short `stale_after` here; the command's is at least a minute)."""
    script = tmp_path / "client.py"
    script.write_text(ABANDONED_CLIENT)
    client = subprocess.Popen([sys.executable, str(script), NAMESPACE, str(kubectl), CLIENT_PROXY],
                              stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    try:
        abandoned = client.stdout.readline().strip()
        assert abandoned, "the client did not connect"
        with session(kubectl, heartbeat_interval=1) as live:
            client.kill()
            client.wait()
            time.sleep(5)
            stale = find_stale_proxies(kube, NAMESPACE, stale_after=3)
            assert [p.name for p in stale] == [abandoned]
            assert all(result.deleted for result in delete_proxies(kube, stale))
            assert [job["metadata"]["name"] for job in proxies(kube)] == [live.job_name]
    finally:
        client.kill()
    assert gone(kube)
