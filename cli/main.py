"""The `tpuplane` command: one entry point for the catalog, the offline plan, renderers and runtime tools."""

from __future__ import annotations

import typer

from tpuplane.cli import sidecar
from tpuplane.cli.catalog import catalog_command
from tpuplane.cli.diff import diff_command
from tpuplane.cli.janitor import janitor_command
from tpuplane.cli.plan import plan_command
from tpuplane.cli.sidecar_run import sidecar_run_command
from tpuplane.cli.workload import app as workload_app
from tpuplane.cli.workload import experiment_app

app = typer.Typer(
    name="tpuplane",
    help="Infrastructure as code for TPU fleets on GKE.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("catalog")(catalog_command)
app.command("plan")(plan_command)
app.command("diff")(diff_command)
app.command("janitor")(janitor_command)
sidecar.app.command("run")(sidecar_run_command)
app.add_typer(sidecar.app, name="sidecar")
app.add_typer(workload_app, name="workload")
app.add_typer(experiment_app, name="experiment")

if __name__ == "__main__":
    app()
