"""Workloads on a live cluster: `tpuplane workload submit|list|status|why|delete|wait|logs`, `experiment submit`.

Only `submit` and `delete` write (server-side apply with field manager `tpuplane`, and delete); everything else
reads. What is shown is decided in `tpuplane.infra.batch` (states, explanations, status rows) from the objects
read here; connection flags and failures are `tpuplane.cli.live`'s.

Exit statuses (docs/guides/batch.md has them all in one table): 0 done; 1 the action failed (a JobSet the check
refuses, a name taken, a delete that failed, the API server's own failure); 2 bad input or a cluster that cannot be
used; 130 Ctrl-C. `wait` adds 124 (timed out) and 125 (the workload ended in another state, or was deleted), as
xpk's `--wait-for-job-completion` does.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from tpuplane.cli import FORMAT, OutputFormat
from tpuplane.cli.live import (
    CONTEXT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    KUBECONFIG,
    NAMESPACE,
    REQUEST_TIMEOUT,
    api_failure,
    checked_name,
    cluster,
    console,
    echo_json,
    fail,
    interactive,
    one_line,
    optional_read,
)
from tpuplane.infra.batch.workload_state import State
from tpuplane.infra.durations import human_duration, parse_duration
from tpuplane.infra.errors import ConfigError

if TYPE_CHECKING:
    from tpuplane.infra.batch.pending import Reason, WorkloadFacts
    from tpuplane.infra.batch.schedule_check import StackFacts
    from tpuplane.infra.batch.workload_state import WorkloadRow
    from tpuplane.runtime.batch_api import BatchApi

EXIT_TIMED_OUT = 124
EXIT_ENDED_OTHERWISE = 125
WAIT_POLL_SECONDS = 2.0
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"  # the worker: set on Indexed Jobs' pods
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"

_STACK = typer.Option(None, "--stack", "-s", help="Check against the stack <stackConfigDir>/Pulumi.<stack>.yaml "
                                                  "instead of the cluster's own queues and nodes.")
_CONFIG = typer.Option(None, "--config", "-c", help="Check against this Pulumi.<stack>.yaml file.")
_PROJECT = typer.Option(Path("."), "--project-dir", help="Where Pulumi.yaml is (or below it).")
_ALL_NAMESPACES = typer.Option(False, "--all-namespaces", "-A", help="Every namespace.")
_TEAM = typer.Option(None, "--team", help="Only this team's workloads: its ClusterQueue (searches every namespace "
                                          "unless -n is given).")
_QUEUE = typer.Option(None, "--queue", help="Only workloads of this LocalQueue.")
_STATE = typer.Option([], "--state", help="Only workloads in this state (repeatable).")
_EXPERIMENT = typer.Option(None, "--experiment", help="Only the JobSets of this experiment.")


def _namespace(kube: "BatchApi", namespace: Optional[str]) -> str:
    from tpuplane.runtime.session import resolve_namespace

    return resolve_namespace(checked_name(namespace, "--namespace"), kube.context_namespace())


def _scope(kube: "BatchApi", namespace: Optional[str], all_namespaces: bool, team: Optional[str] = None) -> str | None:
    """The namespace to read, None for all: -A, or --team without -n (a team's workloads live in its namespace)."""
    if all_namespaces and namespace:
        raise ConfigError.at("--namespace", namespace, "either -n or -A", "-A reads every namespace")
    return None if all_namespaces or (team and not namespace) else _namespace(kube, namespace)


# ---------------------------------------------------------------------------------------------------------------
# Reading workloads


def _rows(kube: "BatchApi", scope: str | None, *, experiment: Optional[str] = None) -> list["WorkloadRow"]:
    from tpuplane.infra.batch.experiments import EXPERIMENT_LABEL
    from tpuplane.infra.batch.workload import JOBSET_NAME_LABEL
    from tpuplane.infra.batch.workload_state import State, workload_rows
    from tpuplane.runtime.batch_api import JOBSETS, LOCAL_QUEUES, WORKLOADS

    selector = f"{EXPERIMENT_LABEL}={checked_name(experiment, '--experiment')}" if experiment else ""
    jobsets = kube.list_objects(JOBSETS, scope, selector)
    workloads = kube.list_objects(WORKLOADS, scope)
    local_queues = kube.list_objects(LOCAL_QUEUES, scope)
    pods = kube.pods(scope, JOBSET_NAME_LABEL) if jobsets else []
    rows = workload_rows(jobsets, workloads, pods, local_queues, time.time())
    if scope is not None and any(r.state is State.PREEMPTED and r.preemption and not r.preemption.by for r in rows):
        # the preemptor may sit in another team's namespace: look it up there when allowed to
        others = optional_read(lambda: kube.list_objects(WORKLOADS, None), [])
        rows = workload_rows(jobsets, workloads, pods, local_queues, time.time(), known_workloads=others)
    return rows


def _row_cells(row: "WorkloadRow", with_namespace: bool) -> list[str]:
    queue = f"{row.cluster_queue or '-'}/{row.local_queue or '-'}"
    priority = row.priority_class or "-"
    if row.priority is not None:
        priority += f" ({row.priority})"
    age = "-" if row.age_seconds is None else human_duration(row.age_seconds)
    cells = [row.name, queue, priority, row.state_text(), ", ".join(row.flavors) or "-",
             f"{row.pods_running}/{row.pods_total}", str(row.restarts), age]
    return [one_line(c) for c in ([row.namespace] if with_namespace else []) + cells]


def _print_rows(rows: Sequence["WorkloadRow"], with_namespace: bool) -> None:
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in (["NAMESPACE"] if with_namespace else []) + ["NAME", "TEAM/QUEUE", "PRIORITY", "STATE", "FLAVOR",
                                                               "PODS", "RESTARTS", "AGE"]:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*_row_cells(row, with_namespace))
    console().print(table)


