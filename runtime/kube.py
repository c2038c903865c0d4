"""The few Kubernetes calls `connect()` and the janitor make, over the official `kubernetes` client.

This is the seam tests replace: a test passes an in-memory object with the same methods instead of `KubeApi`.
Objects go in and come out as plain dicts in the API's JSON form (camelCase), so the callers' decisions work on
the same shape the renderers produce. Errors are the client's own `ApiException` (status 403, 404, 500, ...);
the callers decide what each status means. It imports no pulumi, only `kubernetes` (extra `runtime`).
"""

from __future__ import annotations

import os
from typing import Any

from kubernetes import client, config
from kubernetes.client import ApiException

__all__ = ["ApiException", "KubeApi", "in_cluster"]

_SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(_SERVICE_ACCOUNT_NAMESPACE)


class KubeApi:
    """BatchV1Api + CoreV1Api bound to one kubeconfig context (or the pod's service account in a cluster)."""

    def __init__(self, api_client: client.ApiClient, context_namespace: str | None):
        self._batch = client.BatchV1Api(api_client)
        self._core = client.CoreV1Api(api_client)
        self._serialize = api_client.sanitize_for_serialization
        self._context_namespace = context_namespace

    @classmethod
    def from_context(cls, context: str | None = None) -> "KubeApi":
        """The kubeconfig's `context` (current one if None); inside a pod without kubeconfig, its service account.

        Uses a private ApiClient so that loading a context never changes the process-wide default configuration.
        """
        if context is None and in_cluster() and not os.environ.get("KUBECONFIG") \
                and not os.path.exists(os.path.expanduser(config.KUBE_CONFIG_DEFAULT_LOCATION)):
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            with open(_SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as handle:
                return cls(client.ApiClient(configuration), handle.read().strip() or None)
        config_file = os.environ.get("KUBECONFIG") or None  # read now: a notebook may set it after import
        contexts, current = config.list_kube_config_contexts(config_file)
        chosen = next((c for c in contexts if c["name"] == context), None) if context else current
        namespace = ((chosen or {}).get("context") or {}).get("namespace")
        return cls(config.new_client_from_config(config_file, context=context, persist_config=False), namespace)

    def context_namespace(self) -> str | None:
        """The namespace the kube context names, if any."""
        return self._context_namespace

    def create_job(self, namespace: str, manifest: dict[str, Any]) -> None:
        self._batch.create_namespaced_job(namespace, manifest)

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete a Job and, in the background, its pods."""
        self._batch.delete_namespaced_job(name, namespace, propagation_policy="Background")

    def patch_job_annotations(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self._batch.patch_namespaced_job(name, namespace, {"metadata": {"annotations": annotations}})

    def list_jobs(self, namespace: str | None, label_selector: str) -> list[dict[str, Any]]:
        """Jobs matching `label_selector` in `namespace`, or in every namespace when it is None."""
        if namespace is None:
            result = self._batch.list_job_for_all_namespaces(label_selector=label_selector)
        else:
            result = self._batch.list_namespaced_job(namespace, label_selector=label_selector)
        return [self._serialize(item) for item in result.items]

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        result = self._core.list_namespaced_pod(namespace, label_selector=label_selector)
        return [self._serialize(item) for item in result.items]

    def list_events(self, namespace: str, involved_object: str) -> list[dict[str, Any]]:
        """Events about one object (a pod or a Job) by name."""
        result = self._core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={involved_object}")
        return [self._serialize(item) for item in result.items]
