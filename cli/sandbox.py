"""`tpuplane sandbox build|up|status|down`: a stack's queues, flavors and node shapes on a real control plane, here.

Exit statuses: 0 done, 1 `status` found a process down, 2 bad input or a sandbox that could not start (one line on
stderr; the logs it names say more).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from tpuplane.cli import EXIT_BAD_INPUT, FORMAT, OutputFormat
from tpuplane.cli.plan import PulumiProject, read_stack_file, stack_file
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.redaction import redact_text

app = typer.Typer(help="A local control plane that plays a stack's TPU fleet: real Kubernetes, Kueue and JobSet, "
                       "fake nodes (kwok), the stack's Kubernetes half applied by the real Pulumi engine.",
                  no_args_is_help=True)

_DIR_HELP = "The sandbox's folder [default: $TPUPLANE_SANDBOX_DIR, else ~/.local/state/tpuplane/sandbox]."


def _err() -> Console:
    return Console(stderr=True, emoji=False, highlight=False, soft_wrap=True)


def _fail(message: str) -> typer.Exit:
    _err().print(f"[bold red]error:[/] {escape(redact_text(message))}")
    return typer.Exit(EXIT_BAD_INPUT)


def _directory(directory: Optional[Path]) -> Path:
    from tpuplane.sandbox.layout import default_dir
    where = (directory or default_dir()).expanduser().resolve()
    if where.exists() and not where.is_dir():
        raise _fail(f"--dir: {where} is not a folder; give the sandbox's folder, or one to create")
    return where


@app.command("build")
def build_command() -> None:
    """Build the sandbox's binaries from the Go modules pinned in sandbox/toolchain (cached; resumable)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tpuplane.sandbox import toolchain

    console = _err()
    console.print(f"toolchain cache: {toolchain.cache_root()}")
    started = time.monotonic()
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, disable=not console.is_terminal) as progress:
            tasks: dict[str, int] = {}
            printed: dict[str, float] = {}

            def report(what: str, done: int, total: int) -> None:
                if console.is_terminal:
                    if what not in tasks:
                        tasks[what] = progress.add_task(what, total=total)
                    progress.update(tasks[what], completed=done, total=total)
                elif time.monotonic() - printed.get(what, 0.0) > 30 or done == total:  # a line a while (CI logs)
                    printed[what] = time.monotonic()
                    console.print(f"{what}: {done}/{total} packages")

            for module in toolchain.MODULES:
                report_line = toolchain.build_module(module, report)
                state = "cached" if report_line.cached else f"built in {report_line.seconds:.0f} s"
                console.print(f"{module.folder}: {state} ({report_line.size_bytes / 2**20:.0f} MiB)")
    except toolchain.ToolchainError as exc:
        raise _fail(str(exc)) from None
    console.print(f"toolchain ready in {time.monotonic() - started:.0f} s")


def _source(stack: Optional[str], config: Optional[Path], project_dir: Path):
    from tpuplane.infra.stack import load_stack_config
    from tpuplane.sandbox.lifecycle import StackSource

    project = PulumiProject.find(project_dir.resolve())
    path = config or stack_file(project, stack or "dev")
    name = stack or ("dev" if config is None else path.stem.removeprefix("Pulumi."))
    config = load_stack_config(read_stack_file(path, project.name), project_dir=project.root)
    return StackSource(config, project.name, name, path.resolve(), project.root)


@app.command("up")
def up_command(
    stack: Optional[str] = typer.Option(None, "--stack", "-s", help="Stack name: reads "
                                        "<stackConfigDir>/Pulumi.<stack>.yaml [default: dev]."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="A file in Pulumi.<stack>.yaml format."),
    directory: Optional[Path] = typer.Option(None, "--dir", help=_DIR_HELP),
    port: Optional[int] = typer.Option(None, "--port", min=1, max=65535,
                                       help="The API server's port on 127.0.0.1 [default: a free one]."),
    project_dir: Path = typer.Option(Path("."), "--project-dir", help="Where Pulumi.yaml is (or below it)."),
) -> None:
    """Start the sandbox for a stack and print its kubeconfig path."""
    from tpuplane.sandbox.engine import apply_kubernetes_half
    from tpuplane.sandbox.lifecycle import SandboxError, up
    from tpuplane.sandbox.processes import ProcessFailed
    from tpuplane.sandbox.toolchain import ToolchainMissing

    console = _err()
    started = time.monotonic()
    try:
        source = _source(stack, config, project_dir)
        state = up(source, _directory(directory), apiserver_port=port,
                   progress=lambda step: console.print(f"starting {step}..."), apply=apply_kubernetes_half)
    except (ConfigError, SandboxError, ToolchainMissing) as exc:
        raise _fail(str(exc)) from None
    except ProcessFailed as exc:
        first, _, rest = str(exc).partition("\n")
        console.print(rest, markup=False)
        raise _fail(first) from None
    console.print(f"sandbox up in {time.monotonic() - started:.0f} s: stack {state.stack}, {state.nodes} nodes, "
                  f"API server https://127.0.0.1:{state.ports.apiserver}")
    console.print(f"export KUBECONFIG={state.kubeconfig}")
    sys.stdout.write(state.kubeconfig + "\n")


@app.command("status")
def status_command(
    directory: Optional[Path] = typer.Option(None, "--dir", help=_DIR_HELP),
    fmt: OutputFormat = FORMAT,
) -> None:
    """Each process of the sandbox and whether it runs; exit 1 if one is down."""
    from rich import box
    from rich.table import Table

    from tpuplane.sandbox.layout import UnreadableState
    from tpuplane.sandbox.lifecycle import status

    where = _directory(directory)
    try:
        current = status(where)
    except UnreadableState as exc:
        raise _fail(str(exc)) from None
    if current is None:
        raise _fail(f"no sandbox in {where}; start one with `tpuplane sandbox up --stack dev`")
    if fmt is OutputFormat.json:
        doc = {"stack": current.state.stack, "directory": current.state.directory,
               "kubeconfig": current.state.kubeconfig,
               "apiServer": {"url": f"https://127.0.0.1:{current.state.ports.apiserver}",
                             "ready": current.apiserver_ready},
               "nodes": current.state.nodes, "applied": current.state.applied,
               "processes": [{"name": p.name, "pid": p.pid, "state": "running" if p.running else "stopped",
                              "log": p.log} for p in current.processes]}
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        table = Table(title=f"sandbox of stack {current.state.stack}", box=box.SIMPLE_HEAD, title_justify="left")
        for header in ("process", "pid", "state", "log"):
            table.add_column(header)
        for p in current.processes:
            table.add_row(p.name, str(p.pid), "running" if p.running else "STOPPED", p.log)
        console = Console(highlight=False)
        console.print(table)
        console.print(f"kubeconfig: {current.state.kubeconfig}")
    if not current.healthy:
        raise typer.Exit(1)


@app.command("down")
def down_command(directory: Optional[Path] = typer.Option(None, "--dir", help=_DIR_HELP)) -> None:
    """Stop every process the sandbox started and remove its folder."""
    from tpuplane.sandbox.lifecycle import down

    where = _directory(directory)
    stopped = down(where)
    _err().print(f"stopped {', '.join(stopped)}; removed {where}" if stopped else f"no sandbox in {where}")
