"""`connect()`: use the Shared Pathways Service from a laptop or a notebook, and leave nothing behind.

    with connect("pw-pathways-head-0-0.pw.pw.svc:29001", {"v6e-4": 2}, "gs://my-scratch"):
        import jax
        print(jax.devices())

The address is the stack's `pathways_service` output; the short `pw-pathways-head-0-0.pw:29001` is accepted too
(its JobSet is then looked for in namespace `pw`, where the stack puts the service).

What happens, in order:
1. Every argument is checked before anything is created (ConfigError naming the parameter), and pathwaysutils,
   which registers JAX's `proxy` backend, must be installed.
2. JAX must not have a backend in this process yet: one created before would go on serving `jax.devices()` inside
   the session (this machine's CPU, not the service's TPUs). That is refused, with how to fix it.
3. One namespace is resolved once (argument > kube context's namespace > "default") and used for every call.
4. Unless `proxy_image` is given, the service's JobSet is read: the proxy image is the one built with the service's
   server image (a proxy of another version fails in obscure ways), and a TPU type the service does not offer is a
   ConfigError (its slices would never be placed). A JobSet that cannot be read is an error asking for proxy_image.
   This client's jax and jaxlib must equal the JAX of the service's server image and of its sidecar image, as
   their tags say (ConnectError with the `pip install` that fixes it); a tag that does not say is a notice.
5. A proxy Job (rendered by `tpuplane.infra.pathways.proxy`) is created. It carries a heartbeat annotation that a
   background thread renews, `activeDeadlineSeconds` and `ttlSecondsAfterFinished`, so a proxy whose client was
   SIGKILLed is reaped by `tpuplane janitor` instead of holding slices forever.
6. The pod is watched until Ready (the proxy's port accepts connections), with progress on stderr. Giving up
   says why: unschedulable, image pull error, crash, or a timeout, with the pod's recent events.
7. The proxy's log is followed until the service has placed every slice asked for, as pathwaysutils reads it
   (`unplaced -> placed` lines), its placement messages streamed to stderr: while every TPU is taken, the wait shows
   why, and gives up after `placement_timeout` with the last of them.
8. `kubectl port-forward` to a free local port, supervised (restarted once, then a clear error); on Linux the kernel
   ends it if this process dies, even by SIGKILL.
9. JAX_PLATFORMS=proxy and JAX_BACKEND_TARGET=grpc://localhost:<port> in the environment and in jax.config, then
   `pathwaysutils.initialize()`, which registers the `proxy` backend.
Cleanup is idempotent and runs on normal exit, on exceptions, on SIGINT/SIGTERM/SIGHUP (then the previous
handler runs) and at interpreter exit: JAX's backends and caches cleared (arrays of the session die with it),
forwarder killed and reaped, heartbeat stopped, Job deleted, JAX settings restored. A signal that arrives during
cleanup, or while the create request is in flight, waits until that finishes (so a second Ctrl-C cannot leave the
Job behind), then is delivered again.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import getpass
import json
import os
import math
import secrets
import signal
import string
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from types import FrameType
from typing import Any

from rich.console import Console
from rich.markup import escape

from tpuplane.infra.pathways import proxy
from tpuplane.infra.fleet.catalog import TpuSpec
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.pathways.images import jax_version_of_tag
from tpuplane.infra.pathways.sidecar_image import sidecar_jax_version
from tpuplane.runtime.kube import ApiException, ApiUnreachable, KubeApi
from tpuplane.runtime.port_forward import ForwarderError, PortForwarder, free_local_port, kubectl_port_forward_argv

MAX_LIFETIME_SECONDS = 366 * 24 * 3600  # the proxy Job's activeDeadlineSeconds
DEFAULT_TIMEOUT_SECONDS = 600.0  # cold pools and first image pulls take minutes, not the public client's 30 s
DEFAULT_PLACEMENT_TIMEOUT_SECONDS = 1800.0  # other clients hold the TPUs: their jobs end, or the user goes home
DEFAULT_HEARTBEAT_SECONDS = 30.0
# The janitor's default judges a proxy dead after 600 s of silence: at least four beats must fit in that window,
# so one slow or failed renewal never gets a live session reaped.
MAX_HEARTBEAT_SECONDS = proxy.DEFAULT_STALE_AFTER_SECONDS / 4
DEFAULT_NAMESPACE = "default"
JAX_SETTINGS = ("JAX_PLATFORMS", "JAX_BACKEND_TARGET")  # env names; jax.config options are their lowercase
_EVENT_LINES = 8
_EVENT_WIDTH = 200
_EVENTS_WITHIN_SECONDS = 10.0  # the diagnosis after giving up must not take longer than a short wait
_DELETE_ATTEMPTS = 4
_DELETE_BACKOFF_SECONDS = 0.2
_HANDLED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class ConnectError(RuntimeError):
    """connect() could not give a working session, or could not clean up after one; the message says why."""


class ProxyNotReady(ConnectError):
    """The proxy pod did not become Ready: unschedulable, image pull error, crash, or the timeout ran out."""


class ProxyNotPlaced(ConnectError):
    """The service did not place every slice asked for within `placement_timeout` (its TPUs were all taken)."""


# ---- decisions (pure) -------------------------------------------------------------------------------------------


def resolve_namespace(explicit: str | None, context_namespace: str | None) -> str:
    """The argument wins, then the kube context's namespace, then "default"."""
    return explicit or context_namespace or DEFAULT_NAMESPACE


