"""`tpuplane diff BASE.json HEAD.json`: what a PR changes in the fleet, from two offline plans.

Exit status like `diff(1)`, so CI can branch on it: 0 no change, 1 changes, 2 bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from tpuplane.infra.errors import ConfigError
from tpuplane.infra.review.fold import GITHUB_COMMENT_MAX
from tpuplane.infra.review.report_format import DiffFormatChoice, ReportFormat

EXIT_NO_CHANGES = 0
EXIT_CHANGES = 1
from tpuplane.cli import EXIT_BAD_INPUT


def _read_plan(path: Path, role: str):
    from tpuplane.infra.review.plan import parse_plan
    from tpuplane.infra.yaml_input import read_json_file

    raw = read_json_file(path, f"{role} plan {path}", "plan file", "write it with `tpuplane plan --format json > FILE`")
    return parse_plan(raw, source=f"{role} plan {path}")


def diff_command(
    base: Annotated[Path, typer.Argument(help="Plan JSON of the base branch (`tpuplane plan --format json`).")],
    head: Annotated[Path, typer.Argument(help="Plan JSON of the PR head.")],
    format: Annotated[DiffFormatChoice, typer.Option("--format", "-f", help="markdown (PR comment), text or json.")
                      ] = ReportFormat.MARKDOWN.value,
    prices: Annotated[Optional[Path], typer.Option(
        "--prices", help="A YAML price table merged over the shipped one (estimated monthly cost).")] = None,
    max_length: Annotated[int, typer.Option(
        "--max-length", min=5_000, max=GITHUB_COMMENT_MAX,
        help="Markdown: the most characters the comment may have; what does not fit is left out whole and named at "
             "the top (a PR comment holding several stacks gives each its share).")] = GITHUB_COMMENT_MAX,
) -> None:
    """Compare two offline plans: resources created, updated, replaced, deleted, and TPU slices affected.

    Exit status: 0 when nothing changes, 1 when something does, 2 on bad input.
    """
    # the report machinery loads here, not when the command line starts
    from tpuplane.infra.review.cost import load_prices
    from tpuplane.infra.review.diff_report import render
    from tpuplane.infra.review.impact import diff_context
    from tpuplane.infra.review.plan_diff import diff_plans

    try:
        base_plan, head_plan = _read_plan(base, "base"), _read_plan(head, "head")
        # the property changes are shown from the redacted plans, and the summaries and key properties read them
        redacted = base_plan.redacted(), head_plan.redacted()
        diff = diff_plans(base_plan, head_plan, redacted)
        context = diff_context(*redacted, load_prices(prices))
    except ConfigError as err:
        typer.echo(f"tpuplane diff: bad input\n{err}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    typer.echo(render(diff, ReportFormat(format.value), context, max_length=max_length), nl=False)
    raise typer.Exit(EXIT_CHANGES if diff.has_changes else EXIT_NO_CHANGES)
