"""Find and delete proxy Jobs whose client stopped renewing the heartbeat.

A client renews `tpuplane.dev/heartbeat` (unix seconds) on its proxy Job every 30 s while it lives. A client that
was SIGKILLed, OOM-killed or suspended stops renewing, and its proxy would hold virtual slices until its
`activeDeadlineSeconds`. The janitor deletes it once the heartbeat is older than `stale_after`. The decision is the
pure `stale_proxies()`; `find_stale_proxies()` and `delete_proxies()` apply it through a `KubeApi`.

Clocks. The annotation holds the client's clock, which may be off (a laptop). So the time of the last heartbeat is
taken, when the API gives it, from the server: `metadata.managedFields[].time` of the entry that owns the
annotation, set by the API server on every renewal. Only without one is the client's value used, and then a proxy
counts as stale only after `stale_after + CLIENT_CLOCK_SKEW_SECONDS`. Either way the janitor compares with its own
clock, assumed NTP-synced with the API server's (true for the in-cluster CronJob and for GKE control planes).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tpuplane.infra.batch.api_objects import timestamp
from tpuplane.infra.pathways import proxy
from tpuplane.runtime.kube import ApiException, ApiUnreachable, KubeApi


CLIENT_CLOCK_SKEW_SECONDS = 120  # how far a client's clock may be behind before its live proxy would be reaped
SERVER_CLOCK, CLIENT_CLOCK, CREATION = "heartbeat (server clock)", "heartbeat (client clock)", "creation"


@dataclass(frozen=True)
class StaleProxy:
    namespace: str
    name: str
    last_seen: float  # unix seconds: the last heartbeat, or the creation time if the Job has no readable heartbeat
    silent_for: float  # seconds since last_seen
    source: str  # SERVER_CLOCK | CLIENT_CLOCK | CREATION: where last_seen comes from


@dataclass(frozen=True)
class SweepResult:
    proxy: StaleProxy
    deleted: bool
    error: str = ""  # why it could not be deleted


def _server_heartbeat(meta: Mapping[str, Any]) -> float | None:
    """When the API server last stored a heartbeat: the time of the managedFields entry owning the annotation."""
    times = []
    for entry in meta.get("managedFields") or []:
        annotations = (((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:annotations") or {})
        if f"f:{proxy.HEARTBEAT_ANNOTATION}" in annotations:
            times.append(timestamp(entry.get("time")))
    known = [t for t in times if t is not None]
    return max(known) if known else None


def last_seen(job: Mapping[str, Any]) -> tuple[float | None, str]:
    """(unix seconds, source) of the proxy's last sign of life: server-stamped heartbeat, client-stamped
    heartbeat, or creation time, in that order of trust."""
    meta = job.get("metadata") or {}
    server = _server_heartbeat(meta)
    if server is not None:
        return server, SERVER_CLOCK
    beat = str((meta.get("annotations") or {}).get(proxy.HEARTBEAT_ANNOTATION, ""))
    if beat.isdigit():
        return float(beat), CLIENT_CLOCK
    return timestamp(meta.get("creationTimestamp")), CREATION


def _is_proxy(job: Mapping[str, Any]) -> bool:
    labels = (job.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in proxy.PROXY_LABELS.items())


def stale_proxies(jobs: Iterable[Mapping[str, Any]], now: float, stale_after: float) -> list[StaleProxy]:
    """The tpuplane proxy Jobs (API JSON form) silent for more than `stale_after` seconds, oldest first.

    Jobs without tpuplane's proxy labels are never touched, whatever selector fetched them. A Job with a missing
    or unreadable heartbeat is judged by its creation time, so a client that died before its first beat is reaped
    too; one with neither is left alone. A heartbeat known only by the client's clock gets
    CLIENT_CLOCK_SKEW_SECONDS more (see the module docstring).
    """
    stale = []
    for job in jobs:
        if not _is_proxy(job):
            continue
        meta = job.get("metadata") or {}
        seen, source = last_seen(job)
        allowed = stale_after + (CLIENT_CLOCK_SKEW_SECONDS if source == CLIENT_CLOCK else 0)
        if seen is None or now - seen <= allowed:
            continue
        stale.append(StaleProxy(meta.get("namespace", ""), meta.get("name", ""), seen, now - seen, source))
    return sorted(stale, key=lambda p: (p.last_seen, p.namespace, p.name))


def find_stale_proxies(kube: KubeApi, namespace: str | None, stale_after: float,
                       now: float | None = None) -> list[StaleProxy]:
    """Stale proxies in `namespace` (every namespace when None)."""
    jobs = kube.list_jobs(namespace, proxy.PROXY_LABEL_SELECTOR)
    return stale_proxies(jobs, time.time() if now is None else now, stale_after)


def delete_proxies(kube: KubeApi, proxies: Iterable[StaleProxy]) -> list[SweepResult]:
    """Delete each proxy Job (pods follow in the background); one failure does not stop the others."""
    results = []
    for stale in proxies:
        try:
            kube.delete_job(stale.namespace, stale.name)
            results.append(SweepResult(stale, deleted=True))
        except ApiException as error:
            if error.status == 404:  # deleted meanwhile, by its client or another janitor
                results.append(SweepResult(stale, deleted=True))
            else:
                results.append(SweepResult(stale, deleted=False, error=f"{error.status} {error.reason}"))
        except ApiUnreachable as error:
            results.append(SweepResult(stale, deleted=False, error=str(error)))
    return results
