"""`tpuplane sidecar check`: will the sidecar image build, answered offline in well under a second.

Exit 0 with one "ok" line; exit 1 with one line per conflict (package, your requirement, the pinned version, where
each is written); exit 2 when an input is unreadable or malformed. Lines that cannot be checked offline (URLs,
VCS, editable installs, constraints that are not exact pins) are listed on stderr and do not fail the check.

The image's JAX is `--jax-version` (a client's, which the constraints' jax and jaxlib pins must equal), else the
constraints' own jax pin (the file is the truth about the image), else the jax installed here, else the default.
A JAX without a known base image is still checked, with a notice, for the newest known image's Python.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Optional

import typer
from packaging.version import Version

from tpuplane.infra.errors import ConfigError
from tpuplane.runtime.sidecar_wheel import WHEEL_FOLDER, build_runtime_wheel
from tpuplane.infra.pathways.sidecar_image import (
    BASE_TAGS_ENV,
    DEFAULT_JAX_VERSION,
    base_image_for,
    known_base_images,
    known_jax_versions,
)

EXIT_CONFLICTS = 1
from tpuplane.cli import EXIT_BAD_INPUT

DEFAULT_REQUIREMENTS = Path("sidecar/requirements.txt")
DEFAULT_CONSTRAINTS = Path("sidecar/constraints.example.txt")

app = typer.Typer(help="The colocated-Python sidecar: check its image's requirements before any build, write the "
                       "runtime it needs.")


@app.callback()
def sidecar() -> None:
    """A callback keeps `check` a named sub-command even while it is the only one."""


FLAG_SOURCE = "client --jax-version"
PIN_SOURCE = "the jax pin of the constraints"
INSTALLED_SOURCE = "client jax installed here (or pass --jax-version)"
DEFAULT_SOURCE = "default JAX (no jax installed here)"


def installed_jax() -> str | None:
    try:
        return metadata.version("jax")
    except metadata.PackageNotFoundError:
        return None


def pinned_jax(constraints: Path) -> str | None:
    """The constraints file's own jax pin: the image's JAX, whatever the environment running the check has."""
    from tpuplane.infra.pathways.sidecar_check import image_environment, read_pins

    newest = max(known_base_images(), key=lambda image: Version(image.jax_version))
    pin = read_pins(constraints, image_environment(newest.python_version)).by_name.get("jax")
    return str(pin.version) if pin else None


def image_jax_version(flag: str | None, pin: str | None) -> tuple[str, str]:
    """The JAX the check is for, and where it came from: the flag (a client's JAX, held to the pins), else the
    constraints' jax pin, else the jax installed here, else the default image's."""
    if flag is not None:
        return flag, FLAG_SOURCE
    if pin is not None:
        return pin, PIN_SOURCE
    installed = installed_jax()
    return (installed, INSTALLED_SOURCE) if installed else (DEFAULT_JAX_VERSION, DEFAULT_SOURCE)


def python_for(jax_version: str, source: str, base_tags: Path | None) -> tuple[str, str | None]:
    """The image's Python (for markers), and a notice when no known base image has this JAX: its requirements
    are still checked, for the newest known image's Python."""
    try:
        return base_image_for(jax_version, path=source, extra=base_tags).python_version, None
    except ConfigError:
        Version(jax_version)  # not a version at all: let the caller report it
        newest = max(known_base_images(base_tags), key=lambda image: Version(image.jax_version))
        return newest.python_version, (
            f"no known sidecar base image for JAX {jax_version} ({source}); checked for Python "
            f"{newest.python_version}, the newest known image's. Known: {', '.join(known_jax_versions(base_tags))}; "
            f"add the tag to a file named by ${BASE_TAGS_ENV} or pass --base-tags FILE")


@app.command()
def check(
    requirements: Path = typer.Option(
        DEFAULT_REQUIREMENTS, "--requirements", "-r", help="The sidecar's pip requirement file (-r/-c includes are read)."
    ),
    constraints: Optional[Path] = typer.Option(
        None,
        "--constraints",
        "-c",
        help=f"The base image's /opt/venv/server_constraints.txt, exported from the image; its jax pin names the "
        f"image. Default: {DEFAULT_CONSTRAINTS}, a format example.",
    ),
    jax_version: Optional[str] = typer.Option(
        None,
        "--jax-version",
        help="The client's JAX version: the pinned jax and jaxlib must equal it. Default: the constraints' jax "
        f"pin, else the jax installed here, else {DEFAULT_JAX_VERSION}.",
    ),
    base_tags: Optional[Path] = typer.Option(
        None, "--base-tags", help=f"A file of extra sidecar base tags (one per line), added to the known ones "
        f"(as ${BASE_TAGS_ENV} does)."),
) -> None:
    """Check that every requirement accepts the version the base image pins (and jax/jaxlib match the client)."""
    if constraints is None and not DEFAULT_CONSTRAINTS.is_file():
        typer.echo(f"error: no {DEFAULT_CONSTRAINTS} here; pass --constraints FILE (the base image's "
                   "/opt/venv/server_constraints.txt, exported from the image)", err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
    constraints = constraints or DEFAULT_CONSTRAINTS
    from tpuplane.infra.pathways.sidecar_check import check_sidecar  # here: other commands skip its parser

    try:
        client, source = image_jax_version(jax_version, pinned_jax(constraints))
        python_version, unknown_image = python_for(client, source, base_tags)
        result = check_sidecar(
            requirements,
            constraints,
            python_version=python_version,
            jax_version=client,
            jax_source=source,
        )
    except ConfigError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except ValueError:  # InvalidVersion, or a release part too long to read as a number
        typer.echo(f"error: {source}: got {client[:40]!r}; allowed: a JAX release version such as 0.10.0", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    if source == DEFAULT_SOURCE:
        typer.echo(f"note: jax is not installed here; checking for the JAX {client} image (pass --jax-version)",
                   err=True)
    installed = installed_jax()
    if source == PIN_SOURCE and installed and Version(installed) != Version(client):
        typer.echo(f"note: the image runs jax {client} (pinned in {constraints}) but jax {installed} is installed "
                   "here; a client must run the image's jax (check one with --jax-version)", err=True)
    if unknown_image:
        typer.echo(f"note: {unknown_image}", err=True)
    for notice in result.notices:
        typer.echo(f"note: {notice}", err=True)
    for conflict in result.conflicts:
        typer.echo(str(conflict))
    if not result.ok:
        raise typer.Exit(EXIT_CONFLICTS)
    skipped = f", {result.not_for_image} not for this image" if result.not_for_image else ""
    where = f"python {python_version}, linux/x86_64"
    typer.echo(f"ok: {result.checked} requirements fit the {result.pins} pins in {constraints} ({where}){skipped}")


@app.command()
def wheel(
    directory: Path = typer.Argument(
        DEFAULT_REQUIREMENTS.parent / WHEEL_FOLDER, help="Where to write it (default: where sidecar/Dockerfile "
                                                         "looks)."),
) -> None:
    """Write the wheel of tpuplane's sidecar runtime, for a sidecar image you build yourself; print its path.

    The pickles of RemoteIterator and on_each_host refer to these modules: a sidecar image without them cannot run
    those helpers. A stack's SidecarImage writes it into its build context by itself.
    """
    try:
        built = build_runtime_wheel(directory)
    except OSError as error:
        typer.echo(f"error: DIRECTORY: got {str(directory)!r}; allowed: a folder this user may write "
                   f"({error.strerror or error})", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    typer.echo(str(built))
