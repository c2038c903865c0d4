"""Kueue and JobSet as host processes, installed from the very charts of the modules their binaries come from.

`helm template` renders each pinned chart (`charts/kueue`, `charts/jobset` of the pinned Go modules) with the
values tpuplane's `BatchStack` gives Helm (`kueue_helm_values`, `jobset_helm_values`): the CRDs, webhook
configurations, RBAC and Kueue's manager configuration are exactly what a GKE cluster gets. What differs is only
where the controllers run: on this host, so

- each webhook and CRD conversion calls `https://127.0.0.1:<port><path>` instead of the chart's Service, with the
  sandbox CA as its `caBundle`;
- the Deployments, Services, PodDisruptionBudgets and Kueue's visibility APIService (it would point at a Service
  no pod serves, which stalls API discovery and namespace deletion) are not applied;
- Kueue's configuration is the chart's, with ports, certificate folder and leader election set for one host
  process. Kueue keeps managing its certificates itself (its `internalCertManagement`, as the chart sets it): the
  sandbox seeds the certificate Secret with a CA-signed certificate that also names 127.0.0.1, which Kueue's
  rotator accepts as valid and then injects into its webhooks and conversions. (With its certificate management
  off, Kueue 0.19 insists on metrics certificates under the fixed path /etc/kueue/metrics/certs.) JobSet's
  would write them to the fixed folder /tmp/k8s-webhook-server/serving-certs: it is turned off, and the sandbox
  gives JobSet its certificates in a folder of the sandbox's.
"""

from __future__ import annotations

import base64
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from tpuplane.sandbox import certs
from tpuplane.sandbox.processes import Launcher, Started, https_ok, wait_until
from tpuplane.sandbox.toolchain import binary, module_dir, MODULES_BY_FOLDER

# Kinds of a chart's render the sandbox leaves out: what would run the controller in a pod, or route to it.
NOT_APPLIED = frozenset({"Deployment", "Service", "PodDisruptionBudget", "APIService", "ConfigMap", "Secret"})
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
START_TIMEOUT = 90.0


@dataclass(frozen=True)
class Controller:
    """One controller: its chart in its pinned module, and how its webhook certificates come about."""

    name: str
    go_module: str
    chart: str  # path of the chart in the module
    namespace: str
    seeds_cert_secret: bool  # keeps the chart's certificate management, with a seeded Secret (see above)

    @property
    def module(self) -> str:
        """Its folder under toolchain/ (and its binary's name)."""
        return self.name


KUEUE = Controller("kueue", "sigs.k8s.io/kueue", "charts/kueue", "kueue-system", seeds_cert_secret=True)
JOBSET = Controller("jobset", "sigs.k8s.io/jobset", "charts/jobset", "jobset-system", seeds_cert_secret=False)
CONFIG_KEY = "controller_manager_config.yaml"  # the charts' ConfigMap key of the controller's configuration
KUEUE_CERT_SECRET = "kueue-webhook-server-cert"
KUEUE_CA_NAME = "kueue-ca"  # the name Kueue's rotator gives (and expects of) its CA
KUEUE_WEBHOOK_SERVICE = "kueue-webhook-service"


