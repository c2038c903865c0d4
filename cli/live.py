"""What every command that talks to a live cluster shares: kubectl's connection flags, and one clear line on stderr
with exit status 2 when the cluster cannot be used.

Flags as kubectl spells them: `--context`, `--kubeconfig`, `--request-timeout` (a duration; default 5s, where
kubectl's default is no limit), `-n/--namespace`. Each request gives up after the request timeout, so an
unreachable or stalled API server costs at most that long. The failures a user can fix each get their own line:
- an API server that does not answer (refused, timed out, unknown host, TLS);
- credentials it rejects (401: missing, wrong or expired);
- RBAC `forbidden` (403), quoting what was refused (an admission webhook's denial, which controller-runtime's
  webhooks also send as 403, is told apart: the object is refused, with the webhook's words);
- a resource type it does not serve (404 on a list: the Kueue or JobSet CRDs are not installed);
- a kubeconfig that is missing or broken, or a context it does not have.
The commands' own decisions live in `tpuplane.infra.batch`; this module only connects and reports.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn, Optional, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from tpuplane.cli import EXIT_BAD_INPUT
from tpuplane.infra.durations import parse_duration
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.redaction import redact_text

if TYPE_CHECKING:  # the kubernetes client (runtime extra) loads only when a command runs
    from tpuplane.runtime.batch_api import ApiCallFailed, BatchApi
    from tpuplane.runtime.kube import ApiUnreachable

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command Ctrl-C ended
T = TypeVar("T")
DEFAULT_REQUEST_TIMEOUT = "5s"
UNBOUNDED_WIDTH = 1_000_000  # columns: wider than any row (a condition's message is at most 32 KiB)

CONTEXT = typer.Option(None, "--context", help="The kubeconfig context to use (default: the current context).")
KUBECONFIG = typer.Option(None, "--kubeconfig",
                          help="Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).")
REQUEST_TIMEOUT = typer.Option(DEFAULT_REQUEST_TIMEOUT, "--request-timeout",
                               help="How long one API request may take before giving up: 5s, 1m, 1h30m; "
                                    "0 for no limit.")
NAMESPACE = typer.Option(None, "--namespace", "-n", help="Namespace (default: the context's, else 'default').")


def one_line(value: object) -> str:
    """Untrusted text for a terminal: secrets masked, control characters (newlines, escape sequences) made spaces,
    runs of space one, and rich markup escaped."""
    cleaned = "".join(ch if ch.isprintable() else " " for ch in redact_text(str(value)))
    return escape(" ".join(cleaned.split()))


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One line on stderr, then exit with `code`. Never shows a secret."""
    Console(stderr=True, emoji=False, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {one_line(message)}")
    raise typer.Exit(code)


def checked_name(value: Optional[str], what: str) -> Optional[str]:
    """A JobSet, experiment or namespace name as Kubernetes allows it (a DNS label of at most 63 characters),
    checked before it goes into a URL or a label selector."""
    from tpuplane.infra.naming import K8S_NAME

    if value is not None and not K8S_NAME.fullmatch(value):
        raise ConfigError.at(what, value, "lowercase letters, digits and '-', starting with a letter, at most 63",
                             "a Kubernetes name, as `tpuplane workload list` shows them")
    return value


def request_seconds(request_timeout: str) -> float:
    """The `--request-timeout` in seconds; 0 (no limit) is a year, which no request outlives."""
    from tpuplane.infra.durations import MAX_DURATION_SECONDS

    seconds = parse_duration(request_timeout, "--request-timeout")
    return seconds or float(MAX_DURATION_SECONDS)


def connect(context: Optional[str], kubeconfig: Optional[str], request_timeout: str) -> "BatchApi":
    from tpuplane.runtime.batch_api import BatchApi

    seconds = request_seconds(request_timeout)
    return BatchApi.from_context(context, kubeconfig=kubeconfig, request_timeout=(seconds, seconds))


def _transport_reason(error: BaseException, seconds: str) -> str:
    """What went wrong on the way to the API server, in words, from urllib3's exception chain."""
    import urllib3.exceptions as u3

    seen: BaseException | None = error
    while seen is not None:
        cause = getattr(seen, "reason", None) if isinstance(seen, u3.MaxRetryError) else None
        if isinstance(seen, u3.NameResolutionError):
            return "its host name does not resolve"
        if isinstance(seen, u3.NewConnectionError):  # before ConnectTimeoutError: urllib3 derives it from that
            return "the connection was refused (nothing listens there)" if "refused" in str(seen) \
                else "it cannot be connected to"
        if isinstance(seen, u3.ConnectTimeoutError):
            return f"it did not accept a connection within {seconds}"
        if isinstance(seen, u3.ReadTimeoutError):
            return f"it accepted the connection but did not answer within {seconds}"
        if isinstance(seen, u3.SSLError):
            text = str(seen)
            if "expired" in text:
                return "a TLS certificate has expired (the server's, or the client certificate in the kubeconfig)"
            if "CERTIFICATE_VERIFY_FAILED" in text:
                return "its TLS certificate is not signed by the kubeconfig's certificate authority"
            return "the TLS handshake failed"
        if isinstance(seen, u3.ProtocolError):
            return "the connection broke off"
        seen = cause or seen.__cause__
    return "it did not answer"


def unreachable_line(kube: "BatchApi | None", error: "ApiUnreachable", request_timeout: str) -> str:
    server = f" {kube.server}" if kube is not None and kube.server else ""
    return (f"cannot reach the Kubernetes API server{server}: {_transport_reason(error, request_timeout)}. Hint: is "
            "the cluster up, and do --context/--kubeconfig name it? (--request-timeout sets how long to wait)")


_CRD_OWNERS = {"kueue.x-k8s.io": "Kueue (>= 0.15, the first release serving kueue.x-k8s.io/v1beta2)",
               "jobset.x-k8s.io": "JobSet (jobset.x-k8s.io/v1alpha2)"}


def api_failure(kube: "BatchApi | None", error: "ApiCallFailed") -> tuple[str, int]:
    """The line and exit status for an error the API server answered with."""
    server = f" {kube.server}" if kube is not None and kube.server else ""
    if error.status == 401:
        return (f"the Kubernetes API server{server} rejected the credentials (401 Unauthorized): they are missing, "
                "wrong or expired. Hint: refresh them, e.g. `gcloud container clusters get-credentials CLUSTER "
                "--location LOCATION`, or pick another --context", EXIT_BAD_INPUT)
    if error.status == 403 and error.message.startswith("admission webhook "):
        # controller-runtime webhooks (Kueue's, JobSet's) deny with 403: the object is refused, not the user
        return f"{error.what}: the API server refused it: {error.message}", EXIT_BAD_INPUT
    if error.status == 403:
        return (f"forbidden: {error.message or error.what}. Hint: ask a cluster admin for this RBAC permission, or "
                "use a --context that has it", EXIT_BAD_INPUT)
    if error.status == 404 and error.type_missing:
        group = error.resource.split("/", 1)[0].split(".", 1)[-1]
        owner = _CRD_OWNERS.get(group)
        if owner:
            return (f"the cluster{server} does not serve {error.resource}: {owner} is not installed. Hint: install "
                    "it (tpuplane's BatchStack does), then retry", EXIT_BAD_INPUT)
        return f"the cluster{server} does not serve {error.resource or error.what}", EXIT_BAD_INPUT
    if error.status in (400, 404, 409, 422):
        return f"{error.what}: {error.message or error.reason}", EXIT_BAD_INPUT if error.status != 409 else EXIT_FAILED
    return (f"{error.what}: the API server failed ({error.status} {error.reason}): {error.message}".rstrip(": "),
            EXIT_FAILED)


@contextmanager
def cluster(context: Optional[str], kubeconfig: Optional[str], request_timeout: str) -> Iterator["BatchApi"]:
    """A connected `BatchApi`; any failure to use the cluster, inside the `with` too, ends the command with its
    one line (exit 2 for what the user can fix, 1 for the server's own failures), and Ctrl-C with `interrupted`
    (exit 130)."""
    from tpuplane.runtime.batch_api import ApiCallFailed
    from tpuplane.runtime.kube import ApiUnreachable, KubeConfigError

    kube = None
    try:
        kube = connect(context, kubeconfig, request_timeout)
        yield kube
    except (ConfigError, KubeConfigError) as error:
        fail(str(error))
    except ApiUnreachable as error:
        fail(unreachable_line(kube, error, request_timeout))
    except ApiCallFailed as error:
        fail(*api_failure(kube, error))
    except KeyboardInterrupt:  # Ctrl-C: the shell's status for SIGINT, one line instead of typer's "Aborted."
        console(stderr=True).print("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None


def console(stderr: bool = False) -> Console:
    """Tables at the terminal's width (long cells fold), or, into a pipe or file, each row on one line however
    wide (as kubectl prints them, for grep and awk); a line of text is never broken, whatever its length."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, emoji=False, highlight=False, soft_wrap=True,
                   width=None if stream.isatty() else UNBOUNDED_WIDTH)


def _redacted(value: object) -> object:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def echo_json(value: object) -> None:
    """JSON on stdout, every string through the same redaction as the tables."""
    sys.stdout.write(json.dumps(_redacted(value), indent=2, sort_keys=True) + "\n")


def optional_read(read: Callable[[], T], default: T) -> T:
    """A read that only adds detail: forbidden (403) or not served (404) leaves it out instead of ending the
    command."""
    from tpuplane.runtime.batch_api import ApiCallFailed

    try:
        return read()
    except ApiCallFailed as error:
        if error.status in (403, 404):
            return default
        raise


def interactive() -> bool:
    """May we ask a question? Only with a terminal on both ends."""
    return sys.stdin.isatty() and sys.stderr.isatty()
