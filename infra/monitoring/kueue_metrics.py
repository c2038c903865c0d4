"""Managed Service for Prometheus collection of Kueue's metrics: a PodMonitoring and the credentials it scrapes with.

Kueue serves `/metrics` on its controller's container port `metrics` (8443) over HTTPS with its own certificate,
and only to callers authorised for the non-resource URL `/metrics`: its Helm chart ships the ClusterRole
`<release>-metrics-reader` for that (Kueue v0.19.2 `charts/kueue/templates/rbac/metrics_reader_role.yaml`,
`manager/manager.yaml`; pods labelled `control-plane: controller-manager`). Managed Prometheus sends a bearer token
read from a Secret that its collector (`gmp-system/collector`) is allowed to read, exactly as Google's sample for an
authenticated endpoint does: a service account bound to the reader role, its token Secret, and a Role letting the
collector read that Secret
(https://github.com/GoogleCloudPlatform/prometheus-engine/blob/v0.17.2/examples/inference-optimized-gateway/secret.yaml).
The certificate is Kueue's self-signed one, so verification is skipped as Kueue's own ServiceMonitor does
(chart value `metrics.serviceMonitor.tlsConfig.insecureSkipVerify: true`).

The PodMonitoring follows the CRD of prometheus-engine v0.17.2 (`tpuplane.infra.schemas`): a PodMonitoring scrapes pods
of its own namespace and names Secrets of that namespace only.
"""

from __future__ import annotations

from typing import Any

from tpuplane.infra.batch.kueue_config import KUEUE_NAMESPACE

KUEUE_RELEASE = "kueue"  # the Helm release tpuplane installs Kueue as
METRICS_READER = "tpuplane-kueue-metrics"  # service account, its token Secret, and the collector's Role
GMP_NAMESPACE = "gmp-system"
GMP_COLLECTOR = "collector"
SCRAPE_INTERVAL = "30s"
_LABELS = {"app.kubernetes.io/managed-by": "tpuplane"}


def _meta(name: str, namespace: str | None = KUEUE_NAMESPACE, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": dict(_LABELS), "name": name, **extra}
    if namespace:
        meta["namespace"] = namespace
    return meta


def render_pod_monitoring(*, interval: str = SCRAPE_INTERVAL) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.googleapis.com/v1",
        "kind": "PodMonitoring",
        "metadata": _meta("kueue"),
        "spec": {
            "endpoints": [{
                "authorization": {"credentials": {"secret": {"key": "token", "name": METRICS_READER}},
                                  "type": "Bearer"},
                "interval": interval,
                "path": "/metrics",
                "port": "metrics",
                "scheme": "https",
                "tls": {"insecureSkipVerify": True},
            }],
            "selector": {"matchLabels": {"app.kubernetes.io/instance": KUEUE_RELEASE,
                                         "control-plane": "controller-manager"}},
        },
    }


def render_kueue_metrics_collection(*, interval: str = SCRAPE_INTERVAL) -> list[dict[str, Any]]:
    """Everything Managed Prometheus needs to scrape Kueue, in apply order (the token Secret after its account)."""
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(METRICS_READER)},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
         "metadata": _meta(METRICS_READER, annotations={"kubernetes.io/service-account.name": METRICS_READER})},
        {"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": _meta(METRICS_READER, namespace=None),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": f"{KUEUE_RELEASE}-metrics-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": METRICS_READER, "namespace": KUEUE_NAMESPACE}]},
        {"apiVersion": rbac, "kind": "Role", "metadata": _meta(f"{METRICS_READER}-secret-read"),
         "rules": [{"apiGroups": [""], "resourceNames": [METRICS_READER], "resources": ["secrets"],
                    "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": rbac, "kind": "RoleBinding", "metadata": _meta(f"{METRICS_READER}-secret-read"),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{METRICS_READER}-secret-read"},
         "subjects": [{"kind": "ServiceAccount", "name": GMP_COLLECTOR, "namespace": GMP_NAMESPACE}]},
        render_pod_monitoring(interval=interval),
    ]
