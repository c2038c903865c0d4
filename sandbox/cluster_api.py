"""The sandbox's own writes to its API server: the controllers' objects, certificates and the fake nodes, by
server-side apply through the official `kubernetes` client (field manager `tpuplane-sandbox`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable

from kubernetes import client, config, dynamic
from kubernetes.client import ApiException

from tpuplane.runtime.kube import api_path, api_request, items_of

FIELD_MANAGER = "tpuplane-sandbox"


class ClusterApi:
    """A dynamic client on the sandbox's kubeconfig."""

    def __init__(self, kubeconfig: Path):
        configuration = client.Configuration()
        config.load_kube_config(str(kubeconfig), client_configuration=configuration)
        configuration.retries = False
        self.api_client = client.ApiClient(configuration)
        self._dynamic: dynamic.DynamicClient | None = None

    @property
    def dynamic(self) -> dynamic.DynamicClient:
        if self._dynamic is None:
            self._dynamic = dynamic.DynamicClient(self.api_client)
        return self._dynamic

    def forget_discovery(self) -> None:
        """New CRDs: the next call discovers their kinds afresh."""
        self._dynamic = None

    def _request(self, method: str, path: tuple[str, dict[str, str]], **kwargs: Any) -> Any:
        return api_request(self.api_client, method, path, **kwargs)

    def apply(self, objects: Iterable[dict[str, Any]]) -> None:
        for obj in objects:
            resource = self.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            namespace = obj["metadata"].get("namespace") if resource.namespaced else None
            resource.server_side_apply(body=obj, name=obj["metadata"]["name"], namespace=namespace,
                                       field_manager=FIELD_MANAGER, force_conflicts=True)

    def wait_for_crds(self, names: list[str], timeout: float = 60.0) -> None:
        """Until every CRD is Established (served)."""
        deadline = time.monotonic() + timeout
        pending = set(names)
        while pending and time.monotonic() < deadline:
            for name in sorted(pending):
                crd = self._request("GET", api_path("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                                    name=name))
                if any(c.get("type") == "Established" and c.get("status") == "True"
                       for c in crd.get("status", {}).get("conditions") or []):
                    pending.discard(name)
            if pending:
                time.sleep(0.2)
        if pending:
            raise RuntimeError(f"CRDs not established after {timeout:.0f} s: {', '.join(sorted(pending))}")
        self.forget_discovery()

    def accepts(self, obj: dict[str, Any]) -> bool:
        """A server-side dry-run create of `obj` goes through (its admission webhooks answer and allow it)."""
        try:
            resource = self.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            namespace = obj["metadata"].get("namespace") if resource.namespaced else None
            resource.create(body=obj, namespace=namespace, query_params=[("dryRun", "All")])
        except ApiException as exc:
            return exc.status == 409  # it exists: the webhooks admitted it once
        except Exception:  # noqa: BLE001 - discovery races while the controller starts: not yet
            return False
        return True

    def create_node(self, node: dict[str, Any]) -> None:
        """Register a node with its status, as a kubelet does: a Node's create keeps the status it carries."""
        self._request("POST", api_path("", "v1", "nodes"), body=node)

    def nodes_ready(self, names: set[str]) -> int:
        """How many of `names` take pods: Ready, and rid of the `node.kubernetes.io/not-ready` taint the node
        lifecycle controller puts on every new node (it lifts it some seconds after Ready; until then the
        scheduler leaves the node alone)."""
        def takes_pods(node: dict[str, Any]) -> bool:
            conditions = node.get("status", {}).get("conditions") or []
            taints = node.get("spec", {}).get("taints") or []
            return (any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
                    and not any(t.get("key", "").startswith("node.kubernetes.io/") for t in taints))

        nodes = items_of(self._request("GET", api_path("", "v1", "nodes")))
        return sum(1 for node in nodes if node["metadata"]["name"] in names and takes_pods(node))
