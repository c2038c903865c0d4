"""`tpuplane plan`: the offline plan. Runs the real program in `stacks/` under Pulumi's mocks and prints
every resource with its inputs, with no credentials, network or Pulumi CLI.
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from tpuplane.cli import EXIT_BAD_INPUT
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.yaml_input import read_yaml_file


class PlanFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


@dataclass(frozen=True)
class PulumiProject:
    """What `Pulumi.yaml` says: the project name, the program and where stack configs live."""

    root: Path
    name: str
    main: Path
    stack_config_dir: Path

    @classmethod
    def find(cls, start: Path) -> "PulumiProject":
        for folder in (start, *start.parents):
            manifest = folder / "Pulumi.yaml"
            if manifest.is_file():
                doc = read_yaml_file(manifest)
                if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
                    raise ConfigError.at(str(manifest), "<document>", "a Pulumi.yaml with a `name`",
                                         "see the repository's Pulumi.yaml")
                main = folder / str(doc.get("main", "."))
                return cls(folder, doc["name"], main / "__main__.py" if main.is_dir() else main,
                           folder / str(doc.get("stackConfigDir", ".")))
        raise ConfigError.at("Pulumi.yaml", str(start), "a folder inside a tpuplane project",
                             "run from the repository, or pass --project-dir")


def read_stack_file(path: Path, project: str) -> dict[str, Any]:
    """The `config:` of a Pulumi.<stack>.yaml, keys qualified as Pulumi does (`cluster` -> `<project>:cluster`)."""
    doc = read_yaml_file(path, str(path), "Pulumi.<stack>.yaml file") or {}
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        given = config if isinstance(doc, dict) else f"a {type(doc).__name__} document"
        raise ConfigError.at(f"{path}:config", given, "a mapping of config keys", "see stacks/Pulumi.dev.yaml")
    return {key if ":" in key else f"{project}:{key}": value for key, value in config.items()}


def make_plan(project: PulumiProject, config: dict[str, Any], stack: str):
    """Run the stack program under mocks. Bad config surfaces as ConfigError, whatever layer raised it."""
    import pulumi  # the infra extra; imported here so `tpuplane catalog` stays light

    from tpuplane.components.offline import run_program_file

    try:
        with contextlib.chdir(project.main.parent):  # where Pulumi runs the program: relative paths plan the same
            return run_program_file(project.main, config, project=project.name, stack=stack)
    except pulumi.RunError as exc:
        if isinstance(exc.__cause__, ConfigError):
            raise exc.__cause__ from None
        raise


def stack_file(project: PulumiProject, stack: str) -> Path:
    """<stackConfigDir>/Pulumi.<stack>.yaml; an unknown stack names the ones that exist."""
    path = project.stack_config_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml")
                       for p in project.stack_config_dir.glob("Pulumi.*.yaml"))
        raise ConfigError.at("--stack", stack, f"one of: {', '.join(known) or '(none)'}",
                             f"there is no {path.name} in {project.stack_config_dir}; "
                             "or pass --config FILE")
    return path


def _print_table(plan, details: bool, prices) -> str | None:
    """Colour and the terminal's width on a terminal; plain, 160 columns (deterministic) otherwise.
    Returns the text when it must go to a file or pipe, None once printed to the terminal."""
    from tpuplane.cli.plan_render import plain_text, render_table

    terminal = Console()
    renderable = render_table(plan, details=details, prices=prices)
    if terminal.is_terminal:
        terminal.print(renderable, highlight=False)
        return None
    return plain_text(renderable)


def plan_command(
    stack: Optional[str] = typer.Option(
        None, "--stack", "-s", help="Stack name: reads <stackConfigDir>/Pulumi.<stack>.yaml [default: dev]. "
        "With --config, names the stack the file is planned as."),
    config: Optional[Path] = typer.Option(
        None, "--config", "-c", help="A file in Pulumi.<stack>.yaml format; the stack is named by --stack, "
        "else by the file name."),
    fmt: PlanFormat = typer.Option(PlanFormat.table, "--format", "-f",
                                   help="Output format: table (summary first), json (for `tpuplane diff`), "
                                        "markdown (PR comment), html (one self-contained page; use --out)."),
    details: bool = typer.Option(False, "--details", help="Table: print every property of every resource."),
    prices: Optional[Path] = typer.Option(
        None, "--prices", help="A YAML price table merged over the shipped one (estimated monthly cost)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the plan to this file."),
    project_dir: Path = typer.Option(Path("."), "--project-dir", help="Where Pulumi.yaml is (or below it)."),
    policy: bool = typer.Option(False, "--policy", help="Also run the policy pack's rules; exit 1 on violations."),
    production: bool = typer.Option(False, "--production", help="With --policy: treat the stack as production."),
) -> None:
    """Print every resource the stack would create, offline, by running the real program under mocks."""
    # what renders and judges a plan loads here, not when the command line starts (`tpuplane catalog` stays fast)
    from tpuplane.cli.plan_render import plain_text, plan_summary, render_markdown, render_table
    from tpuplane.infra.review.cost import load_prices
    from tpuplane.infra.review.html_report import render_html
    from tpuplane.infra.review.policies import check_plan
    from tpuplane.infra.redaction import redact_text

    err = Console(stderr=True, emoji=False)  # `tpuplane:x:` in a message is a key, not an emoji code
    try:
        project = PulumiProject.find(project_dir.resolve())
        path = config or stack_file(project, stack or "dev")
        stack_name = stack or ("dev" if config is None else path.stem.removeprefix("Pulumi."))
        price_table = load_prices(prices)
        raw_plan = make_plan(project, read_stack_file(path, project.name), stack_name)
    except ConfigError as exc:
        err.print(f"[bold red]error:[/] {escape(redact_text(str(exc)))}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    plan = raw_plan.redacted()  # once, before any format renders; policies read the raw plan

    if fmt is PlanFormat.json:
        text = json.dumps(plan.to_json(), indent=2, sort_keys=True, allow_nan=False) + "\n"
    elif fmt is PlanFormat.markdown:
        text = render_markdown(plan, price_table)
    elif fmt is PlanFormat.html:
        text = render_html(plan_summary(plan), plan.resources, price_table)
    elif out:
        text = plain_text(render_table(plan, details=details, prices=price_table))
    else:
        text = _print_table(plan, details, price_table) or ""
    if out:
        try:
            out.write_text(text)
        except OSError as exc:
            err.print(f"[bold red]error:[/] --out: cannot write {escape(str(out))}: {exc.strerror}", highlight=False)
            raise typer.Exit(EXIT_BAD_INPUT) from None
    else:
        sys.stdout.write(text)
    if policy:
        violations = check_plan(raw_plan, production=production)
        for violation in violations:
            err.print(f"[bold yellow]policy:[/] {escape(redact_text(str(violation)))}", highlight=False,
                      soft_wrap=True)
        err.print(f"{len(violations)} policy violation(s)", highlight=False)
        if violations:
            raise typer.Exit(1)
