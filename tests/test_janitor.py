"""The janitor: which proxy Jobs are stale (a pure decision), deleting them, and the `tpuplane janitor` table.

A Kubernetes API server cannot exist here: `JobStore` is an in-memory stand-in for the two `KubeApi` methods the
janitor uses, raising the client's real `ApiException` when a fault is injected.
"""

from __future__ import annotations

import io
from datetime import datetime, timezone

import pytest
from kubernetes.client import ApiException
from rich.console import Console

from tpuplane.cli.janitor import EXIT_DELETE_FAILED, run_janitor
from tpuplane.infra.pathways import proxy
from tpuplane.runtime.janitor import CLIENT_CLOCK, CLIENT_CLOCK_SKEW_SECONDS, CREATION, SERVER_CLOCK, delete_proxies, \
    find_stale_proxies, stale_proxies
from tpuplane.runtime.kube import ApiUnreachable

NOW = 1_800_000_000.0
STALE_AFTER = 600


def job(name, namespace="team-a", heartbeat: object = NOW, labels=None, created="2027-01-15T08:00:00Z",
        stored_at: float | None = None):
    """A proxy Job in API JSON form; `stored_at`: when the API server stored the last heartbeat (managedFields)."""
    annotations = {} if heartbeat is None else {proxy.HEARTBEAT_ANNOTATION: str(heartbeat)}
    meta = {"name": name, "namespace": namespace, "creationTimestamp": created,
            "labels": dict(proxy.PROXY_LABELS) if labels is None else labels, "annotations": annotations}
    if stored_at is not None:
        meta["managedFields"] = [
            {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status",
             "time": iso(NOW), "fieldsV1": {"f:status": {"f:active": {}}}},
            {"manager": "tpuplane", "operation": "Update", "time": iso(stored_at),
             "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{proxy.HEARTBEAT_ANNOTATION}": {}}}}},
        ]
    return {"metadata": meta}


def iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class JobStore:
    """In-memory stand-in for KubeApi's list_jobs/delete_job (no API server here)."""

    def __init__(self, *jobs, context_namespace=None):
        self.jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in jobs}
        self.delete_errors: dict[str, ApiException] = {}
        self.listed: list[object] = []
        self._context_namespace = context_namespace

    def context_namespace(self):
        return self._context_namespace

    def list_jobs(self, namespace, label_selector):
        self.listed.append((namespace, label_selector))
        return [j for (ns, _), j in self.jobs.items() if namespace in (None, ns)]

    def delete_job(self, namespace, name):
        if name in self.delete_errors:
            raise self.delete_errors[name]
        if self.jobs.pop((namespace, name), None) is None:
            raise ApiException(status=404, reason="Not Found")


# ---- the decision -------------------------------------------------------------------------------------------------


def test_stale_proxies_picks_silent_heartbeats_only():
    jobs = [job("fresh", stored_at=NOW - 30), job("edge", stored_at=NOW - STALE_AFTER),
            job("dead", stored_at=NOW - STALE_AFTER - 1)]
    (stale,) = stale_proxies(jobs, NOW, STALE_AFTER)
    assert (stale.name, stale.source, stale.silent_for) == ("dead", SERVER_CLOCK, STALE_AFTER + 1)


def test_stale_proxies_trusts_the_server_clock_over_a_fast_client_clock():
    """The client's clock runs an hour ahead: its annotation looks fresh, the server knows it is not."""
    (stale,) = stale_proxies([job("dead", heartbeat=int(NOW + 3600), stored_at=NOW - 3600)], NOW, STALE_AFTER)
    assert (stale.source, stale.silent_for) == (SERVER_CLOCK, 3600)


def test_stale_proxies_keeps_a_live_proxy_whose_client_clock_is_slow():
    """The client's clock runs an hour behind: the annotation looks dead, the server stored it 10 s ago."""
    assert stale_proxies([job("alive", heartbeat=int(NOW - 3600), stored_at=NOW - 10)], NOW, STALE_AFTER) == []


def test_stale_proxies_allows_for_skew_when_only_the_client_clock_is_known():
    skewed = job("skewed", heartbeat=int(NOW - STALE_AFTER - CLIENT_CLOCK_SKEW_SECONDS))
    dead = job("dead", heartbeat=int(NOW - STALE_AFTER - CLIENT_CLOCK_SKEW_SECONDS - 1))
    assert [(p.name, p.source) for p in stale_proxies([skewed, dead], NOW, STALE_AFTER)] == [("dead", CLIENT_CLOCK)]


def test_stale_proxies_never_touches_other_jobs():
    others = [job("user-job", heartbeat=0, labels={"app": "x"}),
              job("other-tool", heartbeat=0, labels={proxy.MANAGED_BY_LABEL: "someone-else",
                                                     proxy.COMPONENT_LABEL: proxy.PROXY_COMPONENT})]
    assert stale_proxies(others, NOW, STALE_AFTER) == []