def list_command(
    namespace: Optional[str] = NAMESPACE,
    all_namespaces: bool = _ALL_NAMESPACES,
    team: Optional[str] = _TEAM,
    queue: Optional[str] = _QUEUE,
    state: list[State] = _STATE,
    experiment: Optional[str] = _EXPERIMENT,
    fmt: OutputFormat = FORMAT,
    context: Optional[str] = CONTEXT,
    kubeconfig: Optional[str] = KUBECONFIG,
    request_timeout: str = REQUEST_TIMEOUT,
) -> None:
    """List workloads (JobSets with their Kueue Workload): team/queue, priority, state, flavor, pods, restarts, age."""
    from tpuplane.infra.batch.workload_state import list_json, select_rows

    with cluster(context, kubeconfig, request_timeout) as kube:
        scope = _scope(kube, namespace, all_namespaces, team)
        rows = select_rows(_rows(kube, scope, experiment=experiment), team=team, queue=queue, states=state,
                           experiment=experiment)
    if fmt is OutputFormat.json:
        echo_json(list_json(rows))
    elif not rows:
        where = "any namespace" if scope is None else f"namespace {scope}"
        console(stderr=True).print(f"No workloads found in {one_line(where)}.")
    else:
        _print_rows(rows, with_namespace=scope is None)


# ---------------------------------------------------------------------------------------------------------------
# One workload: status and why


@dataclass(frozen=True)
class _Read:
    """Everything read about one workload."""

    facts: "WorkloadFacts"
    row: "WorkloadRow"
    events: list[dict[str, Any]]


def _get_jobset(kube: "BatchApi", namespace: str, name: str) -> dict[str, Any]:
    from tpuplane.runtime.batch_api import JOBSETS, ApiCallFailed

    try:
        return kube.get_object(JOBSETS, namespace, name)
    except ApiCallFailed as error:
        if error.status == 404 and not error.type_missing:
            raise ConfigError.at("NAME", name, f"a JobSet in namespace {namespace}",
                                 "`tpuplane workload list` shows them; -n picks the namespace") from None
        raise


def _live_check(kube: "BatchApi", jobset: dict[str, Any], flavors: list, cluster_queues: list,
                local_queues: list) -> tuple[Any, tuple]:
    """The scheduling check on the cluster's queues and nodes, when the nodes can be read (None otherwise)."""
    from tpuplane.infra.batch.cluster_facts import as_manifest

    nodes = optional_read(kube.list_nodes, None)
    if nodes is None:
        return None, ()
    facts = _cluster_facts(kube, flavors, cluster_queues, local_queues, nodes)
    try:
        return _check(as_manifest(jobset), facts), facts.pools
    except (ConfigError, ImportError):  # a JobSet the check cannot read, or no infra extra: no check
        return None, facts.pools


def _cluster_facts(kube: "BatchApi", flavors: list, cluster_queues: list, local_queues: list,
                   nodes: list) -> "StackFacts":
    """The check's facts from the cluster's objects, with what only adds detail (its WorkloadPriorityClasses and
    PersistentVolumeClaims) read where RBAC lets."""
    from tpuplane.infra.batch.cluster_facts import cluster_facts
    from tpuplane.runtime.batch_api import PRIORITY_CLASSES

    return cluster_facts(flavors, cluster_queues, local_queues, nodes,
                         optional_read(lambda: kube.list_objects(PRIORITY_CLASSES), None),
                         optional_read(kube.list_claims, None))


