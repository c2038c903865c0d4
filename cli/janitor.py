"""`tpuplane janitor`: delete Pathways proxy Jobs whose client stopped sending heartbeats.

Run it by hand, from cron, or in the cluster with the `ProxyJanitor` component. Prints what it deleted (or, with
--dry-run, what it would delete) as a table. Exit status 1 if some Job could not be deleted, 2 on bad input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from tpuplane.infra.pathways.proxy import DEFAULT_STALE_AFTER_SECONDS

if TYPE_CHECKING:  # the kubernetes client (runtime extra) loads only when the command runs
    from tpuplane.runtime.janitor import SweepResult
    from tpuplane.runtime.kube import KubeApi

EXIT_DELETE_FAILED = 1
from tpuplane.cli import EXIT_BAD_INPUT


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _table(results: list["SweepResult"], dry_run: bool) -> Table:
    table = Table(title="stale Pathways proxies" + (" (dry run)" if dry_run else ""), box=box.SIMPLE_HEAD,
                  title_justify="left")
    for header in ("namespace", "job", "silent for", "judged by", "action"):
        table.add_column(header)
    for result in results:
        stale = result.proxy
        action = "would delete" if dry_run else ("deleted" if result.deleted else f"FAILED: {result.error}")
        table.add_row(stale.namespace, stale.name, _duration(stale.silent_for), stale.source, action)
    return table


def run_janitor(kube: "KubeApi", *, namespace: Optional[str], all_namespaces: bool, stale_after: float,
                dry_run: bool, console: Console, now: Optional[float] = None) -> int:
    """Find stale proxies, delete them unless dry_run, print the table; returns the exit status."""
    from tpuplane.runtime.session import resolve_namespace
    from tpuplane.runtime.janitor import SweepResult, delete_proxies, find_stale_proxies

    scope = None if all_namespaces else resolve_namespace(namespace, kube.context_namespace())
    stale = find_stale_proxies(kube, scope, stale_after, now)
    where = "any namespace" if scope is None else f"namespace {scope}"
    if not stale:
        console.print(f"No proxy Job in {where} has been silent for more than {_duration(stale_after)}.")
        return 0
    results = [SweepResult(p, deleted=False) for p in stale] if dry_run else delete_proxies(kube, stale)
    console.print(_table(results, dry_run))
    failed = [r for r in results if not dry_run and not r.deleted]
    return EXIT_DELETE_FAILED if failed else 0


def janitor_command(
    namespace: Optional[str] = typer.Option(
        None, "--namespace", "-n", help="Namespace to sweep (default: the kube context's, else 'default')."),
    stale_after: int = typer.Option(
        DEFAULT_STALE_AFTER_SECONDS, "--stale-after", min=60,
        help="Delete proxies whose heartbeat is older than this many seconds."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would be deleted."),
    context: Optional[str] = typer.Option(None, "--context", help="kubeconfig context (default: current)."),
    all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A", help="Sweep every namespace."),
) -> None:
    """Delete Pathways proxy Jobs left behind by clients that died without cleaning up."""
    from tpuplane.runtime.kube import ApiException, ApiUnreachable, KubeApi, KubeConfigError

    console = Console()
    if all_namespaces and namespace:
        typer.echo("--namespace and --all-namespaces exclude each other", err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
    try:
        kube = KubeApi.from_context(context)
        status = run_janitor(kube, namespace=namespace, all_namespaces=all_namespaces, stale_after=stale_after,
                             dry_run=dry_run, console=console)
    except KubeConfigError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except ApiException as error:
        typer.echo(f"Kubernetes API error: {error.status} {error.reason}", err=True)
        raise typer.Exit(EXIT_DELETE_FAILED) from None
    except ApiUnreachable as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(EXIT_DELETE_FAILED) from None
    raise typer.Exit(status)
