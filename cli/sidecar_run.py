"""`tpuplane sidecar run MODULE:FUNC [ARGS...]`: run one function in a local sidecar worker and print its repr.

The function travels to a separate Python process the way it would to the colocated-Python sidecar, so pickling
and missing-dependency errors show up here, before an image is built. Arguments are passed as strings.
Exit 0 with the result's repr; exit 1 with the remote traceback (or the start-up error) on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tpuplane.runtime.local_sidecar import LocalSidecar, RemoteError, SidecarError, run_target


def sidecar_run_command(
    target: str = typer.Argument(..., help="The function to run, as 'package.module:function'."),
    args: list[str] = typer.Argument(None, help="Positional arguments, passed as strings."),
    python: Optional[str] = typer.Option(None, "--python", help="Interpreter of the worker (default: this one)."),
    requirements: Optional[Path] = typer.Option(
        None, "--requirements", "-r", help="Run the worker in a venv built (and cached) from this requirements file."
    ),
) -> None:
    """Run MODULE:FUNC in a local sidecar worker and print the repr of its result."""
    try:
        with LocalSidecar(python=python, venv_requirements=requirements) as sidecar:
            result = run_target(target, *(args or []), sidecar=sidecar)
    except RemoteError as exc:
        typer.echo(exc.remote_traceback.rstrip(), err=True)
        typer.echo(f"error: {target} failed in the sidecar worker ({exc.phase} phase)", err=True)
        raise typer.Exit(1) from exc
    except (SidecarError, ImportError, AttributeError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(repr(result))