def _check(manifest: dict[str, Any], facts: "StackFacts") -> Any:
    """`check_workload`, with a LocalQueue that points to a missing ClusterQueue reported as such."""
    from tpuplane.infra.batch.api_objects import field, meta
    from tpuplane.infra.batch.schedule_check import QUEUE_LABEL, ScheduleCheck, check_workload

    namespace = meta(manifest, "namespace") or "default"
    queue = str((field(manifest, "metadata", "labels") or {}).get(QUEUE_LABEL, ""))
    target = facts.local_queues.get((namespace, queue))
    if target is not None and target not in facts.cluster_queues:
        return ScheduleCheck(meta(manifest, "name"), namespace, queue, target, (), (
            f"LocalQueue {namespace}/{queue} points to ClusterQueue {target}, which does not exist",))
    return check_workload(manifest, facts)


def _read_workload(kube: "BatchApi", namespace: str, name: str) -> _Read:
    from tpuplane.infra.batch.pending import WorkloadFacts
    from tpuplane.infra.batch.queue_usage import QueueBook
    from tpuplane.infra.batch.workload import JOBSET_NAME_LABEL
    from tpuplane.infra.batch.workload_state import State, find_workload, workload_rows
    from tpuplane.infra.batch.workload_status import workload_events
    from tpuplane.runtime.batch_api import (
        ADMISSION_CHECKS,
        CLUSTER_QUEUES,
        LOCAL_QUEUES,
        RESOURCE_FLAVORS,
        WORKLOADS,
    )

    jobset = _get_jobset(kube, namespace, checked_name(name, "NAME"))
    workloads = kube.list_objects(WORKLOADS, namespace)
    workload = find_workload(jobset, workloads)
    pods = kube.pods(namespace, f"{JOBSET_NAME_LABEL}={name}")
    local_queues = optional_read(lambda: kube.list_objects(LOCAL_QUEUES, None), None)
    if local_queues is None:
        local_queues = kube.list_objects(LOCAL_QUEUES, namespace)
    cluster_queues = optional_read(lambda: kube.list_objects(CLUSTER_QUEUES), [])
    everyone = optional_read(lambda: kube.list_objects(WORKLOADS, None), workloads)
    row = workload_rows([jobset], workloads, pods, local_queues, time.time(), known_workloads=everyone)[0]
    check, pools = None, ()
    if row.state in (State.PENDING, State.PREEMPTED, State.EVICTED, State.ADMITTED):
        flavors = optional_read(lambda: kube.list_objects(RESOURCE_FLAVORS), [])
        check, pools = _live_check(kube, jobset, flavors, cluster_queues, local_queues)
    checks = {c["metadata"]["name"]: str((c.get("spec") or {}).get("controllerName", ""))
              for c in optional_read(lambda: kube.list_objects(ADMISSION_CHECKS), []) if c.get("metadata")}
    events = workload_events(optional_read(lambda: kube.namespace_events(namespace), []), jobset, workload, pods)
    facts = WorkloadFacts(jobset=jobset, workload=workload, pods=pods,
                          book=QueueBook(cluster_queues, local_queues),
                          workloads=everyone, admission_checks=checks, check=check, pools=pools)
    return _Read(facts, row, events)


def _print_reasons(out: Console, reasons: Sequence["Reason"]) -> None:
    for reason in reasons:
        out.print(f"- {one_line(reason.text)}")


def _print_status(read: _Read, reasons: Sequence["Reason"]) -> None:
    from tpuplane.infra.batch.workload_status import admission, condition_rows, slice_rows
    from tpuplane.runtime.session import recent_events

    out, row, facts, now = console(), read.row, read.facts, time.time()
    out.print(f"[bold]{one_line(row.namespace)}/{one_line(row.name)}[/]: {one_line(row.state_text())}")
    out.print(f"Workload {one_line(row.workload or '(none yet)')}; LocalQueue {one_line(row.local_queue or '-')} "
                  f"-> ClusterQueue {one_line(row.cluster_queue or '-')}; priority "
                  f"{one_line(row.priority_class or '-')}" + (f" ({row.priority})" if row.priority is not None else ""))
    table = Table(box=None, pad_edge=False, title="Conditions", title_justify="left")
    for column in ("OBJECT", "TYPE", "STATUS", "REASON", "AGE", "MESSAGE"):
        table.add_column(column, overflow="fold")
    for c in condition_rows(facts.jobset, facts.workload):
        table.add_row(c.object, one_line(c.type), one_line(c.status), one_line(c.reason), c.age(now),
                      one_line(c.message))
    out.print(table)
    granted = admission(facts.workload)
    out.print("[bold]Admission[/]")
    if granted is None:
        out.print("  none: it holds no quota")
    else:
        out.print(f"  ClusterQueue {one_line(granted[0])}")
        for pod_set in granted[1]:
            out.print(f"  {one_line(pod_set.describe())}")
    slices = Table(box=None, pad_edge=False, title="Slices", title_justify="left")
    for column in ("JOB", "SLICE", "PODS", "RUNNING", "PENDING", "SUCCEEDED", "FAILED", "RESTARTS"):
        slices.add_column(column)
    for s in slice_rows(facts.jobset, facts.pods):
        slices.add_row(one_line(s.job), str(s.index), str(s.expected),
                       *(str(s.phases.get(p, 0)) for p in ("Running", "Pending", "Succeeded", "Failed")),
                       str(s.restarts))
    out.print(slices)
    out.print("[bold]Events[/] (oldest first)")
    for line in recent_events(read.events) or ["none"]:
        out.print(f"  {one_line(line)}")
    out.print("[bold]Why[/]")
    _print_reasons(out, reasons)


