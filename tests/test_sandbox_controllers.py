"""How the sandbox turns a controller chart's render into what runs on loopback (no control plane needed)."""

from __future__ import annotations

import base64

import pytest

from tpuplane.sandbox import certs, controllers

CA = certs.new_ca()


def webhook_configuration(kind: str = "ValidatingWebhookConfiguration") -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "kueue-validating-webhook-configuration"},
            "webhooks": [{"name": "vworkload.kb.io", "clientConfig": {"service": {
                "name": "kueue-webhook-service", "namespace": "kueue-system",
                "path": "/validate-kueue-x-k8s-io-v1beta2-workload"}}}]}


def crd(conversion: bool) -> dict:
    spec: dict = {"group": "kueue.x-k8s.io"}
    if conversion:
        spec["conversion"] = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
            "service": {"name": "kueue-webhook-service", "namespace": "kueue-system", "path": "/convert"}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "workloads.kueue.x-k8s.io"}, "spec": spec}


@pytest.mark.parametrize("kind", controllers.WEBHOOK_KINDS)
def test_a_webhook_is_called_on_loopback_with_the_sandbox_ca(kind):
    moved = controllers.on_loopback(webhook_configuration(kind), 9443, CA.cert_pem)
    client = moved["webhooks"][0]["clientConfig"]
    assert client["url"] == "https://127.0.0.1:9443/validate-kueue-x-k8s-io-v1beta2-workload"
    assert base64.b64decode(client["caBundle"]) == CA.cert_pem
    assert "service" not in client


def test_a_crd_conversion_webhook_is_called_on_loopback():
    moved = controllers.on_loopback(crd(conversion=True), 9443, CA.cert_pem)
    assert moved["spec"]["conversion"]["webhook"]["clientConfig"]["url"] == "https://127.0.0.1:9443/convert"
    assert moved["spec"]["conversion"]["webhook"]["conversionReviewVersions"] == ["v1"]


def test_a_crd_without_conversion_is_left_as_rendered():
    assert controllers.on_loopback(crd(conversion=False), 9443, CA.cert_pem) == crd(conversion=False)


def test_moving_a_webhook_leaves_the_render_untouched():
    rendered = webhook_configuration()
    controllers.on_loopback(rendered, 9443, CA.cert_pem)
    assert rendered == webhook_configuration()


def test_what_runs_a_controller_in_a_pod_is_not_applied_and_crds_come_first():
    rendered = [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kueue-controller-manager"}},
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kueue-webhook-service"}},
                {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                 "metadata": {"name": "v1beta2.visibility.kueue.x-k8s.io"}},
                webhook_configuration(), crd(conversion=True),
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": "kueue-batch-user-role"}}]
    kinds = [d["kind"] for d in controllers.install_objects(controllers.KUEUE, rendered, 9443, CA.cert_pem)]
    assert kinds == ["CustomResourceDefinition", "ValidatingWebhookConfiguration", "ClusterRole"]


def test_kueue_runs_with_the_charts_configuration_on_loopback_ports(tmp_path):
    chart = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
             "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
             "manageJobsWithoutQueueName": False, "webhook": {"port": 9443},
             "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"}}
    host = controllers.host_configuration(controllers.KUEUE, chart, webhook_port=1001, metrics_port=1002,
                                          health_port=1003, cert_dir=tmp_path)
    assert host["integrations"] == chart["integrations"]
    assert host["manageJobsWithoutQueueName"] is False
    assert host["webhook"] == {"port": 1001, "host": "127.0.0.1", "certDir": str(tmp_path)}
    assert host["metrics"]["bindAddress"] == "127.0.0.1:1002"
    assert host["health"]["healthProbeBindAddress"] == "127.0.0.1:1003"
    assert host["leaderElection"]["leaderElect"] is False
    assert host["namespace"] == "kueue-system"


def test_jobset_runs_with_certificates_the_sandbox_gives_it(tmp_path):
    chart = {"internalCertManagement": {"enable": True, "webhookServiceName": "jobset-webhook-service"},
             "clientConnection": {"qps": 500, "burst": 500}}
    host = controllers.host_configuration(controllers.JOBSET, chart, webhook_port=1001, metrics_port=1002,
                                          health_port=1003, cert_dir=tmp_path)
    assert host["internalCertManagement"] == {"enable": False}
    assert host["webhook"]["certDir"] == str(tmp_path)
    assert host["clientConnection"] == {"qps": 500, "burst": 500}


def test_kueues_seeded_certificate_names_its_service_and_loopback():
    from cryptography import x509

    kueue_ca = certs.new_ca(controllers.KUEUE_CA_NAME)
    secret = controllers.kueue_cert_secret(kueue_ca, "kueue-system")
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kueue-webhook-service.kueue-system.svc" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert base64.b64decode(secret["data"]["ca.crt"]) == kueue_ca.cert_pem
