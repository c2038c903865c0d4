"""Find and delete proxy Jobs whose client stopped renewing the heartbeat.

A client renews `tpuplane.dev/heartbeat` (unix seconds) on its proxy Job every 30 s while it lives. A client that
was SIGKILLed, OOM-killed or suspended stops renewing, and its proxy would hold virtual slices until its
`activeDeadlineSeconds`. The janitor deletes it once the heartbeat is older than `stale_after`. The decision is the
pure `stale_proxies()`; `sweep()` applies it through a `KubeApi`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tpuplane.infra import proxy
from tpuplane.runtime.kube import ApiException, KubeApi


@dataclass(frozen=True)
class StaleProxy:
    namespace: str
    name: str
    last_seen: float  # unix seconds: the heartbeat, or the creation time if the Job has no readable heartbeat
    silent_for: float  # seconds since last_seen
    source: str  # "heartbeat" | "creation"


@dataclass(frozen=True)
class SweepResult:
    proxy: StaleProxy
    deleted: bool
    error: str = ""  # why it could not be deleted


def _created_at(job: Mapping[str, Any]) -> float | None:
    created = (job.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return None
    try:
        return datetime.fromisoformat(str(created).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _is_proxy(job: Mapping[str, Any]) -> bool:
    labels = (job.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in proxy.PROXY_LABELS.items())


def stale_proxies(jobs: Iterable[Mapping[str, Any]], now: float, stale_after: float) -> list[StaleProxy]:
    """The tpuplane proxy Jobs (API JSON form) silent for more than `stale_after` seconds, oldest first.

    Jobs without tpuplane's proxy labels are never touched, whatever selector fetched them. A Job with a missing
    or unreadable heartbeat is judged by its creation time, so a client that died before its first beat is reaped
    too; one with neither is left alone.
    """
    stale = []
    for job in jobs:
        if not _is_proxy(job):
            continue
        meta = job.get("metadata") or {}
        beat = (meta.get("annotations") or {}).get(proxy.HEARTBEAT_ANNOTATION, "")
        last_seen, source = (float(beat), "heartbeat") if str(beat).isdigit() else (_created_at(job), "creation")
        if last_seen is None or now - last_seen <= stale_after:
            continue
        stale.append(StaleProxy(meta.get("namespace", ""), meta.get("name", ""), last_seen, now - last_seen, source))
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
    return results
