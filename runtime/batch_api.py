"""The Kubernetes calls of the day-two commands (`tpuplane workload submit/list/status/why/delete/wait/logs`,
`tpuplane queues`): `KubeApi` plus JobSets, Kueue's objects, nodes, pods, events and pod logs.

Same rules as `KubeApi`: plain dicts in the API's JSON form, every request bounded by the request timeout, and a
server that does not answer is `ApiUnreachable`. A server that answers with an error raises `ApiCallFailed`, an
`ApiException` that also says which call failed, on which resource, and whether the object or the whole resource
type is missing (a 404 on a list means the API server does not serve the type: a CRD that is not installed).
Writes are server-side apply with field manager `tpuplane` and deletes; nothing else here writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Callable

import urllib3
from kubernetes import client
from kubernetes.client import ApiException

from tpuplane.infra.durations import MAX_DURATION_SECONDS
from tpuplane.runtime.kube import (
    FIELD_MANAGER,
    JOBSET_GROUP,
    JOBSET_PLURAL,
    JOBSET_VERSION,
    ApiUnreachable,
    KubeApi,
    items_of,
    api_path,
    api_request,
)

KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"


@dataclass(frozen=True)
class Resource:
    """A custom resource type as the API serves it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}/{self.version}"

    def path(self, namespace: str | None = None, name: str | None = None) -> tuple[str, dict[str, str]]:
        return api_path(self.group, self.version, self.plural, namespace if self.namespaced else None, name)