@dataclass(frozen=True)
class PodProgress:
    """Where the proxy pod is on its way to Ready, in words, and whether waiting longer can help."""

    phase: str  # short: "scheduling", "pulling image", ...
    detail: str = ""  # why it is there, from the pod's conditions and container states
    ready: bool = False
    fatal: bool = False


_FATAL_WAITING = {
    "CrashLoopBackOff": "crash loop",
    "InvalidImageName": "image pull error",
    "ErrImageNeverPull": "image pull error",
    "CreateContainerConfigError": "container config error",
    "CreateContainerError": "container config error",
    "RunContainerError": "container start error",
}
_PULL_WAITING = {"ErrImagePull", "ImagePullBackOff"}


def describe_pod(pod: Mapping[str, Any] | None) -> PodProgress:
    """The proxy pod's progress, from a pod in the API's JSON form (None: not created yet)."""
    if pod is None:
        return PodProgress("creating pod", "the Job controller has not created the proxy pod yet")
    status = pod.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    if (conditions.get("Ready") or {}).get("status") == "True":
        return PodProgress("ready", ready=True)
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated:
            detail = (f"container {container.get('name')} exited with code {terminated.get('exitCode')} "
                      f"({terminated.get('reason', 'no reason')}) {terminated.get('message', '')}").strip()
            return PodProgress("crashed", detail, fatal=True)
        if waiting:
            reason = waiting.get("reason", "")
            detail = f"{reason}: {waiting.get('message', '')}".strip(": ")
            if reason in _FATAL_WAITING:
                return PodProgress(_FATAL_WAITING[reason], detail, fatal=True)
            if reason in _PULL_WAITING:
                return PodProgress("image pull error", detail)
            return PodProgress("pulling image / starting container", detail)
        if state.get("running"):
            return PodProgress("starting proxy", f"waiting for port {proxy.PROXY_PORT} to accept connections")
    if status.get("phase") in ("Failed", "Succeeded"):
        return PodProgress("ended", f"pod phase {status['phase']}: {status.get('message', '')}".strip(": "),
                           fatal=True)
    scheduled = conditions.get("PodScheduled") or {}
    if scheduled.get("status") == "False":
        return PodProgress("unschedulable" if scheduled.get("reason") == "Unschedulable" else "scheduling",
                           scheduled.get("message", ""))
    if scheduled.get("status") == "True":
        return PodProgress("pulling image / starting container", "scheduled on a node")
    return PodProgress("scheduling", "waiting for the scheduler")


# How the proxy logs placement, read as pathwaysutils reads it: a slice is placed at each `unplaced -> placed`, and
# lines with these words say where placement stands (asked for, waiting, refused).
PLACED_PHRASE = "unplaced -> placed"
PLACEMENT_WORDS = ("placement", "signaling to rm", "transition slice", "failed_precondition")


def is_placement_message(line: str) -> bool:
    lowered = line.lower()
    return any(word in lowered for word in PLACEMENT_WORDS)


def places_a_slice(line: str) -> bool:
    return PLACED_PHRASE in line.lower()


@dataclass(frozen=True)
class JaxOf:
    """The JAX one part of a session runs: this client, or an image of the service (None: its tag does not say)."""

    what: str  # "its server image us-docker.pkg.dev/.../server:jax-0.10.0"
    version: str | None


def jax_skew(client_jax: str, client_jaxlib: str | None, parts: Sequence[JaxOf]) -> tuple[str | None, list[str]]:
    """Whether this client may talk to the service: (an error naming the skew and its fix, or None; notices about
    the parts whose JAX cannot be told). Client, proxy, server and sidecar must run exactly the same jax and jaxlib:
    arrays, programs and pickled functions travel between them."""
    known = [part for part in parts if part.version is not None]
    notices = [f"cannot tell the JAX of {part.what} from its tag; it must be jax {client_jax}"
               for part in parts if part.version is None]
    service_versions = {part.version for part in known}
    client_versions = {client_jax, client_jaxlib or client_jax}
    if not known or service_versions == client_versions:
        return None, notices
    said = ", ".join(f"{part.what} runs jax {part.version}" for part in known)
    mine = f"this client has jax {client_jax} and jaxlib {client_jaxlib or 'not installed'}"
    if len(service_versions) > 1:
        fix = "the service's own images disagree: rebuild them for one JAX (the stack's jaxVersion)"
    else:
        (wanted,) = service_versions
        fix = f"pip install jax=={wanted} jaxlib=={wanted}"
    return (f"version skew: {said}; {mine}. Client, proxy, server and sidecar must run exactly the same jax and "
            f"jaxlib (arrays, programs and pickled functions travel between them). Fix: {fix}"), notices


def _event_time(event: Mapping[str, Any]) -> str:
    meta = event.get("metadata") or {}
    return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
               or meta.get("creationTimestamp") or "")


