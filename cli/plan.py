"""`tpuplane plan`: the offline plan. Runs the real program in `stacks/` under Pulumi's mocks and prints
every resource with its inputs, with no credentials, network or Pulumi CLI.
"""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from tpuplane.infra.errors import ConfigError
from tpuplane.infra.review.policies import check_plan
from tpuplane.infra.review.redaction import redact_plan, redact_text
from tpuplane.infra.yaml_input import read_yaml_file


class PlanFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


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
        raise ConfigError.at(f"{path}:config", config, "a mapping of config keys", "see stacks/Pulumi.dev.yaml")
    return {key if ":" in key else f"{project}:{key}": value for key, value in config.items()}


def make_plan(project: PulumiProject, config: dict[str, Any], stack: str):
    """Run the stack program under mocks. Bad config surfaces as ConfigError, whatever layer raised it."""
    import pulumi  # the infra extra; imported here so `tpuplane catalog` stays light

    from tpuplane.components.offline import run_program_file

    try:
        return run_program_file(project.main, config, project=project.name, stack=stack)
    except pulumi.RunError as exc:
        if isinstance(exc.__cause__, ConfigError):
            raise exc.__cause__ from None
        raise


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        return [item for k, v in value.items() for item in _flatten(v, f"{prefix}.{k}" if prefix else k)]
    if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        return [item for i, v in enumerate(value) for item in _flatten(v, f"{prefix}[{i}]")]
    return [(prefix, value)]


def render_table(plan) -> Tree:
    """The component tree, each resource with its inputs flattened to `path = value` lines."""
    root = Tree(f"[bold]{plan.project}[/]/[bold]{plan.stack}[/]: {len(plan.resources)} resources")
    known = {r.urn for r in plan.resources}
    children: dict[str, list] = {}
    for res in plan.resources:  # in URN order, so siblings always print in the same order
        children.setdefault(res.parent if res.parent in known else "", []).append(res)

    def add(node: Tree, parent_urn: str) -> None:
        for res in children.get(parent_urn, []):
            child = node.add(f"[cyan]{res.type}[/] [bold]{escape(res.name)}[/]")
            if res.custom:
                for path, value in _flatten(res.inputs):
                    child.add(f"[dim]{escape(path)}[/] = {escape(json.dumps(value, sort_keys=True))}")
            add(child, res.urn)

    add(root, "")
    return root


def render_markdown(plan) -> str:
    lines = [f"# Plan of `{plan.project}/{plan.stack}`", "", f"{len(plan.resources)} resources.", "",
             "| type | name | parent |", "| --- | --- | --- |"]
    by_urn = {r.urn: r.name for r in plan.resources}
    lines += [f"| `{r.type}` | `{r.name}` | {by_urn.get(r.parent, '')} |" for r in plan.resources]
    for r in plan.resources:
        if r.custom:
            lines += ["", f"<details><summary><code>{r.type}</code> <b>{r.name}</b></summary>", "", "```yaml",
                      yaml.safe_dump(r.inputs, sort_keys=True).rstrip(), "```", "</details>"]
    return "\n".join(lines) + "\n"


def plan_command(
    stack: str = typer.Option("dev", "--stack", "-s", help="Stack name: reads <stackConfigDir>/Pulumi.<stack>.yaml."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="A file in Pulumi.<stack>.yaml format."),
    fmt: PlanFormat = typer.Option(PlanFormat.table, "--format", "-f", help="Output format."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the plan to this file."),
    project_dir: Path = typer.Option(Path("."), "--project-dir", help="Where Pulumi.yaml is (or below it)."),
    policy: bool = typer.Option(False, "--policy", help="Also run the policy pack's rules; exit 1 on violations."),
    production: bool = typer.Option(False, "--production", help="With --policy: treat the stack as production."),
) -> None:
    """Print every resource the stack would create, offline, by running the real program under mocks."""
    err = Console(stderr=True)
    try:
        project = PulumiProject.find(project_dir.resolve())
        path = config or project.stack_config_dir / f"Pulumi.{stack}.yaml"
        stack_name = stack if config is None else path.stem.removeprefix("Pulumi.")
        raw_plan = make_plan(project, read_stack_file(path, project.name), stack_name)
    except ConfigError as exc:
        err.print(f"[bold red]error:[/] {escape(redact_text(str(exc)))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    plan = redact_plan(raw_plan)  # once, before any format renders; policies read the raw plan

    if fmt is PlanFormat.json:
        text = json.dumps(plan.to_json(), indent=2, sort_keys=True, allow_nan=False) + "\n"
    elif fmt is PlanFormat.markdown:
        text = render_markdown(plan)
    else:
        buffer = io.StringIO()
        Console(file=buffer, width=160, soft_wrap=True).print(render_table(plan), highlight=False)
        text = buffer.getvalue()
    if out:
        try:
            out.write_text(text)
        except OSError as exc:
            err.print(f"[bold red]error:[/] --out: cannot write {escape(str(out))}: {exc.strerror}", highlight=False)
            raise typer.Exit(2) from None
    else:
        sys.stdout.write(text)
    if policy:
        violations = check_plan(raw_plan.to_json(), production=production)
        for violation in violations:
            err.print(f"[bold yellow]policy:[/] {escape(redact_text(str(violation)))}", highlight=False,
                      soft_wrap=True)
        err.print(f"{len(violations)} policy violation(s)", highlight=False)
        if violations:
            raise typer.Exit(1)