JOBSETS = Resource(JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL, "JobSet")
WORKLOADS = Resource(KUEUE_GROUP, KUEUE_VERSION, "workloads", "Workload")
LOCAL_QUEUES = Resource(KUEUE_GROUP, KUEUE_VERSION, "localqueues", "LocalQueue")
CLUSTER_QUEUES = Resource(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", "ClusterQueue", namespaced=False)
RESOURCE_FLAVORS = Resource(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", "ResourceFlavor", namespaced=False)
ADMISSION_CHECKS = Resource(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", "AdmissionCheck", namespaced=False)
PRIORITY_CLASSES = Resource(KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", "WorkloadPriorityClass",
                            namespaced=False)


class ApiCallFailed(ApiException):
    """The API server refused a call: `status` (401, 403, 404, 409, 422, ...), its message, and what was asked."""

    def __init__(self, what: str, resource: str, error: ApiException):
        super().__init__(status=error.status, reason=error.reason)
        self.body, self.headers = error.body, error.headers
        self.what, self.resource = what, resource
        body = _status_body(error.body)
        self.message = " ".join(str(body.get("message") or "").split())
        details = body.get("details") if isinstance(body.get("details"), dict) else {}
        # A named object that is missing comes back with its name in the details; a type the server does not
        # serve comes back as a bare "the server could not find the requested resource".
        self.type_missing = error.status == 404 and not details.get("name")

    def __str__(self) -> str:
        return f"{self.what}: {self.status} {self.reason or ''}{': ' + self.message if self.message else ''}".strip()


def _status_body(body: Any) -> dict[str, Any]:
    try:
        parsed = json.loads(body) if isinstance(body, (str, bytes)) and body else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


class BatchApi(KubeApi):
    """`KubeApi` with the day-two calls. Build it with `BatchApi.from_context(context, kubeconfig=...)`."""

    def __init__(self, api_client: client.ApiClient, context_namespace: str | None, **kwargs: Any):
        super().__init__(api_client, context_namespace, **kwargs)
        self.server = str(api_client.configuration.host or "")

    def _call(self, what: str, call: Callable[..., Any], *args: Any, within: float | None = None,
              resource: str = "", **kwargs: Any) -> Any:
        try:
            return super()._call(what, call, *args, within=within, **kwargs)
        except ApiException as error:
            raise ApiCallFailed(what, resource, error) from None

    # ---- custom resources

    def list_objects(self, kind: Resource, namespace: str | None = None, label_selector: str = "",
                     *, within: float | None = None) -> list[dict[str, Any]]:
        """Objects of `kind` in `namespace`, or in every namespace (or cluster-wide) when it is None."""
        where = f" in {namespace}" if namespace and kind.namespaced else ""
        return items_of(self._request(f"list {kind}{where}", "GET", kind.path(namespace or None),
                                      query={"labelSelector": label_selector or None}, within=within,
                                      resource=str(kind)))

    def get_object(self, kind: Resource, namespace: str, name: str, *, within: float | None = None) -> dict[str, Any]:
        return self._request(f"get {kind.kind} {namespace}/{name}", "GET", kind.path(namespace, name), within=within,
                             resource=str(kind))

    def apply_object(self, kind: Resource, manifest: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply (field manager `tpuplane`); with `dry_run`, the server checks it and stores nothing."""
        meta = manifest["metadata"]
        return self._request(f"apply {kind.kind} {meta['namespace']}/{meta['name']}", "PATCH",
                             kind.path(meta["namespace"], meta["name"]), body=manifest,
                             query={"fieldManager": FIELD_MANAGER, "dryRun": "All" if dry_run else None},
                             content_type="application/apply-patch+yaml", resource=str(kind))

    def delete_object(self, kind: Resource, namespace: str, name: str) -> None:
        """Delete; the objects it owns (Kueue's Workload, child Jobs, pods) go in the background."""
        self._request(f"delete {kind.kind} {namespace}/{name}", "DELETE", kind.path(namespace, name),
                      query={"propagationPolicy": "Background"}, resource=str(kind))

    # ---- core objects

    def list_nodes(self) -> list[dict[str, Any]]:
        return items_of(self._request("list nodes", "GET", api_path("", "v1", "nodes"), resource="nodes/v1"))

    def list_claims(self) -> list[dict[str, Any]]:
        """The PersistentVolumeClaims of every namespace (what a workload may mount)."""
        claims = api_path("", "v1", "persistentvolumeclaims")
        return items_of(self._request("list persistentvolumeclaims", "GET", claims,
                                      resource="persistentvolumeclaims/v1"))

    def pods(self, namespace: str | None, label_selector: str, *, within: float | None = None) -> list[dict[str, Any]]:
        """Pods matching `label_selector` in `namespace`, or in every namespace when it is None."""
        if namespace is None:
            return items_of(self._request("list pods", "GET", api_path("", "v1", "pods"),
                                          query={"labelSelector": label_selector}, within=within, resource="pods/v1"))
        return self.list_pods(namespace, label_selector, within=within)

    def namespace_events(self, namespace: str) -> list[dict[str, Any]]:
        return items_of(self._request(f"list events in {namespace}", "GET", api_path("", "v1", "events", namespace),
                                      resource="events/v1"))

    def stream_log(self, namespace: str, pod: str, container: str | None, *, follow: bool,
                   tail_lines: int | None) -> Iterator[bytes]:
        """The pod's log as it arrives. Following waits for new lines as long as it takes (a read timeout of a
        year: the client refuses none at all; the connection timeout still applies); a dropped connection ends the
        stream with ApiUnreachable."""
        connect, read = self._request_timeout
        try:
            response = api_request(
                self._api_client, "GET", api_path("", "v1", "pods", namespace, pod, "log"), stream=True,
                query={"container": container, "follow": "true" if follow else "false", "tailLines": tail_lines},
                _request_timeout=(connect, float(MAX_DURATION_SECONDS) if follow else read))
        except ApiException as error:
            raise ApiCallFailed(f"read the log of pod {namespace}/{pod}", "pods/log", error) from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise ApiUnreachable(f"no answer from the Kubernetes API to read the log of pod {namespace}/{pod}: "
                                 f"{error}") from error
        try:
            yield from response.stream(4096)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise ApiUnreachable(f"the log stream of pod {namespace}/{pod} broke off: {error}") from error
        finally:
            response.release_conn()
