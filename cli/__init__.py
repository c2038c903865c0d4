"""The `tpuplane` command line. Exit statuses shared by every command: 0 done, 1 the check or action failed,
2 bad input (one message on stderr, never a traceback)."""

import typer

from tpuplane.infra.review.report_format import ReportFormat, choices

EXIT_BAD_INPUT = 2

# What a command that prints a table or JSON takes as `--format`: a choice, so a typo is refused by typer.
OutputFormat = choices("OutputFormat", (ReportFormat.TABLE, ReportFormat.JSON))

FORMAT = typer.Option(OutputFormat.table, "--format", "-f", help="table, or json for scripts.")
