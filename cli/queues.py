"""`tpuplane queues`: quota and usage of every ClusterQueue, LocalQueue and cohort, like `xpk info` but per team.

Three tables (`tpuplane.infra.batch.queue_usage` computes them): ClusterQueues (one row per flavor: nominal quota,
used, borrowed, lent, available now, the borrowing and lending limits, admitted and pending workloads),
LocalQueues (per namespace, with the ClusterQueue they feed), and cohorts (their pooled quota and what is free).
Tables show one resource, TPU chips by default; `-f json` has every resource. Read-only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import typer
from rich.table import Table

from tpuplane.cli import FORMAT, OutputFormat
from tpuplane.cli.live import (
    CONTEXT,
    KUBECONFIG,
    REQUEST_TIMEOUT,
    cluster,
    console,
    echo_json,
    fail,
    one_line,
    optional_read,
)
from tpuplane.infra.fleet.scheduling import TPU_RESOURCE


def _table(title: str, columns: Sequence[str], rows: list[tuple[str, ...]]) -> Table:
    table = Table(box=None, pad_edge=False, title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(one_line(cell) for cell in row))
    return table


def queues_command(
    team: Optional[str] = typer.Option(None, "--team", help="Only this team's ClusterQueue, its LocalQueues and "
                                                            "its cohort."),
    resource: Optional[str] = typer.Option(None, "--resource", help="The resource the tables show: google.com/tpu "
                                                                    "(chips, the default where queues cover it), "
                                                                    "cpu, memory, ..."),
    fmt: OutputFormat = FORMAT,
    context: Optional[str] = CONTEXT,
    kubeconfig: Optional[str] = KUBECONFIG,
    request_timeout: str = REQUEST_TIMEOUT,
) -> None:
    """Quota, usage, borrowed and lent chips per flavor, and admitted and pending workloads, of every
    ClusterQueue, LocalQueue and cohort."""
    from tpuplane.infra.batch.queue_usage import (
        CLUSTER_QUEUE_COLUMNS,
        COHORT_COLUMNS,
        LOCAL_QUEUE_COLUMNS,
        QueueBook,
        cluster_queue_rows,
        cohort_rows,
        local_queue_rows,
        queues_json,
    )
    from tpuplane.runtime.batch_api import CLUSTER_QUEUES, LOCAL_QUEUES

    with cluster(context, kubeconfig, request_timeout) as kube:
        cluster_queues = kube.list_objects(CLUSTER_QUEUES)
        local_queues = optional_read(lambda: kube.list_objects(LOCAL_QUEUES, None), None)
        note = ""
        if local_queues is None:  # not allowed to read every namespace: the context's own
            namespace = kube.context_namespace() or "default"
            local_queues = kube.list_objects(LOCAL_QUEUES, namespace)
            note = f"LocalQueues of namespace {namespace} only: listing every namespace is forbidden"
    book = QueueBook(cluster_queues, local_queues)
    covered = sorted({r for q in book.cluster_queues.values() for _, r in q.quotas})
    if resource is not None and covered and resource not in covered:
        fail(f"--resource: got {resource!r}; allowed: a resource the ClusterQueues cover: {', '.join(covered)}")
    if resource is None:  # a cluster whose queues hold no TPU quota shows what they do hold
        resource = TPU_RESOURCE if TPU_RESOURCE in covered or not covered else covered[0]
    chosen = None
    if team is not None:
        if team not in book.cluster_queues:
            fail(f"--team: got {team!r}; allowed: a ClusterQueue of the cluster: "
                 f"{', '.join(book.cluster_queues) or 'none'}")
        cohort = book.cluster_queues[team].cohort
        chosen = [team]
    if note:
        console(stderr=True).print(f"note: {one_line(note)}")
    if fmt is OutputFormat.json:
        echo_json(queues_json(book, chosen))
        return
    out = console()
    if not book.cluster_queues:
        out.print("No ClusterQueues: Kueue has no quota to show.")
        return
    out.print(_table(f"ClusterQueues ({one_line(resource)})", CLUSTER_QUEUE_COLUMNS,
                         cluster_queue_rows(book, resource, chosen)))
    out.print(_table(f"LocalQueues ({one_line(resource)})", LOCAL_QUEUE_COLUMNS,
                         local_queue_rows(book, resource, chosen)))
    cohorts = cohort_rows(book, resource, None if team is None else [cohort])
    if cohorts:
        out.print(_table(f"Cohorts ({one_line(resource)})", COHORT_COLUMNS, cohorts))