def test_stale_proxies_judges_a_job_without_heartbeat_by_its_age():
    old = job("no-beat", heartbeat=None, created="2020-01-01T00:00:00Z")
    new = job("unreadable", heartbeat="soon", created="2027-01-15T08:00:00Z")  # NOW is 08:00 that day
    assert [(p.name, p.source) for p in stale_proxies([old, new], NOW, STALE_AFTER)] == [("no-beat", CREATION)]


def test_stale_proxies_oldest_first():
    jobs = [job("b", heartbeat=int(NOW - 1000)), job("a", heartbeat=int(NOW - 5000))]
    assert [p.name for p in stale_proxies(jobs, NOW, STALE_AFTER)] == ["a", "b"]


# ---- applying it --------------------------------------------------------------------------------------------------


def test_find_stale_proxies_asks_by_the_proxy_labels():
    store = JobStore(job("dead", heartbeat=0))
    assert [p.name for p in find_stale_proxies(store, "team-a", STALE_AFTER, NOW)] == ["dead"]
    assert store.listed == [("team-a", proxy.PROXY_LABEL_SELECTOR)]


def test_delete_proxies_continues_past_a_failure_and_counts_404_as_done():
    store = JobStore(*(job(name, heartbeat=0) for name in "abcd"))
    store.delete_errors["a"] = ApiException(status=500, reason="Internal Server Error")
    store.delete_errors["b"] = ApiException(status=404, reason="Not Found")
    store.delete_errors["c"] = ApiUnreachable("no answer from the Kubernetes API")
    results = delete_proxies(store, stale_proxies(store.list_jobs(None, ""), NOW, STALE_AFTER))
    assert [(r.proxy.name, r.deleted, r.error) for r in results] == [
        ("a", False, "500 Internal Server Error"), ("b", True, ""), ("c", False, "no answer from the Kubernetes API"),
        ("d", True, "")]
    assert set(store.jobs) == {("team-a", "a"), ("team-a", "b"), ("team-a", "c")}


# ---- the command ----------------------------------------------------------------------------------------------------


def run(store, **overrides):
    out = io.StringIO()
    arguments = dict(namespace=None, all_namespaces=False, stale_after=STALE_AFTER, dry_run=False,
                     console=Console(file=out, width=120), now=NOW)
    arguments.update(overrides)
    return run_janitor(store, **arguments), out.getvalue()


def test_janitor_deletes_and_prints_a_table():
    store = JobStore(job("dead", heartbeat=int(NOW - 3600)), job("alive"))
    status, output = run(store, namespace="team-a")
    assert status == 0
    assert list(store.jobs) == [("team-a", "alive")]
    assert "dead" in output and "1h00m" in output and "deleted" in output and "alive" not in output


def test_janitor_dry_run_deletes_nothing():
    store = JobStore(job("dead", heartbeat=0))
    status, output = run(store, namespace="team-a", dry_run=True)
    assert status == 0 and ("team-a", "dead") in store.jobs
    assert "would delete" in output and "dry run" in output


def test_janitor_defaults_to_the_context_namespace():
    store = JobStore(job("dead", namespace="team-b", heartbeat=0), context_namespace="team-b")
    run(store)
    assert store.listed[0][0] == "team-b"


def test_janitor_all_namespaces_lists_across_namespaces():
    store = JobStore(job("x", namespace="one", heartbeat=0), job("y", namespace="two", heartbeat=0))
    status, _ = run(store, all_namespaces=True)
    assert status == 0 and store.jobs == {} and store.listed[0][0] is None


def test_janitor_exit_status_reports_a_failed_delete():
    store = JobStore(job("stuck", heartbeat=0))
    store.delete_errors["stuck"] = ApiException(status=403, reason="Forbidden")
    status, output = run(store, namespace="team-a")
    assert status == EXIT_DELETE_FAILED and "FAILED: 403 Forbidden" in output


def test_janitor_says_when_there_is_nothing_to_do():
    status, output = run(JobStore(job("alive")), namespace="team-a")
    assert status == 0 and "No proxy Job in namespace team-a" in output


@pytest.mark.parametrize("argv", [["--namespace", "a", "--all-namespaces"]])
def test_janitor_command_rejects_conflicting_scopes(argv):
    import typer
    from typer.testing import CliRunner

    from tpuplane.cli.janitor import janitor_command

    app = typer.Typer()
    app.command("janitor")(janitor_command)
    app.command("other")(lambda: None)  # two commands, so `janitor` is a sub-command as in `tpuplane janitor`
    result = CliRunner().invoke(app, ["janitor", *argv])
    assert result.exit_code == 2 and "exclude each other" in result.output
