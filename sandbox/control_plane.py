"""A real Kubernetes control plane on loopback, the way envtest runs one: etcd and kube-apiserver, plus
kube-controller-manager (Jobs get pods, garbage collection, namespace deletion) and kube-scheduler (pods get
nodes). No kubelet: kwok plays the nodes (`tpuplane.sandbox.nodes`).

Authentication is one static admin token (group `system:masters`) in a token file; authorization is RBAC, as on
GKE. Every certificate comes from the sandbox's own CA (`tpuplane.sandbox.certs`).
"""

from __future__ import annotations

import base64
import secrets
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from tpuplane.sandbox import certs
from tpuplane.sandbox.kwok import NODE_LEASE_SECONDS
from tpuplane.sandbox.layout import Paths, Ports
from tpuplane.sandbox.processes import Launcher, Started, https_ok, wait_until
from tpuplane.sandbox.toolchain import binary

SERVICE_CIDR = "10.96.0.0/16"
# Client rate limits of kube-controller-manager and kube-scheduler. Their defaults (20 and 50 requests a second) are
# for a shared API server; the sandbox's is on loopback, and at the defaults the node lifecycle controller lifted
# the not-ready taint of 300 new nodes in a minute, and the Job controller made 256 pods in 13 s.
API_QPS, API_BURST = 1000, 2000
CLUSTER_NAME = "tpuplane-sandbox"
ADMIN_USER = "sandbox-admin"
START_TIMEOUT = 60.0


class ControlPlaneFiles:
    """Keys, certificates, the token file and the admin kubeconfig, written once per `sandbox up`."""

    def __init__(self, paths: Paths, ports: Ports):
        self.paths = paths
        self.ca = certs.new_ca()
        self.ca_file, _ = self.ca.write(paths.pki, "ca.crt", "ca.key")
        self.apiserver_cert, self.apiserver_key = certs.serving_cert(self.ca, "kube-apiserver", (
            "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")).write(
            paths.pki / "apiserver")
        sa = certs.service_account_keys()
        self.sa_public, self.sa_private = sa.write(paths.pki, "sa.pub", "sa.key")
        self.token = secrets.token_urlsafe(32)
        paths.token_file.write_text(f'{self.token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
        paths.token_file.chmod(0o600)
        self.server = f"https://127.0.0.1:{ports.apiserver}"
        write_kubeconfig(paths.kubeconfig, self.server, self.ca.cert_pem, self.token)


def write_kubeconfig(path: Path, server: str, ca_pem: bytes, token: str) -> None:
    """An admin kubeconfig: the sandbox CA, the static token (the file is the user's only)."""
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": CLUSTER_NAME, "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": ADMIN_USER, "user": {"token": token}}],
        "contexts": [{"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": ADMIN_USER}}],
        "current-context": CLUSTER_NAME,
    }
    path.write_text(yaml.safe_dump(kubeconfig, sort_keys=False))
    path.chmod(0o600)


def start_etcd(paths: Paths, ports: Ports, launcher: Launcher) -> Started:
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    client = f"http://127.0.0.1:{ports.etcd_client}"
    process = launcher.start("etcd", [
        str(binary("etcd")), "--name=sandbox", f"--data-dir={paths.etcd_data}",
        f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=sandbox={peer}", "--initial-cluster-state=new",
        "--unsafe-no-fsync=true",  # a sandbox's data is thrown away: fsync only costs time
        "--log-level=warn",
    ])
    wait_until(process, lambda: https_ok(f"{client}/health"), START_TIMEOUT, "serving")
    return process


def start_apiserver(paths: Paths, ports: Ports, files: ControlPlaneFiles, launcher: Launcher) -> Started:
    process = launcher.start("kube-apiserver", [
        str(binary("kube-apiserver")),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={ports.apiserver}",
        f"--cert-dir={paths.pki / 'apiserver'}",
        f"--tls-cert-file={files.apiserver_cert}", f"--tls-private-key-file={files.apiserver_key}",
        f"--client-ca-file={files.ca_file}",
        f"--token-auth-file={paths.token_file}",
        "--authorization-mode=RBAC",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--service-account-issuer={files.server}",
        f"--service-account-key-file={files.sa_public}",
        f"--service-account-signing-key-file={files.sa_private}",
        "--allow-privileged=true",  # TPU workloads may run privileged containers, as GKE allows
        "--profiling=false",
        "--v=1",
    ])
    wait_until(process, lambda: https_ok(f"{files.server}/readyz", files.ca_file, files.token),
               START_TIMEOUT, "ready (/readyz)")
    return process


def _start_component(name: str, paths: Paths, port: int, launcher: Launcher, *flags: str) -> Started:
    """kube-controller-manager or kube-scheduler: the admin kubeconfig for everything, its health on loopback."""
    kubeconfig = str(paths.kubeconfig)
    process = launcher.start(name, [
        str(binary(name)),
        f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1", f"--secure-port={port}", f"--cert-dir={paths.pki / name}",
        "--leader-elect=false", "--profiling=false", "--v=1", *flags,
    ])
    wait_until(process, lambda: _healthy(f"https://127.0.0.1:{port}/healthz"), START_TIMEOUT, "healthy")
    return process


def start_controller_manager(paths: Paths, ports: Ports, files: ControlPlaneFiles, launcher: Launcher) -> Started:
    """Every default controller but the TTL controller, which annotates each node with how long its kubelet may cache
    Secrets (an update per node, and no kubelet here); nodes go NotReady after kwok's lease duration."""
    return _start_component("kube-controller-manager", paths, ports.controller_manager, launcher,
                            f"--service-account-private-key-file={files.sa_private}", f"--root-ca-file={files.ca_file}",
                            "--use-service-account-credentials=false", f"--kube-api-qps={API_QPS}",
                            f"--kube-api-burst={API_BURST}", f"--node-monitor-grace-period={NODE_LEASE_SECONDS}s",
                            "--controllers=*,-ttl")


def start_scheduler(paths: Paths, ports: Ports, launcher: Launcher) -> Started:
    """kube-scheduler with a configuration file: its client's rate limit is set there (its flag is deprecated),
    and a configuration file makes it ignore the kubeconfig and leader-election flags, so it holds them too."""
    config = paths.pki / "kube-scheduler.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(paths.kubeconfig), "qps": API_QPS, "burst": API_BURST},
        "leaderElection": {"leaderElect": False},
    }, sort_keys=False))
    return _start_component("kube-scheduler", paths, ports.scheduler, launcher, f"--config={config}")


def _healthy(url: str) -> bool:
    """The controller-manager and scheduler serve /healthz with a self-signed certificate of their own making;
    only their liveness is asked here, so the certificate is not checked."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False
