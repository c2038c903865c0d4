"""The output formats of every report, in one enum: its own module, so the command line declares its options
without loading the report machinery (a `tpuplane catalog` must not pay for it)."""

from enum import Enum


class ReportFormat(str, Enum):
    TABLE = "table"
    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"
    HTML = "html"


# What each report offers: a plan prints as a table (summary first), a diff as text.
PLAN_FORMATS = (ReportFormat.TABLE, ReportFormat.JSON, ReportFormat.MARKDOWN, ReportFormat.HTML)
DIFF_FORMATS = (ReportFormat.MARKDOWN, ReportFormat.TEXT, ReportFormat.JSON)


def choices(name: str, formats: tuple[ReportFormat, ...]) -> type[Enum]:
    """The choices of one command's `--format`: the members of `formats`, by value (typer lists an Enum's)."""
    return Enum(name, {f.value: f.value for f in formats}, type=str)


PlanFormatChoice = choices("PlanFormatChoice", PLAN_FORMATS)
DiffFormatChoice = choices("DiffFormatChoice", DIFF_FORMATS)