def render_chart(controller: Controller, values: dict[str, Any], work: Path) -> list[dict[str, Any]]:
    """`helm template` of the controller's pinned chart with tpuplane's values, CRDs included."""
    chart = module_dir(MODULES_BY_FOLDER[controller.module], controller.go_module) / controller.chart
    values_file = work / f"{controller.name}-values.json"
    values_file.write_text(json.dumps(values, sort_keys=True))
    result = subprocess.run(
        [str(binary("helm")), "template", controller.name, str(chart), "--namespace", controller.namespace,
         "--include-crds", "--values", str(values_file)],
        capture_output=True, text=True, env={"HOME": str(work), "HELM_CACHE_HOME": str(work / "helm"),
                                             "HELM_CONFIG_HOME": str(work / "helm"),
                                             "HELM_DATA_HOME": str(work / "helm")})
    if result.returncode:
        raise RuntimeError(f"helm template of {chart} failed: {result.stderr.strip()}")
    # libyaml's loader where PyYAML has it: the charts' CRDs are 1.7 MB of YAML (2.5 s in Python, 0.3 s in C)
    return [doc for doc in yaml.load_all(result.stdout, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if doc]


# The ProvisioningRequest API (cluster-autoscaler's, which GKE serves for queued provisioning), at the version
# Kueue builds against: with it, Kueue's provisioning admission check is active and creates a request per workload.
AUTOSCALER_APIS = "k8s.io/autoscaler/cluster-autoscaler/apis"
PROVISIONING_REQUEST_CRD = "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"


def provisioning_request_crd() -> dict[str, Any]:
    """The ProvisioningRequest CRD, from the module Kueue's go.mod pins. Nothing here provisions (that is GKE's
    part): a queued workload stays held at its admission check, as on GKE until capacity comes."""
    path = module_dir(MODULES_BY_FOLDER[KUEUE.module], AUTOSCALER_APIS) / PROVISIONING_REQUEST_CRD
    return yaml.safe_load(path.read_text())


def chart_configuration(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    """The controller Configuration the chart mounts (its manager ConfigMap)."""
    for doc in rendered:
        if doc.get("kind") == "ConfigMap" and CONFIG_KEY in doc.get("data", {}):
            return yaml.safe_load(doc["data"][CONFIG_KEY])
    raise RuntimeError(f"the chart rendered no ConfigMap with {CONFIG_KEY}")


def on_loopback(doc: dict[str, Any], port: int, ca_pem: bytes) -> dict[str, Any]:
    """A webhook configuration or CRD whose webhook calls go to `127.0.0.1:port` with the sandbox CA."""
    ca = base64.b64encode(ca_pem).decode()

    def client_config(config: dict[str, Any]) -> dict[str, Any]:
        path = config.get("service", {}).get("path", "/")
        return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}

    doc = json.loads(json.dumps(doc))
    if doc["kind"] in WEBHOOK_KINDS:
        for webhook in doc.get("webhooks", []):
            webhook["clientConfig"] = client_config(webhook["clientConfig"])
    elif doc["kind"] == "CustomResourceDefinition":
        webhook = doc.get("spec", {}).get("conversion", {}).get("webhook")
        if webhook and "clientConfig" in webhook:
            webhook["clientConfig"] = client_config(webhook["clientConfig"])
    return doc


def install_objects(controller: Controller, rendered: list[dict[str, Any]], port: int,
                    ca_pem: bytes) -> list[dict[str, Any]]:
    """What the sandbox applies of a chart's render, in order: namespace-less kinds first, CRDs before all."""
    kept = [on_loopback(doc, port, ca_pem) for doc in rendered if doc.get("kind") not in NOT_APPLIED]
    order = {"Namespace": 0, "CustomResourceDefinition": 1}
    return sorted(kept, key=lambda d: order.get(d["kind"], 2))


def kueue_cert_secret(ca: certs.KeyPair, namespace: str) -> dict[str, Any]:
    """Kueue's certificate Secret, seeded with `ca` (made by `certs.new_ca(KUEUE_CA_NAME)`): Kueue's rotator keeps
    a CA valid for its CA name and a certificate valid for its service name, and this one also names 127.0.0.1,
    the address the API server calls."""
    serving = certs.serving_cert(ca, "kueue-webhook", (f"{KUEUE_WEBHOOK_SERVICE}.{namespace}.svc",))

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": KUEUE_CERT_SECRET, "namespace": namespace},
            "data": {"ca.crt": b64(ca.cert_pem), "ca.key": b64(ca.key_pem),
                     "tls.crt": b64(serving.cert_pem), "tls.key": b64(serving.key_pem)}}


def mount_secret(secret: dict[str, Any], directory: Path) -> None:
    """Write a Secret's keys as files, as a kubelet mounts a Secret volume: Kueue's rotator waits for its
    certificates to appear in its certificate folder, where in a pod they come from the Secret."""
    directory.mkdir(parents=True, exist_ok=True)
    for key, value in secret["data"].items():
        path = directory / key
        path.write_bytes(base64.b64decode(value))
        path.chmod(0o600)


def host_configuration(controller: Controller, chart_config: dict[str, Any], *, webhook_port: int,
                       metrics_port: int, health_port: int, cert_dir: Path,
                       visibility_port: int | None = None) -> dict[str, Any]:
    """The chart's configuration with what one host process needs instead of a pod's defaults: loopback ports,
    a certificate folder of the sandbox's, one replica (no leader election)."""
    config = json.loads(json.dumps(chart_config))
    config["webhook"] = {**config.get("webhook", {}), "port": webhook_port, "host": "127.0.0.1",
                         "certDir": str(cert_dir)}
    config["metrics"] = {**config.get("metrics", {}), "bindAddress": f"127.0.0.1:{metrics_port}"}
    config["health"] = {**config.get("health", {}), "healthProbeBindAddress": f"127.0.0.1:{health_port}"}
    config["leaderElection"] = {**config.get("leaderElection", {}), "leaderElect": False}
    if visibility_port is not None:  # Kueue's on-demand visibility API, else on 0.0.0.0:8082
        config["visibilityServer"] = {"bindAddress": "127.0.0.1", "bindPort": visibility_port}
    if controller.seeds_cert_secret:
        config["namespace"] = controller.namespace
    else:  # JobSet's own certificate manager writes to a fixed /tmp folder: the sandbox gives it certificates
        config["internalCertManagement"] = {"enable": False}
    return config


def start_controller(controller: Controller, config: dict[str, Any], work: Path, kubeconfig: Path,
                     health_port: int, launcher: Launcher, webhook_ready: Callable[[], bool]) -> Started:
    """Start a controller with its configuration; ready once it reports ready and the API server reaches its
    webhook (`webhook_ready`)."""
    config_file = work / f"{controller.name}-config.yaml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=True))
    process = launcher.start(controller.name, [str(binary(controller.name)), f"--config={config_file}",
                                               f"--kubeconfig={kubeconfig}", "--zap-log-level=info"])
    wait_until(process, lambda: https_ok(f"http://127.0.0.1:{health_port}/readyz") and webhook_ready(),
               START_TIMEOUT, "ready with its webhook answering")
    return process
