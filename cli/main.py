"""The `tpuplane` command: one entry point for the catalog, the offline plan, renderers and runtime tools."""

from __future__ import annotations

import typer

from tpuplane.cli.catalog import catalog_command
from tpuplane.cli.plan import plan_command

app = typer.Typer(
    name="tpuplane",
    help="Infrastructure as code for TPU fleets on GKE.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("catalog")(catalog_command)
app.command("plan")(plan_command)

if __name__ == "__main__":
    app()
