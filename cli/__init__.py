"""The `tpuplane` command line. Exit statuses shared by every command: 0 done, 1 the check or action failed,
2 bad input (one message on stderr, never a traceback)."""

from enum import Enum

import typer

EXIT_BAD_INPUT = 2


class OutputFormat(str, Enum):
    """What a command that prints a table or JSON takes as `--format`: a choice, so a typo is refused by typer."""

    table = "table"
    json = "json"


FORMAT = typer.Option(OutputFormat.table, "--format", "-f", help="table, or json for scripts.")