def status_command(
    name: str = typer.Argument(..., help="The workload (JobSet) name."),
    namespace: Optional[str] = NAMESPACE,
    fmt: OutputFormat = FORMAT,
    context: Optional[str] = CONTEXT,
    kubeconfig: Optional[str] = KUBECONFIG,
    request_timeout: str = REQUEST_TIMEOUT,
) -> None:
    """Conditions, admission, per-slice pods, recent events, and why it is not running."""
    from tpuplane.infra.batch.pending import explain
    from tpuplane.infra.batch.workload_status import status_json

    with cluster(context, kubeconfig, request_timeout) as kube:
        read = _read_workload(kube, _namespace(kube, namespace), name)
    reasons = explain(read.facts)
    if fmt is OutputFormat.json:
        echo_json(status_json(read.row, read.facts.jobset, read.facts.workload, read.facts.pods, read.events, reasons))
    else:
        _print_status(read, reasons)


def why_command(
    name: str = typer.Argument(..., help="The workload (JobSet) name."),
    namespace: Optional[str] = NAMESPACE,
    context: Optional[str] = CONTEXT,
    kubeconfig: Optional[str] = KUBECONFIG,
    request_timeout: str = REQUEST_TIMEOUT,
) -> None:
    """Why it is pending (or not running): quota short and what the cohort could lend, no matching node pool,
    preempted by whom, a provisioning request waiting, an image that will not pull."""
    from tpuplane.infra.batch.pending import explain

    with cluster(context, kubeconfig, request_timeout) as kube:
        read = _read_workload(kube, _namespace(kube, namespace), name)
    out = console()
    out.print(f"[bold]{one_line(read.row.namespace)}/{one_line(read.row.name)}[/]: {one_line(read.row.state_text())}")
    _print_reasons(out, explain(read.facts))


# ---------------------------------------------------------------------------------------------------------------
# submit


class DryRun(str, Enum):
    none = "none"
    client = "client"
    server = "server"


def _documents(file: str) -> list[Any]:
    from tpuplane.infra.yaml_input import MAX_YAML_BYTES, load_yaml_documents, read_text_bounded

    if file == "-":
        raw = sys.stdin.read(MAX_YAML_BYTES + 1)
        if len(raw) > MAX_YAML_BYTES:
            raise ConfigError.at("FILE", "-", f"at most {MAX_YAML_BYTES} bytes on stdin")
        return load_yaml_documents(raw, "stdin")
    return load_yaml_documents(read_text_bounded(Path(file), file, MAX_YAML_BYTES, "workload YAML"), file)


def _is_manifest(document: Any) -> bool:
    return isinstance(document, dict) and ("kind" in document or "apiVersion" in document)


def _jobsets_to_submit(file: str, cfg: Any) -> list[dict[str, Any]]:
    """The JobSets in FILE, or the JobSets tpuplane renders from it when it is a workload or experiment file."""
    from tpuplane.infra.batch.experiments import read_experiment, render_experiment
    from tpuplane.infra.batch.workload import DEFAULT_TTL, JOBSET_API

    documents = _documents(file)
    if len(documents) == 1 and isinstance(documents[0], dict) and not _is_manifest(documents[0]):
        experiment = read_experiment(documents[0])
        if experiment.ttl_seconds_after_finished is None:  # kubectl users' default, as `experiment render`
            experiment = experiment.model_copy(update={"ttl_seconds_after_finished": DEFAULT_TTL})
        from tpuplane.cli.workload import on_stack_service  # a Pathways file takes the stack's service images

        experiment = on_stack_service(experiment, cfg)
        return render_experiment(experiment, cfg.batch if cfg else None, storage=cfg.storage if cfg else None)
    if not documents:
        raise ConfigError.at(file, "no YAML document", "JobSets, or a tpuplane workload or experiment file")
    for i, doc in enumerate(documents):
        if not isinstance(doc, dict) or doc.get("kind") != "JobSet" or doc.get("apiVersion") != JOBSET_API:
            given = f"kind {doc.get('kind')!r}, apiVersion {doc.get('apiVersion')!r}" if isinstance(doc, dict) else doc
            raise ConfigError.at(f"{file} document {i + 1}", given, f"a JobSet ({JOBSET_API})",
                                 "`tpuplane workload render` and `experiment render` write them; a workload or "
                                 "experiment file (no kind) is rendered for you")
        if not isinstance(doc.get("metadata"), dict) or not isinstance(doc["metadata"].get("name"), str):
            raise ConfigError.at(f"{file} document {i + 1} metadata.name", (doc.get("metadata") or {}).get("name")
                                 if isinstance(doc.get("metadata"), dict) else None, "the JobSet's name")
    return documents


