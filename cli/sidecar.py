"""`tpuplane sidecar check`: will the sidecar image build, answered offline in well under a second.

Exit 0 with one "ok" line; exit 1 with one line per conflict (package, your requirement, the pinned version, where
each is written); exit 2 when an input is unreadable or malformed. Lines that cannot be checked offline (URLs,
VCS, editable installs, constraints that are not exact pins) are listed on stderr and do not fail the check.

The client's JAX picks the base image: `--jax-version`, else the jax installed where the command runs (the client's
environment), else the default image's. The constraints' jax and jaxlib pins must equal it.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Optional

import typer

from tpuplane.infra.errors import ConfigError
from tpuplane.infra.pathways.sidecar_check import check_sidecar
from tpuplane.infra.pathways.sidecar_image import DEFAULT_JAX_VERSION, base_image_for

EXIT_CONFLICTS = 1
EXIT_BAD_INPUT = 2

DEFAULT_REQUIREMENTS = Path("sidecar/requirements.txt")
DEFAULT_CONSTRAINTS = Path("sidecar/constraints.example.txt")

app = typer.Typer(help="The colocated-Python sidecar: check its image's requirements before any build.")


@app.callback()
def sidecar() -> None:
    """A callback keeps `check` a named sub-command even while it is the only one."""


FLAG_SOURCE = "client --jax-version"
INSTALLED_SOURCE = "client jax installed here (or pass --jax-version)"
DEFAULT_SOURCE = "default JAX (no jax installed here)"


def client_jax_version(flag: str | None) -> tuple[str, str]:
    """The client's JAX version and where it came from: the flag, the installed distribution, or the default."""
    if flag is not None:
        return flag, FLAG_SOURCE
    try:
        return metadata.version("jax"), INSTALLED_SOURCE
    except metadata.PackageNotFoundError:
        return DEFAULT_JAX_VERSION, DEFAULT_SOURCE


@app.command()
def check(
    requirements: Path = typer.Option(
        DEFAULT_REQUIREMENTS, "--requirements", "-r", help="The sidecar's pip requirement file (-r/-c includes are read)."
    ),
    constraints: Optional[Path] = typer.Option(
        None,
        "--constraints",
        "-c",
        help=f"The base image's /opt/venv/server_constraints.txt, exported from the image. "
        f"Default: {DEFAULT_CONSTRAINTS}, a format example.",
    ),
    jax_version: Optional[str] = typer.Option(
        None,
        "--jax-version",
        help="The client's JAX version: picks the base image (and so its Python for markers) and requires the "
        "pinned jax and jaxlib to equal it. Default: the jax installed here, else "
        f"{DEFAULT_JAX_VERSION}.",
    ),
) -> None:
    """Check that every requirement accepts the version the base image pins (and jax/jaxlib match the client)."""
    if constraints is None and not DEFAULT_CONSTRAINTS.is_file():
        typer.echo(f"error: no {DEFAULT_CONSTRAINTS} here; pass --constraints FILE (the base image's "
                   "/opt/venv/server_constraints.txt, exported from the image)", err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
    constraints = constraints or DEFAULT_CONSTRAINTS
    client, source = client_jax_version(jax_version)
    if source == DEFAULT_SOURCE:
        typer.echo(f"note: jax is not installed here; checking for the JAX {client} image (pass --jax-version)",
                   err=True)
    try:
        base = base_image_for(client, path=source)
        result = check_sidecar(
            requirements,
            constraints,
            python_version=base.python_version,
            jax_version=client,
            jax_source=source,
        )
    except ConfigError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    for notice in result.notices:
        typer.echo(f"note: {notice}", err=True)
    for conflict in result.conflicts:
        typer.echo(str(conflict))
    if not result.ok:
        raise typer.Exit(EXIT_CONFLICTS)
    skipped = f", {result.not_for_image} not for this image" if result.not_for_image else ""
    where = f"python {base.python_version}, linux/x86_64"
    typer.echo(f"ok: {result.checked} requirements fit the {result.pins} pins in {constraints} ({where}){skipped}")
