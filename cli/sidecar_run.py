"""`tpuplane sidecar run MODULE:FUNC [ARGS...]`: run one function in a local sidecar worker and print its repr.

The function travels to a separate Python process the way it would to the colocated-Python sidecar, so pickling
and missing-dependency errors show up here, before an image is built. Arguments are passed as strings. The
current directory is importable, on this side and in the worker, as with `python -m` (a sidecar image would have
your package installed). Exit 0 with the result's repr; 1 with the remote traceback (or the start-up error) on
stderr; 2 when the target is not a function this directory or the environment can import.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from tpuplane.infra.redaction import redact_text
from tpuplane.infra.review.markup import visible
from tpuplane.runtime.local_sidecar import LocalSidecar, RemoteError, SidecarError, TargetError, ensure_sidecar_venv, \
    resolve_target

EXIT_FAILED = 1
from tpuplane.cli import EXIT_BAD_INPUT


def _worker_env() -> dict[str, str]:
    """PYTHONPATH with the current directory first: the worker imports the target's package as `python -m` would."""
    path = [os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"PYTHONPATH": os.pathsep.join(dict.fromkeys(path))}


def sidecar_run_command(
    target: str = typer.Argument(..., help="The function to run, as 'package.module:function'."),
    args: list[str] = typer.Argument(None, help="Positional arguments, passed as strings."),
    python: Optional[str] = typer.Option(None, "--python", help="Interpreter of the worker (default: this one)."),
    requirements: Optional[Path] = typer.Option(
        None, "--requirements", "-r", help="Run the worker in a venv built (and cached) from this requirements file."
    ),
) -> None:
    """Run MODULE:FUNC in a local sidecar worker and print the repr of its result."""
    err = Console(stderr=True, highlight=False, emoji=False)
    try:
        fn = resolve_target(target)
    except TargetError as exc:
        err.print(f"[bold red]error:[/] {escape(redact_text(visible(target)))}: {escape(redact_text(visible(exc)))} "
                  "(expected an importable 'package.module:function'; the current directory is importable)",
                  soft_wrap=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    try:
        if requirements is not None:
            with err.status(f"building the sidecar venv from {escape(str(requirements))} (cached once built)"):
                ensure_sidecar_venv(requirements, python=python)
        with LocalSidecar(python=python, venv_requirements=requirements, env=_worker_env()) as sidecar:
            result = sidecar.call(fn, *(args or []))
    except RemoteError as exc:
        typer.echo(exc.remote_traceback.rstrip(), err=True)
        typer.echo(f"error: {target} failed in the sidecar worker ({exc.phase} phase)", err=True)
        raise typer.Exit(EXIT_FAILED) from None
    except SidecarError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_FAILED) from None
    typer.echo(repr(result))