def _place(jobsets: list[dict[str, Any]], namespace: Optional[str], default: str) -> list[dict[str, Any]]:
    """Each JobSet with its namespace: its own, else -n, else the context's (kubectl's rule: -n must agree)."""
    placed = []
    for jobset in jobsets:
        meta = dict(jobset["metadata"])
        own = meta.get("namespace")
        if namespace and own and own != namespace:
            raise ConfigError.at("--namespace", namespace, f"the namespace of JobSet {meta['name']} ({own})",
                                 "drop -n, or the namespace from the file")
        meta["namespace"] = own or namespace or default
        placed.append({**jobset, "metadata": meta})
    names = [(j["metadata"]["namespace"], j["metadata"]["name"]) for j in placed]
    repeated = sorted({f"{ns}/{n}" for ns, n in names if names.count((ns, n)) > 1})
    if repeated:
        raise ConfigError.at("FILE", repeated, "each JobSet once")
    return placed


def _refusals(kube: "BatchApi", jobsets: list[dict[str, Any]], cfg: Any) -> list[str]:
    """Why `workload check` says some JobSet could never run: on the stack, or on the cluster's queues and nodes."""
    from tpuplane.runtime.batch_api import CLUSTER_QUEUES, LOCAL_QUEUES, RESOURCE_FLAVORS

    if cfg is not None:
        from tpuplane.infra.batch.schedule_check import stack_facts

        facts = stack_facts(cfg.tpu_pools, cfg.batch, cfg.storage)
    else:
        from tpuplane.runtime.batch_api import ApiCallFailed

        try:
            facts = _cluster_facts(kube, kube.list_objects(RESOURCE_FLAVORS), kube.list_objects(CLUSTER_QUEUES),
                                   kube.list_objects(LOCAL_QUEUES, None), kube.list_nodes())
        except ApiCallFailed as error:
            if error.status != 403:
                raise
            fail(f"the check before submitting reads the cluster's queues and nodes, and RBAC forbids it: "
                 f"{error.message or error.what}. Hint: check against the stack with --stack or --config, or pass "
                 "--force to submit unchecked")
    refusals = []
    for jobset in jobsets:
        result = _check(jobset, facts)
        refusals += [f"{result.namespace}/{result.workload}: {problem}" for problem in result.all_problems()]
    return refusals


def _existing(kube: "BatchApi", jobset: dict[str, Any]) -> dict[str, Any] | None:
    from tpuplane.runtime.batch_api import JOBSETS, ApiCallFailed

    meta = jobset["metadata"]
    try:
        return kube.get_object(JOBSETS, meta["namespace"], meta["name"])
    except ApiCallFailed as error:
        if error.status == 404 and not error.type_missing:
            return None
        raise


def _stack(stack: Optional[str], config: Optional[Path], project_dir: Path) -> Any:
    from tpuplane.cli.workload import _stack_config

    return _stack_config(stack, config, project_dir)