def recent_events(events: Sequence[Mapping[str, Any]], limit: int = _EVENT_LINES, width: int = _EVENT_WIDTH) -> list[str]:
    """The newest `limit` events, oldest first, one trimmed line each: `Warning FailedScheduling: 0/3 nodes ...`."""
    lines = []
    for event in sorted(events, key=_event_time)[-limit:]:
        count = event.get("count") or 1
        text = f"{event.get('type', 'Normal')} {event.get('reason', '')}: {' '.join(str(event.get('message', '')).split())}"
        text = text if len(text) <= width else text[: width - 3] + "..."
        lines.append(f"{text} (x{count})" if count > 1 else text)
    return lines


def _api_message(error: ApiException) -> str:
    """`403 Forbidden: jobs.batch is forbidden: User ... cannot create ...` from an ApiException."""
    message = ""
    try:
        message = json.loads(error.body or "{}").get("message", "")
    except (ValueError, AttributeError):
        message = str(error.body or "")
    return f"{error.status} {error.reason or ''}{': ' + message if message else ''}".strip()


def _random_suffix() -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(proxy.PROXY_NAME_SUFFIX_LENGTH))


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "user"


def _installed(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _refuse_jax_with_a_backend() -> None:
    """A backend JAX created before the session would keep serving it: refuse, before anything is created."""
    if "jax" not in sys.modules:
        return
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        raise ConnectError(
            "JAX already has a backend in this process (jax.devices() or a computation ran before connect()), so "
            "inside the session JAX would keep using it: jax.devices() would list this machine's devices, not the "
            "service's TPUs. Call connect() before the first JAX computation (restart the notebook kernel or the "
            "script), or release the backend first with jax.extend.backend.clear_backends() (arrays made so far "
            "become unusable)")


def _jax_option(config: Any, option: str) -> Any:
    """An option's value: jax_platforms is an attribute of jax.config, jax_backend_target only a flag to read."""
    try:
        return getattr(config, option)
    except AttributeError:
        return config.read(option)


def _proxy_backend_registered() -> bool:
    from jax._src import xla_bridge

    return "proxy" in xla_bridge._backend_factories


# ---- the session ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Request:
    """Validated connect() arguments."""

    service: str
    slices: tuple[tuple[TpuSpec, int], ...]
    tpu_names: tuple[str, ...]  # as the caller spelled them, one per slice entry (for error paths)
    gcs_location: str
    namespace: str | None
    context: str | None
    timeout: float
    image: str | None  # None: derive from the service's JobSet
    service_jobset: tuple[str, str] | None  # (namespace, name) of the service's JobSet, from its address
    options: proxy.ProxyOptions
    heartbeat_interval: float
    max_lifetime: int
    kubectl: str
    placement_timeout: float | None  # None: return without waiting for placement


def _positive(value: object, path: str, problems: list[Problem], allowed: str = "a number > 0") -> None:
    """A finite number above zero: NaN compares false with everything, so it is refused by name."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        problems.append(Problem(path, value, allowed))


def validate_request(pathways_service: str, tpus: Mapping[str, int], gcs_bucket: str, *, namespace: str | None,
                     context: str | None, timeout: float, proxy_image: str | None, proxy_options: Sequence[str],
                     heartbeat_interval: float, max_lifetime: int, kubectl: str,
                     placement_timeout: float | None = DEFAULT_PLACEMENT_TIMEOUT_SECONDS) -> _Request:
    """Every connect() rule at once, so one error lists every mistake, each under its parameter name."""
    problems: list[Problem] = []
    results: dict[str, Any] = {}
    checks: list[tuple[str, Callable[[], Any]]] = [
        ("service", lambda: proxy.parse_service_address(pathways_service) and pathways_service),  # kept as given
        ("slices", lambda: tuple(proxy.parse_tpus(tpus))),
        ("gcs_location", lambda: proxy.parse_gcs_location(gcs_bucket)),
        ("image", lambda: proxy_image if proxy_image is None else proxy.parse_image(proxy_image)),
        ("options", lambda: proxy.parse_proxy_options(proxy_options)),
        ("namespace", lambda: namespace if namespace is None else proxy.parse_name(namespace, path="namespace")),
    ]
    for key, check in checks:
        try:
            results[key] = check()
        except ConfigError as error:
            problems.extend(error.problems)
    _positive(timeout, "timeout", problems, "seconds > 0")
    if placement_timeout is not None:
        _positive(placement_timeout, "placement_timeout", problems,
                  "seconds > 0, or None to return without waiting for the slices to be placed")
    heartbeat_allowed = f"seconds > 0 and <= {MAX_HEARTBEAT_SECONDS:g}"
    _positive(heartbeat_interval, "heartbeat_interval", problems, heartbeat_allowed)
    if not any(p.path == "heartbeat_interval" for p in problems) and heartbeat_interval > MAX_HEARTBEAT_SECONDS:
        problems.append(Problem("heartbeat_interval", heartbeat_interval, heartbeat_allowed,
                                f"`tpuplane janitor` deletes a proxy silent for {proxy.DEFAULT_STALE_AFTER_SECONDS} s "
                                f"by default; four beats must fit in that"))
    jobset = proxy.service_jobset(pathways_service) if "service" in results else None
    if proxy_image is None and "service" in results and jobset is None:
        problems.append(Problem("proxy_image", None, "an image reference such as " + proxy.EXAMPLE_PROXY_IMAGE,
                                f"{pathways_service} is not a tpuplane service address "
                                f"(<name>-pathways-head-0-0.<name>[.<namespace>.svc]:<port>), so the service's "
                                f"server image cannot be looked up; pass the proxy_server image with its tag"))
    _positive(max_lifetime, "max_lifetime", problems, f"whole seconds > 0, at most {MAX_LIFETIME_SECONDS}")
    if not any(p.path == "max_lifetime" for p in problems) and (
            max_lifetime != int(max_lifetime) or max_lifetime > MAX_LIFETIME_SECONDS):
        problems.append(Problem("max_lifetime", max_lifetime, f"whole seconds > 0, at most {MAX_LIFETIME_SECONDS}",
                                "a proxy that outlives a year is a leak, not a session"
                                if max_lifetime > MAX_LIFETIME_SECONDS else ""))
    if not problems and max_lifetime <= timeout:
        problems.append(Problem("max_lifetime", max_lifetime, f"more than timeout ({timeout:g} s)"))
    if context is not None and (not isinstance(context, str) or not context.strip()):
        problems.append(Problem("context", context, "a kubeconfig context name, or None for the current one"))
    if problems:
        raise ConfigError(problems)
    return _Request(context=context, timeout=float(timeout), heartbeat_interval=float(heartbeat_interval),
                    max_lifetime=int(max_lifetime), kubectl=kubectl, service_jobset=jobset,
                    tpu_names=tuple(tpus), **results,
                    placement_timeout=None if placement_timeout is None else float(placement_timeout))


def connect(pathways_service: str, tpus: Mapping[str, int], gcs_bucket: str, *, namespace: str | None = None,
            context: str | None = None, timeout: float = DEFAULT_TIMEOUT_SECONDS,
            proxy_image: str | None = None, proxy_options: Sequence[str] = (),
            heartbeat_interval: float = DEFAULT_HEARTBEAT_SECONDS,
            max_lifetime: int = proxy.DEFAULT_ACTIVE_DEADLINE_SECONDS, kubectl: str = "kubectl",
            placement_timeout: float | None = DEFAULT_PLACEMENT_TIMEOUT_SECONDS,
            kube: KubeApi | None = None, console: Console | None = None) -> "PathwaysSession":
    """A session on the Shared Pathways Service; use it as a context manager. Validates now, creates on enter.

    pathways_service: `host:port` of the service's resource manager, the stack's `pathways_service` output:
        `pw-pathways-head-0-0.pw.pw.svc:29001` (the short `pw-pathways-head-0-0.pw:29001` is accepted too).
    tpus: virtual slices to ask for, by any catalog name or Pathways spelling: {"v6e-4": 2} or {"tpuv6e:2x2": 2}.
    gcs_bucket: the scratch location, `gs://bucket[/folder]` or `bucket`.
    timeout: seconds to wait for the proxy pod to be Ready. max_lifetime: the proxy Job's activeDeadlineSeconds.
    placement_timeout: seconds to wait, once the proxy is Ready, for the service to place every slice (it cannot
        while other clients hold its TPUs); None returns at once, and the first JAX call waits instead.
    proxy_image: the proxy_server image; by default the one matching the server image in the service's JobSet
        (which needs `get` on jobsets.jobset.x-k8s.io in the service's namespace).
    proxy_options: "key:value" strings (see `tpuplane.infra.pathways.proxy.PROXY_OPTION_FORMS`), e.g. "sidecar:true".
    heartbeat_interval: seconds between heartbeats, at most a quarter of the janitor's default stale_after.
    kube: a `KubeApi` (default: from `context`); kubectl: the binary used for port-forward.
    """
    request = validate_request(pathways_service, tpus, gcs_bucket, namespace=namespace, context=context,
                               timeout=timeout, proxy_image=proxy_image, proxy_options=proxy_options,
                               heartbeat_interval=heartbeat_interval, max_lifetime=max_lifetime, kubectl=kubectl,
                               placement_timeout=placement_timeout)
    _require_pathwaysutils()
    return PathwaysSession(request, kube=kube, console=console or Console(stderr=True))


def _require_pathwaysutils() -> None:
    """pathwaysutils registers JAX's `proxy` backend; without it the first JAX call fails with "backend 'proxy' is
    not in the list of known backends"."""
    try:
        import pathwaysutils  # noqa: F401 - imported here once, so the session's own import is instant
    except ImportError as missing:
        raise ConnectError(f"connect() sets JAX up for Pathways with pathwaysutils, which cannot be imported "
                           f"({missing}): pip install 'tpuplane[jax]'") from None


class _Heartbeat:
    """Renews the proxy Job's heartbeat annotation every `interval` seconds until stopped."""

    def __init__(self, kube: KubeApi, namespace: str, name: str, interval: float, warn: Callable[[str], None]):
        self._kube, self._namespace, self._name, self._interval, self._warn = kube, namespace, name, interval, warn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._kube.patch_job_annotations(self._namespace, self._name, proxy.heartbeat_annotations(time.time()))
            except ApiException as error:
                if error.status == 404:
                    self._warn(f"proxy Job {self._name} is gone (deleted, or past its deadline); heartbeat stopped")
                    return
                self._warn(f"heartbeat for proxy Job {self._name} failed: {_api_message(error)}")
            except Exception as error:  # network trouble: keep trying, the janitor's margin is 20 beats
                self._warn(f"heartbeat for proxy Job {self._name} failed: {error}")


class _ExitHooks:
    """atexit + signal handlers that run the cleanup, chained to (and restored to) the previous handlers.

    Inside `deferring()` (the cleanup itself, and the create request whose outcome the cleanup must know) a handled
    signal is only noted, and delivered again when the outermost such block ends. Masking with pthread_sigmask
    would not do: it masks the calling thread only, the kernel then hands the signal to another thread (heartbeat,
    forwarder watcher), and CPython still runs the Python handler in the main thread.
    """

    def __init__(self, cleanup: Callable[[], None]):
        self._cleanup = cleanup
        self._previous: dict[int, Any] = {}
        self._depth = 0
        self._deferred: list[int] = []
        self._handling: int | None = None  # the signal whose handler is running the cleanup now

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                pending, self._deferred = self._deferred, []
                for signum in dict.fromkeys(pending):  # once each, in arrival order
                    if signum != self._handling:  # that one's handler is already under way
                        signal.raise_signal(signum)  # to our handler, or the restored previous one

    def has_deferred(self) -> bool:
        return bool(self._deferred)

    def install(self) -> None:
        atexit.register(self._cleanup)
        if threading.current_thread() is not threading.main_thread():
            return  # Python delivers signals to the main thread only; atexit still covers interpreter exit
        for signum in _HANDLED_SIGNALS:
            previous = signal.getsignal(signum)
            if previous in (signal.SIG_IGN, None):
                continue  # the process ignores it (or it is not Python's to handle): so do we
            self._previous[signum] = previous
            signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        atexit.unregister(self._cleanup)
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._handle:  # someone installed over us: leave theirs alone
                signal.signal(signum, previous)
        self._previous = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._depth:
            self._deferred.append(signum)
            return
        previous = self._previous.get(signum, signal.SIG_DFL)
        self._handling = signum
        try:
            self._cleanup()  # uninstalls us, restoring `previous`
        finally:
            self._handling = None
        if callable(previous):
            previous(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:
            raise SystemExit(128 + signum)


class PathwaysSession:
    """One client's proxy, port-forward and JAX settings. Enter to connect; exit (or `close()`) to tear down."""

    def __init__(self, request: _Request, *, kube: KubeApi | None, console: Console):
        self._request = request
        self._kube = kube
        self._console = console
        self._lock = threading.RLock()
        self._hooks = _ExitHooks(self._cleanup_quietly)
        self._heartbeat: _Heartbeat | None = None
        self._saved_env: dict[str, str | None] = {}
        self._saved_jax: dict[str, Any] = {}
        self._job_may_exist = False
        self.proxy_image: str | None = None
        self._entered = False
        self._closed = False
        self.namespace: str | None = None
        self.job_name: str | None = None
        self.pod_name: str | None = None
        self.forwarder: PortForwarder | None = None
        self.local_port: int | None = None

    @property
    def backend_target(self) -> str | None:
        return f"grpc://localhost:{self.local_port}" if self.local_port else None

    def check(self) -> None:
        """Raise if the port-forward is gone for good (it is also reported on stderr the moment it happens)."""
        if self.forwarder is not None and self.forwarder.failure is not None:
            raise ConnectError(str(self.forwarder.failure)) from self.forwarder.failure

    # -- enter --

    def __enter__(self) -> "PathwaysSession":
        if self._entered:
            raise ConnectError("a session can be entered once; call connect() again for a new one")
        self._entered = True
        self._hooks.install()
        try:
            self._connect()
        except BaseException as error:
            cleanup_error = self._cleanup()
            if self.forwarder is not None:  # started after a signal's cleanup had already run
                self.forwarder.stop()
            if cleanup_error is not None and isinstance(error, Exception):
                raise ConnectError(f"{error}\nCleanup also failed: {cleanup_error}") from error
            if cleanup_error is not None:
                self._console.print(f"[red]{escape(cleanup_error)}[/]")
            raise
        return self

    def _connect(self) -> None:
        request = self._request
        _refuse_jax_with_a_backend()
        if self._kube is None:
            try:
                self._kube = KubeApi.from_context(request.context)
            except Exception as error:
                raise ConnectError(f"cannot load Kubernetes credentials (context {request.context or 'current'}): "
                                   f"{error}. Hint: gcloud container clusters get-credentials <cluster>") from error
        self.namespace = resolve_namespace(request.namespace, self._kube.context_namespace())
        if request.image is not None:
            self.proxy_image = request.image
            self._check_jax([JaxOf(f"the proxy image {request.image}", jax_version_of_tag(request.image))])
        else:
            self.proxy_image = self._proxy_image_from_service()
        self.job_name = proxy.proxy_job_name(_user(), _random_suffix())
        self._create_job()
        self._ensure_open()
        self._heartbeat = _Heartbeat(self._kube, self.namespace, self.job_name, request.heartbeat_interval,
                                     self._warn)
        self._heartbeat.start()
        self.pod_name = self._wait_ready()
        if request.placement_timeout is not None:
            self._wait_placed(request.placement_timeout)
        self._start_forwarder()
        self._ensure_open()
        self._point_jax_at(self.backend_target)
        self._console.print(f"[green]Connected[/] to {request.service} through proxy Job {self.job_name} "
                            f"(namespace {self.namespace}); JAX_BACKEND_TARGET={self.backend_target}")

    def _proxy_image_from_service(self) -> str:
        """The proxy image matching the service's server image; also refuses TPU types the service does not offer."""
        request = self._request
        namespace, name = request.service_jobset
        where = f"JobSet {name} in namespace {namespace}"
        try:
            jobset = self._kube.get_jobset(namespace, name)
        except (ApiException, ApiUnreachable) as error:
            why = _api_message(error) if isinstance(error, ApiException) else str(error)
            hint = {403: f"your account may not get jobsets.jobset.x-k8s.io in namespace {namespace}",
                    404: f"is {request.service} the stack's pathways_service output?"}.get(
                        getattr(error, "status", None), "")
            raise ConnectError(f"cannot read the Pathways service's {where} to pick the proxy image that matches "
                               f"its server ({why}){'; ' + hint if hint else ''}. Pass proxy_image= explicitly: the "
                               f"proxy_server image with the same tag as the service's server image, e.g. "
                               f"{proxy.EXAMPLE_PROXY_IMAGE}") from None
        facts = proxy.read_service_jobset(jobset)
        self._check_jax([JaxOf(f"the service's {role} image {image}", version_of(image))
                         for role, image, version_of in (("server", facts.server_image, jax_version_of_tag),
                                                         ("sidecar", facts.sidecar_image, sidecar_jax_version))
                         if image])
        problems = proxy.offered_instance_type_problems(
            [(tpu_name, spec) for tpu_name, (spec, _) in zip(request.tpu_names, request.slices)], facts.instance_types)
        try:
            image = proxy.proxy_image_from_service(facts, f"{namespace}/{name}")
        except ConfigError as error:
            problems.extend(error.problems)
        if problems:
            raise ConfigError(problems)
        return image

    def _check_jax(self, parts: Sequence[JaxOf]) -> None:
        """Refuse a service that runs another JAX than this client, before anything is created."""
        error, notices = jax_skew(metadata.version("jax"), _installed("jaxlib"), parts)
        for notice in notices:
            self._warn(notice)
        if error is not None:
            raise ConnectError(error)

    def _wait_placed(self, timeout: float) -> None:
        """Follow the proxy's log until the service has placed every slice, streaming its placement messages;
        ProxyNotPlaced with the last of them after `timeout`. A log that falls silent or breaks is read again from
        its start: placements are counted anew, messages already shown are not shown twice."""
        wanted = sum(count for _, count in self._request.slices)
        deadline = time.monotonic() + timeout
        most_placed, messages = 0, []  # the furthest any read of the log got
        with self._console.status(f"proxy {self.job_name}: waiting for the service to place {wanted} slice(s)") \
                as status:
            while time.monotonic() < deadline:
                self._ensure_open()
                placed, seen = 0, []
                try:
                    for line in self._kube.follow_pod_log(self.namespace, self.pod_name, proxy.PROXY_CONTAINER,
                                                          within=max(0.0, deadline - time.monotonic())):
                        if is_placement_message(line):
                            seen.append(line)
                            if len(seen) > len(messages):
                                messages = list(seen)
                                self._console.print(f"proxy {self.job_name}: {line.strip()[:_EVENT_WIDTH]}",
                                                    markup=False, highlight=False)
                        if places_a_slice(line):
                            placed += 1
                            most_placed = max(most_placed, placed)
                            status.update(escape(f"proxy {self.job_name}: {placed} of {wanted} slice(s) placed"))
                            if placed >= wanted:
                                return
                        if time.monotonic() >= deadline:
                            break
                except ApiException as error:
                    if error.status in (401, 403):
                        raise ConnectError(
                            f"cannot read the log of proxy pod {self.pod_name} in namespace {self.namespace} to follow "
                            f"placement: {_api_message(error)}. Your account needs get on pods/log there; or pass "
                            f"placement_timeout=None to skip the wait (the first JAX call waits instead)") from None
                    time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))  # a transient refusal
                except ApiUnreachable:
                    pass  # no line within the read timeout, or the stream broke: read the log again
                else:
                    time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))  # the log ended: the proxy restarted
        raise ProxyNotPlaced(self._why_not_placed(most_placed, wanted, timeout, messages))

    def _why_not_placed(self, placed: int, wanted: int, timeout: float, messages: list[str]) -> str:
        asked = ", ".join(f"{count} x {name}" for name, (_, count) in zip(self._request.tpu_names,
                                                                          self._request.slices))
        shown = "\n  ".join(line.strip()[:_EVENT_WIDTH] for line in messages[-_EVENT_LINES:]) or "(none)"
        return (f"the service placed {placed} of the {wanted} slice(s) asked for ({asked}) within {timeout:g} s: "
                f"its TPUs of that type are held by other clients, or it has fewer than you asked for (proxy Job "
                f"{self.job_name}, namespace {self.namespace}). Try again later, ask for fewer slices, or raise "
                f"placement_timeout=.\nLast placement messages of the proxy:\n  {shown}")

    def _create_job(self) -> None:
        request = self._request
        manifest = proxy.render_proxy_job(proxy.ProxyJobSpec(
            name=self.job_name, namespace=self.namespace, service=request.service, slices=request.slices,
            gcs_location=request.gcs_location, heartbeat=int(time.time()), image=self.proxy_image,
            options=request.options, active_deadline_seconds=request.max_lifetime))
        # Assume the Job exists from the moment the request may leave: a lost response, a timeout or a signal
        # can all come after the server stored it. Cleanup deletes by name and takes 404 as done.
        self._job_may_exist = True
        try:
            with self._hooks.deferring():  # a signal now waits for the answer, so cleanup knows what to delete
                self._kube.create_job(self.namespace, manifest)
        except ApiException as error:
            # A 4xx stored nothing (and on 409 the name is someone else's Job, which must not be deleted).
            definite_refusal = error.status is not None and 400 <= error.status < 500
            self._job_may_exist = not definite_refusal
            hint = {401: "refresh your credentials (gcloud auth login)",
                    403: "your account needs create/get/list/patch/delete on jobs.batch and list on pods and "
                         "events in this namespace; pass namespace= for one where it has them"}.get(error.status, "")
            raise ConnectError(f"Kubernetes refused to create proxy Job {self.job_name} in namespace "
                               f"{self.namespace}: {_api_message(error)}" + (f". Hint: {hint}" if hint else "")
                               ) from None
        except ApiUnreachable as error:
            raise ConnectError(f"creating proxy Job {self.job_name} in namespace {self.namespace} got no answer "
                               f"({error}); it is deleted in case it was stored") from None

    def _wait_ready(self) -> str:
        """Poll the proxy pod until Ready; raise ProxyNotReady with the reason and recent events otherwise."""
        request = self._request
        deadline = time.monotonic() + request.timeout
        poll = min(1.0, max(0.05, request.timeout / 20))
        progress, pod_name, shown = describe_pod(None), None, ""
        with self._console.status(f"proxy {self.job_name}: {progress.phase}") as status:
            while True:
                self._ensure_open()
                pod = self._newest_pod(within=max(0.0, deadline - time.monotonic()))
                pod_name = (pod or {}).get("metadata", {}).get("name", pod_name)
                progress = describe_pod(pod)
                line = f"proxy {self.job_name}: {progress.phase}" + (f" ({progress.detail})" if progress.detail else "")
                status.update(escape(line))
                if line != shown and not self._console.is_terminal:
                    self._console.print(line, markup=False, highlight=False)
                shown = line
                if progress.ready:
                    return pod_name
                if progress.fatal:
                    raise ProxyNotReady(self._why(f"proxy pod {pod_name} failed: {progress.phase}", progress,
                                                  pod_name))
                if time.monotonic() >= deadline:
                    raise ProxyNotReady(self._why(f"proxy pod not Ready after {request.timeout:g}s "
                                                  f"(last state: {progress.phase})", progress, pod_name))
                time.sleep(poll)

    def _ensure_open(self) -> None:
        """Stop setting up once cleanup has run (a signal handler chained to one that did not raise)."""
        if self._closed:
            raise ConnectError(f"session closed during setup; proxy Job {self.job_name} was cleaned up")

    def _newest_pod(self, within: float) -> dict[str, Any] | None:
        try:
            pods = self._kube.list_pods(self.namespace, f"job-name={self.job_name}", within=within)
        except ApiException as error:
            if error.status in (401, 403):
                raise ConnectError(f"cannot watch the proxy pod in namespace {self.namespace}: "
                                   f"{_api_message(error)}") from None
            return None  # a transient API error: the deadline still bounds the wait
        except ApiUnreachable:
            return None  # likewise; the request itself never outlasts the deadline
        pods.sort(key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""))
        return pods[-1] if pods else None

    def _why(self, headline: str, progress: PodProgress, pod_name: str | None) -> str:
        events: list[dict[str, Any]] = []
        for name in filter(None, (self.job_name, pod_name)):
            try:
                events.extend(self._kube.list_events(self.namespace, name, within=_EVENTS_WITHIN_SECONDS))
            except (ApiException, ApiUnreachable):
                pass  # the diagnosis is best-effort; the headline still says what happened
        lines = recent_events(events)
        detail = f"\n{progress.detail}" if progress.detail else ""
        shown = "\n  ".join(lines) if lines else "(none)"
        return f"{headline} (Job {self.job_name}, namespace {self.namespace}){detail}\nRecent events:\n  {shown}"

    def _start_forwarder(self) -> None:
        self.local_port = free_local_port()
        argv = kubectl_port_forward_argv(self._request.kubectl, self.namespace, self.pod_name, self.local_port,
                                         proxy.PROXY_PORT, self._request.context)
        self.forwarder = PortForwarder(argv, self.local_port, on_failure=self._forwarder_failed,
                                       on_restart=lambda text: self._warn(text))
        try:
            self.forwarder.start()
        except FileNotFoundError:
            raise ConnectError(f"{self._request.kubectl!r} not found: install kubectl or pass kubectl=<path>") \
                from None
        except ForwarderError as error:
            raise ConnectError(str(error)) from error

    def _forwarder_failed(self, error: ForwarderError) -> None:
        self._warn(f"{error}\nJAX calls will fail until you reconnect.")

    def _warn(self, text: str) -> None:
        self._console.print(f"[yellow]tpuplane:[/] {escape(text)}", highlight=False)

    # -- JAX settings --

    def _point_jax_at(self, target: str) -> None:
        """Send JAX to the proxy (environment and jax.config), then have pathwaysutils register the `proxy`
        backend, as it does for its own sessions."""
        import jax
        import pathwaysutils

        values = {"JAX_PLATFORMS": "proxy", "JAX_BACKEND_TARGET": target}
        self._saved_env = {name: os.environ.get(name) for name in JAX_SETTINGS}
        for name, value in values.items():
            option = name.lower()
            self._saved_jax[option] = _jax_option(jax.config, option)
            jax.config.update(option, value)
        os.environ.update(values)
        pathwaysutils.initialize()
        if not _proxy_backend_registered():
            # initialize() acts once per process: an earlier call, made before JAX_PLATFORMS=proxy, registered
            # nothing. Register the backend as that call would have.
            from pathwaysutils import proxy_backend

            proxy_backend.register_backend_factory()

    def _release_jax(self) -> None:
        """Clear JAX's backends and caches while the proxy is still reachable, as pathwaysutils does on exit: the
        session's arrays die with it, and a later session (or local JAX) starts afresh."""
        if self._saved_env:
            import jax
            import jax.extend.backend

            jax.extend.backend.clear_backends()
            jax.clear_caches()
            gc.collect()

    def _restore_jax(self) -> None:
        """Put JAX's settings back, in the environment and in jax.config."""
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self._saved_jax:
            import jax

            for option, value in self._saved_jax.items():
                jax.config.update(option, value)
        self._saved_env, self._saved_jax = {}, {}

    # -- exit --

    def __exit__(self, exc_type, exc, tb) -> None:
        failure = self.forwarder.failure if self.forwarder else None
        cleanup_error = self._cleanup()
        if exc_type is not None:
            if cleanup_error is not None:
                self._console.print(f"[red]{escape(cleanup_error)}[/]")
            return
        if cleanup_error is not None:
            raise ConnectError(cleanup_error)
        if failure is not None:
            raise ConnectError(f"the session lost its port-forward: {failure}") from failure

    def close(self) -> None:
        """Tear everything down now; raises ConnectError if the proxy Job could not be deleted."""
        cleanup_error = self._cleanup()
        if cleanup_error is not None:
            raise ConnectError(cleanup_error)

    def _cleanup_quietly(self) -> None:
        cleanup_error = self._cleanup()
        if cleanup_error is not None:
            self._console.print(f"[red]{escape(cleanup_error)}[/]")

    def _cleanup(self) -> str | None:
        """Clear JAX's backends, stop the heartbeat and the forwarder, delete the Job, restore JAX settings and
        handlers. Idempotent.

        Returns what could not be cleaned up, in words, or None.
        """
        with self._hooks.deferring(), self._lock:  # a second Ctrl-C waits until the Job is deleted
            if self._closed:
                return None
            self._closed = True
            try:
                try:
                    self._release_jax()  # first, while the proxy still answers
                finally:
                    if self._heartbeat is not None:
                        self._heartbeat.stop()
                    if self.forwarder is not None:
                        self.forwarder.stop()
                    error = self._delete_job() if self._job_may_exist else None
            finally:
                self._restore_jax()
                self._hooks.uninstall()
            if error is not None and self._hooks.has_deferred():  # the signal delivered next will not say it
                self._console.print(f"[red]{escape(error)}[/]")
            return error

    def _delete_job(self) -> str | None:
        last = ""
        for attempt in range(_DELETE_ATTEMPTS):
            try:
                self._kube.delete_job(self.namespace, self.job_name)
                return None
            except ApiException as error:
                if error.status == 404:
                    return None  # already gone: that is what we wanted
                last = _api_message(error)
                if error.status is not None and 400 <= error.status < 500 and error.status != 429:
                    break  # retrying will not change a refusal
            except Exception as error:  # network trouble: retry
                last = str(error)
            if attempt + 1 < _DELETE_ATTEMPTS:
                time.sleep(_DELETE_BACKOFF_SECONDS * 2 ** attempt)
        return (f"could not delete proxy Job {self.job_name} in namespace {self.namespace}: {last}. Its heartbeat "
                f"has stopped, so `tpuplane janitor` will delete it; or now: "
                f"kubectl delete job --namespace {self.namespace} {self.job_name}")
