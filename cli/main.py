"""The `tpuplane` command: one entry point for the catalog, the offline plan, renderers and runtime tools."""

from __future__ import annotations

import inspect
from importlib.metadata import version as package_version

import typer

from tpuplane.cli import sandbox, sidecar
from tpuplane.cli.catalog import catalog_command
from tpuplane.cli.diff import diff_command
from tpuplane.cli.janitor import janitor_command
from tpuplane.cli.plan import plan_command
from tpuplane.cli.queues import queues_command
from tpuplane.cli.sidecar_run import sidecar_run_command
from tpuplane.cli.workload import app as workload_app
from tpuplane.cli.workload import experiment_app
from tpuplane.cli import workload_live


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tpuplane {package_version('tpuplane')}")
        raise typer.Exit()


# Plain click help: it wraps at the terminal's width and never cuts an option name or a choice list short
# (rich's help tables end cells in "..." at 80 columns).
app = typer.Typer(
    name="tpuplane",
    help="Infrastructure as code for TPU fleets on GKE.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"max_content_width": 120},
)


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Infrastructure as code for TPU fleets on GKE."""

app.command("catalog")(catalog_command)
app.command("plan")(plan_command)
app.command("diff")(diff_command)
app.command("janitor")(janitor_command)
sidecar.app.command("run")(sidecar_run_command)
app.add_typer(sidecar.app, name="sidecar")
app.add_typer(sandbox.app, name="sandbox")
app.command("queues")(queues_command)
workload_app.command("submit")(workload_live.submit_command)
workload_app.command("list")(workload_live.list_command)
workload_app.command("status")(workload_live.status_command)
workload_app.command("why")(workload_live.why_command)
workload_app.command("wait")(workload_live.wait_command)
workload_app.command("logs")(workload_live.logs_command)
workload_app.command("delete")(workload_live.delete_command)
experiment_app.command("submit")(workload_live.submit_command)
app.add_typer(workload_app, name="workload")
app.add_typer(experiment_app, name="experiment")



def _first_paragraph(text: str | None) -> str | None:
    return inspect.cleandoc(text).split("\n\n")[0].replace("\n", " ") if text else None


def _untruncated_command_lists(typer_app: typer.Typer) -> None:
    """Command lists show each command's whole first paragraph, wrapped (click would cut it with "...")."""
    for command in typer_app.registered_commands:
        command.short_help = command.short_help or _first_paragraph(command.help or command.callback.__doc__)
    for group in typer_app.registered_groups:
        sub = group.typer_instance
        group.short_help = group.short_help or _first_paragraph(group.help or sub.info.help)
        _untruncated_command_lists(sub)


_untruncated_command_lists(app)

if __name__ == "__main__":
    app()