def submit_command(
    file: str = typer.Argument(..., help="JobSets (`workload render` or `experiment render` output), or a "
                                         "workload or experiment file to render; - reads stdin."),
    namespace: Optional[str] = NAMESPACE,
    force: bool = typer.Option(False, "--force", help="Submit even what the check says could never run."),
    dry_run: DryRun = typer.Option(DryRun.none, "--dry-run", help="server: the API server checks and stores "
                                                                  "nothing; client: only check and print."),
    stack: Optional[str] = _STACK,
    config: Optional[Path] = _CONFIG,
    project_dir: Path = _PROJECT,
    context: Optional[str] = CONTEXT,
    kubeconfig: Optional[str] = KUBECONFIG,
    request_timeout: str = REQUEST_TIMEOUT,
) -> None:
    """Check, then create the JobSets (server-side apply, field manager tpuplane). An experiment submits every
    trial, labelled so `list`/`delete --experiment` find them; a name that exists is never changed."""
    from tpuplane.infra.batch.experiments import same_trial
    from tpuplane.runtime.batch_api import JOBSETS

    err = console(stderr=True)
    try:
        cfg = _stack(stack, config, project_dir)
        jobsets = _jobsets_to_submit(file, cfg)
    except ConfigError as exc:
        fail(str(exc))
    status = 0
    with cluster(context, kubeconfig, request_timeout) as kube:
        placed = _place(jobsets, checked_name(namespace, "--namespace"), _namespace(kube, None))
        if not force:
            try:
                refusals = _refusals(kube, placed, cfg)
            except ImportError:
                fail("the check before submitting needs tpuplane[infra] (jsonschema, kubernetes-validate). Hint: "
                     "install it, or pass --force to submit unchecked")
            if refusals:
                for refusal in refusals:
                    err.print(f"[red]x[/] {one_line(refusal)}")
                fail("refused: the check says this could never run (--force submits anyway)", EXIT_FAILED)
        for jobset in placed:
            where = f"{jobset['metadata']['namespace']}/{jobset['metadata']['name']}"
            existing = _existing(kube, jobset)
            if existing is not None:
                trial = same_trial(existing, jobset)
                if trial:
                    err.print(f"{one_line(where)}: already submitted (same trial), left as it is")
                    continue
                if trial is False:
                    err.print(f"[red]x[/] {one_line(where)}: this trial was submitted with another spec (the "
                              "experiment changed since), left as it is. Delete the experiment's JobSets first "
                              "(`tpuplane workload delete --experiment NAME`), or give the experiment a new name")
                    status = EXIT_FAILED
                    continue
                err.print(f"[red]x[/] {one_line(where)}: a JobSet of that name exists, and its spec cannot be "
                          "changed. Delete it first (`tpuplane workload delete`), or pick another name")
                status = EXIT_FAILED
                continue
            if dry_run is not DryRun.client:
                kube.apply_object(JOBSETS, jobset, dry_run=dry_run is DryRun.server)
            suffix = {DryRun.none: "", DryRun.server: " (server dry run)", DryRun.client: " (client dry run)"}[dry_run]
            console().print(f"jobset.jobset.x-k8s.io/{one_line(where)} submitted{suffix}")
    raise typer.Exit(status)


# ---------------------------------------------------------------------------------------------------------------
# delete


def _confirm(what: str, yes: bool) -> None:
    """Go on with --yes or a 'y' typed at a terminal; never wait for input that cannot come."""
    if yes:
        return
    if not interactive():
        fail(f"deleting {what} needs a confirmation, and there is no terminal to ask on. Hint: pass --yes")
    try:
        answer = typer.confirm(f"Delete {what}?", default=False, err=True)
    except typer.Abort:  # Ctrl-C or end of input at the question: interrupted, as everywhere else
        console(stderr=True).print("\ninterrupted: nothing deleted")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if not answer:
        console(stderr=True).print("Nothing deleted.")
        raise typer.Exit(0)


def delete_command(
    names: list[str] = typer.Argument(None, help="Workload (JobSet) names."),
    namespace: Optional[str] = NAMESPACE,
    all_namespaces: bool = _ALL_NAMESPACES,
    experiment: Optional[str] = _EXPERIMENT,
    team: Optional[str] = _TEAM,
    queue: Optional[str] = _QUEUE,
    state: list[State] = _STATE,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    context: Optional[str] = CONTEXT,
    kubeconfig: Optional[str] = KUBECONFIG,
    request_timeout: str = REQUEST_TIMEOUT,
) -> None:
    """Delete workloads by name, or every one the filters select (e.g. --team T --state finished); their Kueue
    Workloads, Jobs and pods go with them. Asks first unless --yes."""
    from tpuplane.infra.batch.workload_state import select_rows
    from tpuplane.runtime.batch_api import JOBSETS, ApiCallFailed

    if not names and not (experiment or team or queue or state):
        fail("nothing selected: give NAMES, or filters (--experiment, --team, --queue, --state). Hint: `tpuplane "
             "workload list` with the same filters shows what they select")
    status = 0
    with cluster(context, kubeconfig, request_timeout) as kube:
        scope = _scope(kube, namespace, all_namespaces, team)
        if names and scope is None:
            raise ConfigError.at("NAMES", names, "names in one namespace",
                                 "drop -A, use -n" if all_namespaces else "--team without -n searches every "
                                 "namespace: add -n NAMESPACE, or drop the names")
        rows = select_rows(_rows(kube, scope, experiment=experiment), team=team, queue=queue, states=state,
                           experiment=experiment)
        if names:
            known = {r.name for r in rows}
            missing = [n for n in names if n not in known]
            if missing:
                raise ConfigError.at("NAMES", missing, f"workloads in namespace {scope} that the filters select",
                                     "`tpuplane workload list` shows them")
            rows = [r for r in rows if r.name in set(names)]
        if not rows:
            console(stderr=True).print("No workloads selected: nothing to delete.")
            raise typer.Exit(0)
        _print_rows(rows, with_namespace=scope is None)
        _confirm(f"{len(rows)} workload{'s' if len(rows) > 1 else ''}", yes)
        err = console(stderr=True)
        for row in rows:
            try:
                kube.delete_object(JOBSETS, row.namespace, row.name)
                console().print(f"jobset.jobset.x-k8s.io/{one_line(row.namespace)}/{one_line(row.name)} deleted")
            except ApiCallFailed as error:
                if error.status == 404:
                    continue  # deleted meanwhile
                if api_failure(kube, error)[1] != EXIT_FAILED:
                    raise  # credentials, RBAC, a webhook: for the user to fix, one line and exit 2, as for any request
                err.print(f"[red]x[/] {one_line(row.namespace)}/{one_line(row.name)}: {one_line(error)}")
                status = EXIT_FAILED
    raise typer.Exit(status)


