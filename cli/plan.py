"""`tpuplane plan`: the offline plan. Runs the real program in `stacks/` under Pulumi's mocks and prints
every resource with its inputs, with no credentials, network or Pulumi CLI.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from tpuplane.cli import EXIT_BAD_INPUT
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.review.report_format import PlanFormatChoice, ReportFormat
from tpuplane.infra.yaml_input import read_yaml_file


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
    qualified: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    problems = []
    for key, value in config.items():
        full = key if ":" in str(key) else f"{project}:{key}"
        if full in spelled:  # Pulumi reads `cluster` and `<project>:cluster` as one key and keeps one of them
            problems.append(Problem(f"{path}:config.{key}", value, f"the key once: it is also given as "
                                    f"{spelled[full]}", f"`{spelled[full]}` and `{key}` are both {full}; keep one"))
        qualified[full], spelled[full] = value, str(key)
    if problems:
        raise ConfigError(problems)
    return qualified


def make_plan(project: PulumiProject, config: dict[str, Any], stack: str):
    """Run the stack program under mocks. Bad config surfaces as ConfigError, whatever layer raised it."""
    from tpuplane.components.errors import InvalidInput  # the infra extra: here, so `tpuplane catalog` stays light
    from tpuplane.components.offline import run_program_file
    from tpuplane.infra.review.plan import inputs_problems

    try:
        with contextlib.chdir(project.main.parent):  # where Pulumi runs the program: relative paths plan the same
            plan = run_program_file(project.main, config, project=project.name, stack=stack)
    except InvalidInput as exc:  # the stack config, or an Args value known only once another resource exists
        raise exc.error from None
    problems = inputs_problems(plan, f"the plan of stack {stack}")  # what the reports read, as a plan file is read
    if problems:
        raise ConfigError(problems)
    return plan


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


def plan_command(
    stack: Optional[str] = typer.Option(
        None, "--stack", "-s", help="Stack name: reads <stackConfigDir>/Pulumi.<stack>.yaml [default: dev]. "
        "With --config, names the stack the file is planned as."),
    config: Optional[Path] = typer.Option(
        None, "--config", "-c", help="A file in Pulumi.<stack>.yaml format; the stack is named by --stack, "
        "else by the file name."),
    fmt: PlanFormatChoice = typer.Option(ReportFormat.TABLE.value, "--format", "-f",
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
    from tpuplane.infra.review.cost import load_prices
    from tpuplane.infra.review.markup import visible
    from tpuplane.infra.review.plan_report import render_plan, render_table
    from tpuplane.infra.review.policies import check_plan

    err = Console(stderr=True, emoji=False)  # `tpuplane:x:` in a message is a key, not an emoji code
    try:
        project = PulumiProject.find(project_dir.resolve())
        path = config or stack_file(project, stack or "dev")
        stack_name = stack or ("dev" if config is None else path.stem.removeprefix("Pulumi."))
        price_table = load_prices(prices)
        raw_plan = make_plan(project, read_stack_file(path, project.name), stack_name)
    except ConfigError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)  # redacted by Problem
        raise typer.Exit(EXIT_BAD_INPUT) from None
    plan = raw_plan.redacted()  # once, before any format renders; policies read the raw plan

    terminal = Console()
    if ReportFormat(fmt.value) is ReportFormat.TABLE and not out and terminal.is_terminal:
        # colour and the terminal's width; a file or pipe gets plain text at 160 columns (deterministic)
        terminal.print(render_table(plan, details=details, prices=price_table), highlight=False)
        text = ""
    else:
        text = render_plan(plan, ReportFormat(fmt.value), price_table, details=details)
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
            err.print(f"[bold yellow]policy:[/] {escape(visible(str(violation)))}", highlight=False,
                      soft_wrap=True)
        err.print(f"{len(violations)} policy violation(s)", highlight=False)
        if violations:
            raise typer.Exit(1)
