"""The few Kubernetes calls `connect()` and the janitor make, over the official `kubernetes` client.

This is the seam tests replace: a test passes an in-memory object with the same methods instead of `KubeApi`.
Objects go in and come out as plain dicts in the API's JSON form (camelCase), so the callers' decisions work on
the same shape the renderers produce. Errors are the client's own `ApiException` (status 403, 404, 500, ...) when
the server answered, and `ApiUnreachable` when it did not; the callers decide what each means. It imports no
pulumi, only `kubernetes` (extra `runtime`).

Every call is bounded: `(connect, read)` seconds per request (`DEFAULT_REQUEST_TIMEOUT`), and a caller that waits
against its own deadline passes `within=` (the seconds it has left), which caps both. urllib3's hidden retries are
off: a stalled GET retried three times would wait four read timeouts. The callers retry where it is safe.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client import ApiException

__all__ = ["ApiException", "ApiUnreachable", "DEFAULT_REQUEST_TIMEOUT", "FIELD_MANAGER", "KubeApi", "api_path",
           "api_request", "in_cluster", "items_of"]

DEFAULT_REQUEST_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds for one request
FIELD_MANAGER = "tpuplane"  # names tpuplane's writes in managedFields, where the janitor finds the server's clock
JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
_MIN_TIMEOUT = 0.05  # the client rejects a timeout of 0; a spent deadline still gets one short try
_SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class ApiUnreachable(ConnectionError):
    """No answer from the API server (refused, reset, or timed out): a write may or may not have taken effect."""


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(_SERVICE_ACCOUNT_NAMESPACE)


class KubeConfigError(ValueError):
    """No usable kubeconfig: missing, malformed, or without the context asked for. Bad input, never a crash."""


def api_path(group: str, version: str, plural: str, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> tuple[str, dict[str, str]]:
    """A resource's API path (the core group's under /api/v1, others under /apis), with the namespace and name as
    path parameters, which the client escapes."""
    template = f"/apis/{group}/{version}" if group else f"/api/{version}"
    params = {}
    if namespace is not None:
        template, params["namespace"] = template + "/namespaces/{namespace}", namespace
    template += f"/{plural}"
    if name is not None:
        template, params["name"] = template + "/{name}", name
    return template + (f"/{subresource}" if subresource else ""), params


def api_request(api_client: client.ApiClient, method: str, path: tuple[str, dict[str, str]], *,
                query: dict[str, Any] | None = None, body: Any = None, content_type: str | None = None,
                stream: bool = False, _request_timeout: Any = None) -> Any:
    """One call to the API server: its JSON answer as plain data, or with `stream` the open response to read.

    The client's typed API classes are not used: importing `CoreV1Api` costs its models (0.6 s of every command
    that lists pods), and their answers are models that would be turned back into dicts. Authentication, TLS, the
    exec credential plugin and the errors (`ApiException` with the server's status) are the client's, as for its
    `CustomObjectsApi`."""
    headers = {"Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    template, params = path
    request = api_client.param_serialize(
        method, template, path_params=params, header_params=headers, body=body, auth_settings=["BearerToken"],
        query_params=[(key, value) for key, value in (query or {}).items() if value is not None])
    response = api_client.call_api(*request, _request_timeout=_request_timeout)
    if stream and 200 <= response.status <= 299:
        return response.response
    response.read()
    return api_client.response_deserialize(response, {"2XX": "object"}).data


class KubeApi:
    """Jobs, pods, events and JobSets of one kubeconfig context (or a pod's service account), by API path.

    Build it with `from_context`, which also turns urllib3's retries off; a hand-made `api_client` keeps its own.
    """

    def __init__(self, api_client: client.ApiClient, context_namespace: str | None, *,
                 request_timeout: tuple[float, float] = DEFAULT_REQUEST_TIMEOUT):
        self._api_client = api_client
        self._context_namespace = context_namespace
        self._request_timeout = request_timeout

    @classmethod
    def from_context(cls, context: str | None = None, *, kubeconfig: str | None = None,
                     request_timeout: tuple[float, float] = DEFAULT_REQUEST_TIMEOUT) -> "KubeApi":
        """The kubeconfig's `context` (current one if None); inside a pod without kubeconfig, its service account.

        `kubeconfig` is a path, as kubectl's --kubeconfig (default: $KUBECONFIG, then ~/.kube/config). Uses a
        private ApiClient so that loading a context never changes the process-wide default configuration.
        """
        configuration = client.Configuration()
        configuration.retries = False  # see the module docstring
        if context is None and kubeconfig is None and in_cluster() and not os.environ.get("KUBECONFIG") \
                and not os.path.exists(os.path.expanduser(config.KUBE_CONFIG_DEFAULT_LOCATION)):
            config.load_incluster_config(client_configuration=configuration)
            with open(_SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as handle:
                return cls(client.ApiClient(configuration), handle.read().strip() or None,
                           request_timeout=request_timeout)
        config_file = kubeconfig or os.environ.get("KUBECONFIG") or None  # read now: a notebook may set it later
        where = config_file or config.KUBE_CONFIG_DEFAULT_LOCATION
        try:
            contexts, current = config.list_kube_config_contexts(config_file)
            names = [c.get("name") for c in contexts]
            if context is not None and context not in names:
                raise KubeConfigError(f"--context: got {context!r}; allowed: a context of {where}: "
                                      f"{', '.join(map(str, names)) or 'none'}")
            chosen = next((c for c in contexts if c["name"] == context), None) if context else current
            namespace = ((chosen or {}).get("context") or {}).get("namespace")
            api_client = config.new_client_from_config(config_file, context=context, persist_config=False,
                                                       client_configuration=configuration)
        except KubeConfigError:
            raise
        except yaml.YAMLError as exc:  # never quote the file: a kubeconfig holds tokens
            raise KubeConfigError(f"kubeconfig {where}: not valid YAML ({type(exc).__name__})") from None
        except (config.ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise KubeConfigError(f"kubeconfig {where}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]} "
                                  "(hint: set KUBECONFIG, or run `gcloud container clusters get-credentials`)") from None
        return cls(api_client, namespace, request_timeout=request_timeout)

    def context_namespace(self) -> str | None:
        """The namespace the kube context names, if any."""
        return self._context_namespace

    def _call(self, what: str, call: Callable[..., Any], *args: Any, within: float | None = None,
              **kwargs: Any) -> Any:
        """`call(*args, **kwargs)` within the request timeout (capped by `within` seconds); transport errors become
        ApiUnreachable naming `what` was asked."""
        connect, read = self._request_timeout
        if within is not None:
            connect, read = (max(_MIN_TIMEOUT, min(value, within)) for value in (connect, read))
        try:
            return call(*args, _request_timeout=(connect, read), **kwargs)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise ApiUnreachable(f"no answer from the Kubernetes API to {what} within {connect:g}s to connect "
                                 f"and {read:g}s to read: {error}") from error

    def _request(self, what: str, method: str, path: tuple[str, dict[str, str]], *, within: float | None = None,
                 **kwargs: Any) -> Any:
        """`api_request` within the request timeout (capped by `within`), named `what` in its errors."""
        return self._call(what, api_request, self._api_client, method, path, within=within, **kwargs)

    def create_job(self, namespace: str, manifest: dict[str, Any]) -> None:
        self._request(f"create Job {namespace}/{manifest['metadata']['name']}", "POST",
                      api_path("batch", "v1", "jobs", namespace), body=manifest,
                      query={"fieldManager": FIELD_MANAGER})

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete a Job and, in the background, its pods."""
        self._request(f"delete Job {namespace}/{name}", "DELETE", api_path("batch", "v1", "jobs", namespace, name),
                      query={"propagationPolicy": "Background"})

    def patch_job_annotations(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        """A JSON merge patch: only these annotations change, whatever else the Job carries."""
        self._request(f"patch Job {namespace}/{name}", "PATCH", api_path("batch", "v1", "jobs", namespace, name),
                      body={"metadata": {"annotations": annotations}}, query={"fieldManager": FIELD_MANAGER},
                      content_type="application/merge-patch+json")

    def list_jobs(self, namespace: str | None, label_selector: str) -> list[dict[str, Any]]:
        """Jobs matching `label_selector` in `namespace`, or in every namespace when it is None."""
        what = "list Jobs" if namespace is None else f"list Jobs in {namespace}"
        return items_of(self._request(what, "GET", api_path("batch", "v1", "jobs", namespace),
                                      query={"labelSelector": label_selector}))

    def list_pods(self, namespace: str, label_selector: str, *, within: float | None = None) -> list[dict[str, Any]]:
        return items_of(self._request(f"list pods in {namespace}", "GET", api_path("", "v1", "pods", namespace),
                                      query={"labelSelector": label_selector}, within=within))

    def list_events(self, namespace: str, involved_object: str, *, within: float | None = None) -> list[dict[str, Any]]:
        """Events about one object (a pod or a Job) by name."""
        return items_of(self._request(f"list events in {namespace}", "GET", api_path("", "v1", "events", namespace),
                                      query={"fieldSelector": f"involvedObject.name={involved_object}"},
                                      within=within))

    def follow_pod_log(self, namespace: str, pod: str, container: str, *,
                       within: float | None = None) -> Iterator[str]:
        """A container's log from its start, line by line, as it is written (`kubectl logs -f`). Ends when the
        container stops; ApiUnreachable when no line came within the read timeout (capped by `within`)."""
        response = self._request(f"read the log of pod {namespace}/{pod}", "GET",
                                 api_path("", "v1", "pods", namespace, pod, "log"),
                                 query={"container": container, "follow": "true"}, stream=True, within=within)
        try:
            for line in response:
                yield line.decode("utf-8", errors="replace").rstrip("\r\n")
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise ApiUnreachable(f"the log of pod {namespace}/{pod} stopped: {error}") from error
        finally:
            response.close()  # a stream read part-way cannot go back to the pool

    def get_jobset(self, namespace: str, name: str) -> dict[str, Any]:
        """A JobSet (jobset.x-k8s.io/v1alpha2), e.g. the Shared Pathways Service's, as a plain dict."""
        return self._request(f"get JobSet {namespace}/{name}", "GET",
                             api_path(JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL, namespace, name))


def items_of(answer: Any) -> list[dict[str, Any]]:
    """The objects of a list answer."""
    return [item for item in (answer or {}).get("items") or [] if isinstance(item, dict)]