# ---------------------------------------------------------------------------------------------------------------
# wait


class WaitFor(str, Enum):
    admitted = "admitted"
    running = "running"
    finished = "finished"


# A state reached on the way to success counts for every earlier target: a finished workload was admitted.
_REACHED = {WaitFor.admitted: {State.ADMITTED, State.RUNNING, State.FINISHED},
            WaitFor.running: {State.RUNNING, State.FINISHED},
            WaitFor.finished: {State.FINISHED}}


def _standing_now(kube: "BatchApi", namespace: str, name: str, within: float) -> Any:
    """The workload's standing, or None once its JobSet is gone."""
    from tpuplane.infra.batch.workload import JOBSET_NAME_LABEL
    from tpuplane.infra.batch.workload_state import find_workload, workload_standing
    from tpuplane.runtime.batch_api import JOBSETS, WORKLOADS, ApiCallFailed

    try:
        jobset = kube.get_object(JOBSETS, namespace, name, within=within)
    except ApiCallFailed as error:
        if error.status == 404 and not error.type_missing:
            return None
        raise
    workload = find_workload(jobset, kube.list_objects(WORKLOADS, namespace, within=within))
    pods = kube.pods(namespace, f"{JOBSET_NAME_LABEL}={name}", within=within)
    return workload_standing(jobset, workload, pods)


def wait_command(
    name: str = typer.Argument(..., help="The workload (JobSet) name."),
    wait_for: WaitFor = typer.Option(..., "--for", help="The state to wait for."),
    timeout: str = typer.Option("30s", "--timeout", help="Give up after this long: 30s, 10m, 2h."),
    namespace: Optional[str] = NAMESPACE,
    context: Optional[str] = CONTEXT,
    kubeconfig: Optional[str] = KUBECONFIG,
    request_timeout: str = REQUEST_TIMEOUT,
) -> None:
    """Wait until the workload is admitted, running or finished. Exit 0 when it is, 125 when it ended in another
    state (failed, or deleted), 124 on timeout, 2 on bad input."""
    from tpuplane.runtime.kube import ApiUnreachable

    err = console(stderr=True)
    try:
        seconds = parse_duration(timeout, "--timeout")
    except ConfigError as exc:
        fail(str(exc))
    start = time.monotonic()
    deadline = start + seconds
    with cluster(context, kubeconfig, request_timeout) as kube:
        where = _namespace(kube, namespace)
        _get_jobset(kube, where, checked_name(name, "NAME"))  # a name that does not exist is bad input, not a wait
        last = None

        def timed_out(text: str) -> typer.Exit:
            err.print(f"timed out after {timeout.strip()} waiting for {one_line(name)} to be "
                      f"{wait_for.value}: it is {one_line(text)}. Hint: `tpuplane workload why {one_line(name)}`")
            return typer.Exit(EXIT_TIMED_OUT)

        with err.status(f"waiting for {one_line(name)} to be {wait_for.value}") as spinner:
            while True:
                try:
                    standing = _standing_now(kube, where, name, max(0.05, deadline - time.monotonic()))
                except ApiUnreachable:
                    # The last reads get only what is left of --timeout: a server slower than that is a timeout.
                    if time.monotonic() < deadline:
                        raise
                    raise timed_out(last or "not read again") from None
                waited = human_duration(time.monotonic() - start)
                if standing is None:
                    err.print(f"{one_line(name)} was deleted after {waited}")
                    raise typer.Exit(EXIT_ENDED_OTHERWISE)
                text = standing.state.value + (f" ({standing.reason})" if standing.reason else "")
                if standing.state in _REACHED[wait_for]:
                    err.print(f"{one_line(name)} is {one_line(text)} (after {waited})")
                    raise typer.Exit(0)
                if standing.state is State.FAILED:
                    err.print(f"{one_line(name)} ended {one_line(text)} after {waited}: it will not be "
                              f"{wait_for.value}")
                    raise typer.Exit(EXIT_ENDED_OTHERWISE)
                if text != last:
                    if not err.is_terminal:
                        err.print(f"{one_line(name)}: {one_line(text)}")
                    last = text
                spinner.update(f"waiting for {one_line(name)} to be {wait_for.value}: {one_line(text)}, {waited}")
                if time.monotonic() >= deadline:
                    raise timed_out(text)
                time.sleep(max(0.0, min(WAIT_POLL_SECONDS, deadline - time.monotonic())))


