"""`tpuplane catalog [NAME] [--json]`: what each TPU name means before anything is created.

Without NAME: one table per generation, one row per named slice size (`<prefix>-<N>`).
NAME a generation (`v6e`, `v5e`, `v5litepod`): every shape of it, including those only reachable by topology.
NAME a TPU type (`v6e-16`, `v5p-2x2x2`): that slice, and any other host it can run on.
`--json` prints plain JSON (no rich wrapping) with one object per accepted name, so scripts can rely on it.
"""

from __future__ import annotations

import json
from typing import Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from tpuplane.infra.fleet.catalog import (
    GENERATIONS,
    Generation,
    TpuSpec,
    UnknownTpuType,
    all_tpu_names,
    alternate_specs,
    catalog_row,
    distinct_specs,
    find_generation,
    resolve_tpu_type,
)

from tpuplane.cli import EXIT_BAD_INPUT


def _print_json(value: object) -> None:
    print(json.dumps(value, indent=2))


def _names_of(generation: Generation) -> list[str]:
    prefixes = tuple(f"{spelling}-" for spelling in generation.spellings)
    return [name for name in all_tpu_names() if name.startswith(prefixes)]


def _slice_kind(spec: TpuSpec) -> str:
    if spec.single_host:
        return "single"
    return "multi, WP" if spec.needs_workload_policy else "multi"


def _spec_table(title: str, specs: list[TpuSpec], caption: str = "") -> Table:
    """Fits 80 columns: hosts is `VMs x chips per VM`; the Pathways type and label are in `catalog NAME`/`--json`."""
    table = Table(
        title=title,
        caption=caption or None,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        title_justify="left",
        caption_justify="left",
    )
    for header in ("name", "topology", "chips", "hosts", "machine type", "slice"):
        table.add_column(header, justify="right" if header == "chips" else "left", no_wrap=True)
    for spec in specs:
        for variant in (spec, *alternate_specs(spec)):
            table.add_row(
                variant.name,
                variant.topology,
                str(variant.chips),
                f"{variant.vms_per_slice} x {variant.chips_per_vm}",
                variant.machine_type,
                _slice_kind(variant),
            )
    return table


def _legend(generation: Generation) -> str:
    return " WP: needs a workload-policy ResourcePolicy." if generation.workload_policy else ""


def _summary_tables(console: Console) -> None:
    for generation in GENERATIONS:
        specs = distinct_specs(generation.generation)
        named = [spec for spec in specs if spec.name == spec.device_type]
        spellings = " / ".join(f"{spelling}-*" for spelling in generation.spellings)
        caption = (
            f"{len(specs)} shapes in all, each also named {generation.prefix}-<topology>; "
            f"`tpuplane catalog {generation.generation}` lists them." + _legend(generation)
        )
        console.print(_spec_table(f"{generation.generation} ({spellings}, {generation.accelerator})", named, caption))


def _describe(console: Console, name: str, spec: TpuSpec) -> None:
    table = Table(title=name, show_header=False, title_justify="left")
    table.add_column("field")
    table.add_column("value")
    for key, value in catalog_row(name).items():
        table.add_row(key, str(value))
    table.add_row("needs_workload_policy", str(spec.needs_workload_policy))
    for alternate in alternate_specs(spec):
        table.add_row(
            "also on",
            f"{alternate.machine_type}: {alternate.vms_per_slice} x {alternate.chips_per_vm} chips, "
            f"{_slice_kind(alternate)}-host, {alternate.pathways_instance_type}",
        )
    console.print(table)


def catalog_command(
    name: Optional[str] = typer.Argument(None, help="A TPU type (v6e-16, v5p-2x2x2) or a generation (v6e)."),
    json_: bool = typer.Option(False, "--json", help="Print JSON: one object per accepted name."),
) -> None:
    """List the TPU slices tpuplane knows, or show what one name resolves to."""
    generation = find_generation(name) if name else None
    if name is None or generation is not None:
        if json_:
            names = all_tpu_names() if generation is None else _names_of(generation)
            _print_json([catalog_row(each) for each in names])
        elif generation is None:
            _summary_tables(Console())
        else:
            specs = distinct_specs(generation.generation)
            title = f"{generation.generation}: {len(specs)} shapes"
            Console().print(_spec_table(title, specs, _legend(generation).strip()))
        return

    try:
        spec = resolve_tpu_type(name)
    except UnknownTpuType as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    if json_:
        _print_json(catalog_row(name))
    else:
        _describe(Console(), name, spec)