# ---------------------------------------------------------------------------------------------------------------
# logs


def _pick_pod(pods: list[dict[str, Any]], name: str, job: Optional[str], slice_index: int, worker: int) -> dict[str, Any]:
    """The pod of (job, slice, worker); the newest when a restart left several."""
    from tpuplane.infra.batch.api_objects import labels, meta
    from tpuplane.infra.batch.workload import JOB_INDEX_LABEL, REPLICATED_JOB_LABEL

    jobs = sorted({str(labels(p).get(REPLICATED_JOB_LABEL, "")) for p in pods})
    if job is None and len(jobs) > 1:
        raise ConfigError.at("--job", None, f"one of {', '.join(jobs)}", f"workload {name} has several jobs")
    wanted = job or (jobs[0] if jobs else "")
    chosen = [p for p in pods if labels(p).get(REPLICATED_JOB_LABEL) == wanted
              and labels(p).get(JOB_INDEX_LABEL) == str(slice_index)
              and labels(p).get(COMPLETION_INDEX_LABEL) == str(worker)]
    if not chosen:
        have = sorted({(str(labels(p).get(JOB_INDEX_LABEL)), str(labels(p).get(COMPLETION_INDEX_LABEL))) for p in pods
                       if labels(p).get(REPLICATED_JOB_LABEL) == wanted})
        shown = ", ".join(f"slice {s} worker {w}" for s, w in have[:20]) or "no pods yet"
        raise ConfigError.at("--slice/--worker", f"slice {slice_index} worker {worker}",
                             f"a pod of workload {name}: {shown}", "`tpuplane workload status` shows the slices")
    return max(chosen, key=lambda p: meta(p, "creationTimestamp"))


def _container(pod: dict[str, Any], container: Optional[str]) -> str:
    """--container, else kubectl's choice: the default-container annotation, else the first container."""
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    if container is not None:
        if container not in names:
            raise ConfigError.at("--container", container, f"one of {', '.join(names)}")
        return container
    annotated = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CONTAINER_ANNOTATION)
    return annotated if annotated in names else (names[0] if names else "")


def logs_command(
    name: str = typer.Argument(..., help="The workload (JobSet) name."),
    slice_index: int = typer.Option(0, "--slice", min=0, help="The slice (child Job index)."),
    worker: int = typer.Option(0, "--worker", min=0, help="The worker (VM) within the slice."),
    job: Optional[str] = typer.Option(None, "--job", help="The job of a job group (default: its only one)."),
    container: Optional[str] = typer.Option(None, "--container", "-c", help="Container (default: the pod's main)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Stream new lines until the pod ends or Ctrl-C."),
    tail: Optional[int] = typer.Option(None, "--tail", min=0, help="Only the last N lines."),
    namespace: Optional[str] = NAMESPACE,
    context: Optional[str] = CONTEXT,
    kubeconfig: Optional[str] = KUBECONFIG,
    request_timeout: str = REQUEST_TIMEOUT,
) -> None:
    """Print the log of one worker of one slice (slice 0, worker 0 by default: JAX's coordinator)."""
    from tpuplane.infra.batch.workload import JOBSET_NAME_LABEL

    with cluster(context, kubeconfig, request_timeout) as kube:
        where = _namespace(kube, namespace)
        pods = kube.pods(where, f"{JOBSET_NAME_LABEL}={checked_name(name, 'NAME')}")
        if not pods:
            _get_jobset(kube, where, name)  # no such workload: say so
            fail(f"workload {name} has no pods yet. Hint: `tpuplane workload why {name}`", EXIT_FAILED)
        pod = _pick_pod(pods, name, job, slice_index, worker)
        out = sys.stdout.buffer
        for chunk in kube.stream_log(where, pod["metadata"]["name"], _container(pod, container) or None,
                                     follow=follow, tail_lines=tail):
            out.write(chunk)
            out.flush()
