"""The TPU catalog: every slice GKE offers, under every name users type.

The catalog is data. `GENERATIONS` holds one row of facts per TPU generation; `_build_catalog` turns those
rows into a name index once (lazily, cached), so resolving a name is a dictionary look-up.

Naming follows xpk and Cloud TPU, so a name copied from either tool means the same slice here:
- `<prefix>-<topology>` for every valid topology (`v6e-4x4`, `v5p-2x2x2`);
- `<prefix>-<N>`, where N counts TensorCores (v4, v5p, tpu7, tpu7x: 2 per chip) or chips (v5e, v6e: 1 per chip).
  When several topologies share N, xpk's tie-break applies: the first topology generated wins, unless a topology
  in the generation's `default_topologies` overrides it (among those, the last one generated wins).
- v5e answers to two spellings: xpk's `v5litepod-*` (canonical, as in Cloud TPU accelerator types) and `v5e-*`.
  Every `v5litepod-X` key has a `v5e-X` twin that resolves to the same spec, whose `name` stays `v5litepod-X`.

A spec's `name` is its device type (`v6e-16`) when that alias names this very shape, else `<prefix>-<topology>`
(`v4-4x8x12`, since `v4-768` is 4x4x24), so `resolve_tpu_type(spec.name)` always gives the spec back.
`spec.device_type` keeps xpk's `<prefix>-<TensorCores>` for xpk-compatible resource names.

A slice's default host follows xpk: one chip per VM for a single chip, otherwise four. The 8-chip single-host
machines GKE documents for 2x4 (`ct5lp-hightpu-8t`, `ct6e-standard-8t`) are chosen with `machine_type=`.
"""

from __future__ import annotations

import difflib
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from tpuplane.infra.errors import ConfigError, Problem

# xpk's default host: a slice of one chip runs on a 1-chip VM, anything larger on 4-chip VMs.
_SINGLE_CHIP_HOST = 1
_MULTI_CHIP_HOST = 4


@dataclass(frozen=True)
class Generation:
    """The facts about one TPU generation that every name of that generation derives from."""

    generation: str  # our name for it: "v4" | "v5e" | "v5p" | "v6e" | "tpu7" | "tpu7x"
    spellings: tuple[str, ...]  # name prefixes users type; the first is canonical (xpk's prefix)
    tensorcores_per_chip: int  # the N in `<prefix>-<N>` counts TensorCores
    accelerator: str  # node label cloud.google.com/gke-tpu-accelerator
    machine_types: Mapping[int, str]  # chips per VM -> GCE machine type
    dims: int  # 2 for AxB, 3 for AxBxC
    listed_topologies: tuple[str, ...]  # written out, generated first
    max_cubes: int = 0  # > 0: also generate 4x4x4-cube shapes up to this many cubes
    all_permutations: bool = False  # v4 generates every ordering of A, B, C; others only A <= B <= C
    default_topologies: frozenset[str] = frozenset()  # win the `<prefix>-<N>` alias on ties
    pathways_prefix: str = ""  # Pathways instance type is `<prefix>:<topology>`
    pathways_host_prefixes: Mapping[int, str] = field(default_factory=dict)  # chips per VM -> prefix override
    workload_policy: bool = False  # multi-host slices need a workload-policy ResourcePolicy, not COMPACT

    @property
    def prefix(self) -> str:
        return self.spellings[0]


# v5p's 96 named shapes; tpu7x keeps them and adds its two largest.
_V5P_DEFAULTS = frozenset(
    "2x2x1 2x2x2 2x2x4 2x4x4 4x4x4 4x4x8 4x4x12 4x8x8 4x4x20 4x8x12 4x4x28 8x8x8 4x12x12 4x8x20 4x4x44 8x8x12 "
    "4x4x52 4x8x28 4x12x20 8x8x16 4x4x68 8x12x12 4x4x76 8x8x20 4x12x28 4x8x44 4x4x92 8x12x16 4x20x20 4x8x52 "
    "12x12x12 8x8x28 4x4x116 8x12x20 4x4x124 8x16x16 4x12x44 4x8x68 4x20x28 12x12x16 4x4x148 4x8x76 4x12x52 "
    "8x16x20 4x4x164 8x12x28 4x4x172 8x8x44 12x12x20 4x8x92 4x4x188 12x16x16 4x28x28 8x20x20 4x12x68 8x8x52 "
    "4x4x212 12x12x24 4x20x44 8x16x28 4x12x76 4x8x116 4x4x236 12x16x20 4x4x244 4x8x124 12x12x28 16x16x16 "
    "4x20x52 8x12x44 8x8x68 4x12x92 8x20x28 12x16x24 4x8x148 12x20x20 8x8x76 4x28x44 8x12x52 16x16x20 "
    "12x12x36 4x8x164 12x16x28 4x20x68 4x8x172 4x12x116 8x16x44 12x20x24 4x28x52 8x8x92 4x12x124 4x8x188 "
    "4x20x76 16x16x24 12x24x24 16x20x28".split()
)
_SMALL_3D = ("2x2x1", "2x2x2", "2x2x4", "2x4x4")  # the sub-cube shapes every 3-D generation offers
_2D_SLICES = ("2x4", "4x4", "4x8", "8x8", "8x16", "16x16")

GENERATIONS: tuple[Generation, ...] = (
    Generation(
        generation="v4",
        spellings=("v4",),
        tensorcores_per_chip=2,
        accelerator="tpu-v4-podslice",
        machine_types=MappingProxyType({4: "ct4p-hightpu-4t"}),
        dims=3,
        listed_topologies=_SMALL_3D,
        max_cubes=64,
        all_permutations=True,
        default_topologies=frozenset(_SMALL_3D + ("4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x12", "8x8x16", "8x16x16")),
        pathways_prefix="tpuv4",
    ),
    Generation(
        generation="v5e",
        spellings=("v5litepod", "v5e"),
        tensorcores_per_chip=1,
        accelerator="tpu-v5-lite-podslice",
        machine_types=MappingProxyType({1: "ct5lp-hightpu-1t", 4: "ct5lp-hightpu-4t", 8: "ct5lp-hightpu-8t"}),
        dims=2,
        # GKE offers the single-host 1x1 and 2x2 shapes that xpk's catalog lacks (v5litepod-1, v5litepod-4).
        listed_topologies=("1x1", "2x2") + _2D_SLICES,
        pathways_prefix="tpuv5e",
        pathways_host_prefixes=MappingProxyType({8: "tpuv5e1t"}),
    ),
    Generation(
        generation="v5p",
        spellings=("v5p",),
        tensorcores_per_chip=2,
        accelerator="tpu-v5p-slice",
        machine_types=MappingProxyType({4: "ct5p-hightpu-4t"}),
        dims=3,
        listed_topologies=_SMALL_3D,
        max_cubes=140,
        default_topologies=_V5P_DEFAULTS,
        pathways_prefix="tpuv5",
    ),
    Generation(
        generation="v6e",
        spellings=("v6e",),
        tensorcores_per_chip=1,
        accelerator="tpu-v6e-slice",
        machine_types=MappingProxyType({1: "ct6e-standard-1t", 4: "ct6e-standard-4t", 8: "ct6e-standard-8t"}),
        dims=2,
        listed_topologies=("1x1", "2x2") + _2D_SLICES,
        pathways_prefix="tpuv6e",
        pathways_host_prefixes=MappingProxyType({8: "tpuv6e1t"}),
    ),
    Generation(
        generation="tpu7",
        spellings=("tpu7",),
        tensorcores_per_chip=2,
        accelerator="tpu7",
        machine_types=MappingProxyType({1: "tpu7-standard-1t", 4: "tpu7-standard-4t"}),
        dims=3,
        listed_topologies=("1x1x1",) + _SMALL_3D,
        max_cubes=4,
        # Every generated shape is a default, so on a tie the last generated wins: tpu7-512 is 4x8x8.
        default_topologies=frozenset(_SMALL_3D + ("4x4x4", "4x4x8", "4x4x12", "4x4x16", "4x8x8")),
        pathways_prefix="tpu7",
        workload_policy=True,
    ),
    Generation(
        generation="tpu7x",
        spellings=("tpu7x",),
        tensorcores_per_chip=2,
        accelerator="tpu7x",
        machine_types=MappingProxyType({1: "tpu7x-standard-1t", 4: "tpu7x-standard-4t"}),
        dims=3,
        listed_topologies=("1x1x1",) + _SMALL_3D,
        max_cubes=144,
        default_topologies=_V5P_DEFAULTS | {"16x16x32", "16x24x24"},
        pathways_prefix="tpu7x",
        workload_policy=True,
    ),
)


@dataclass(frozen=True)
class TpuSpec:
    """One TPU slice shape on one host machine type: everything a node pool, a JobSet and Pathways need."""

    name: str  # canonical name: the device type (`v6e-16`) when it names this shape, else `<prefix>-<topology>`
    generation: str
    topology: str
    machine_type: str
    accelerator: str
    chips_per_vm: int
    vms_per_slice: int
    chips: int
    multi_host: bool
    pathways_instance_type: str
    needs_workload_policy: bool

    @property
    def single_host(self) -> bool:
        return not self.multi_host

    @property
    def tensorcores(self) -> int:
        return self.chips * _GENERATION_BY_NAME[self.generation].tensorcores_per_chip

    @property
    def device_type(self) -> str:
        """xpk's device type `<prefix>-<TensorCores>`, used in xpk-compatible resource names."""
        return f"{_GENERATION_BY_NAME[self.generation].prefix}-{self.tensorcores}"


_GENERATION_BY_NAME: Mapping[str, Generation] = MappingProxyType({g.generation: g for g in GENERATIONS})

# What a valid name looks like, per generation: `v6e-<N|AxB>`, `v5p-<N|AxBxC>`, ... and what N counts.
ACCEPTED_FORMS = (
    ", ".join(f"{'/'.join(g.spellings)}-<N|{'x'.join('ABC'[: g.dims])}>" for g in GENERATIONS)
    + " (N counts TensorCores: "
    + "; ".join(
        f"{per_chip} per chip on {', '.join(g.generation for g in GENERATIONS if g.tensorcores_per_chip == per_chip)}"
        for per_chip in sorted({g.tensorcores_per_chip for g in GENERATIONS}, reverse=True)
    )
    + ")"
)


class UnknownTpuType(ConfigError):
    """A TPU name that is not in the catalog. Carries the closest valid names so the user can fix a typo."""

    def __init__(self, given: str, suggestions: list[str], *, path: str = "tpuType", forms: str = ACCEPTED_FORMS):
        self.given = given
        self.suggestions = suggestions
        hint = f"closest matches: {', '.join(suggestions)}" if suggestions else "run `tpuplane catalog` to list them"
        super().__init__(Problem(path, given, forms, hint))


def generate_topologies(generation: Generation) -> list[str]:
    """Every topology of a generation, in xpk's generation order (which decides alias ties).

    Cube shapes are AxBxC with A, B, C multiples of 4 up to 256 and (A/4)(B/4)(C/4) <= max_cubes, looped
    x outermost, each dimension ascending; only A <= B <= C unless the generation takes all permutations.
    """
    topologies = list(generation.listed_topologies)
    if not generation.max_cubes:
        return topologies
    # Counted in cubes (side / 4, from 1 to 64); each loop stops once even its smallest remaining shape is too big.
    limit, most = generation.max_cubes, 64
    for x in range(1, most + 1):
        for y in range(1 if generation.all_permutations else x, most + 1):
            if x * y > limit:
                break
            for z in range(1 if generation.all_permutations else y, most + 1):
                if x * y * z > limit:
                    break
                topologies.append(f"{4 * x}x{4 * y}x{4 * z}")
    return topologies


def _chip_count(topology: str) -> int:
    return math.prod(int(side) for side in topology.split("x"))


def _default_chips_per_vm(chips: int) -> int:
    return _SINGLE_CHIP_HOST if chips == 1 else _MULTI_CHIP_HOST


def _allowed_chips_per_vm(generation: Generation, chips: int) -> list[int]:
    """The default host, plus any machine that holds the whole slice on one VM (the 8t hosts for 2x4)."""
    default = _default_chips_per_vm(chips)
    extra = [per_vm for per_vm in generation.machine_types if per_vm == chips and per_vm != default]
    return [default, *extra]


def _make_spec(generation: Generation, name: str, topology: str, chips_per_vm: int) -> TpuSpec:
    chips = _chip_count(topology)
    vms = chips // chips_per_vm
    pathways_prefix = generation.pathways_host_prefixes.get(chips_per_vm, generation.pathways_prefix)
    return TpuSpec(
        name=name,
        generation=generation.generation,
        topology=topology,
        machine_type=generation.machine_types[chips_per_vm],
        accelerator=generation.accelerator,
        chips_per_vm=chips_per_vm,
        vms_per_slice=vms,
        chips=chips,
        multi_host=vms > 1,
        pathways_instance_type=f"{pathways_prefix}:{topology}",
        needs_workload_policy=generation.workload_policy and vms > 1,
    )


class _Catalog(NamedTuple):
    by_name: dict[str, TpuSpec]  # every accepted name (lower case) -> default spec
    names: list[str]  # every accepted name, in display order
    by_pathways: dict[str, TpuSpec]  # Pathways instance type -> spec, alternate hosts included
    alternates: dict[tuple[str, str], TpuSpec]  # (canonical name, machine type) -> spec on a non-default host


def _generation_entries(generation: Generation) -> list[tuple[TpuSpec, list[str]]]:
    """(default spec, its accepted names) per topology, ordered by chip count, then generation order."""
    chips_of = {topology: _chip_count(topology) for topology in generate_topologies(generation)}
    alias_owner: dict[int, str] = {}  # TensorCores -> the topology that `<prefix>-<N>` names
    for topology, chips in chips_of.items():
        tensorcores = chips * generation.tensorcores_per_chip
        if tensorcores not in alias_owner or topology in generation.default_topologies:
            alias_owner[tensorcores] = topology

    entries = []
    for topology in sorted(chips_of, key=chips_of.__getitem__):  # stable: generation order within a count
        tensorcores = chips_of[topology] * generation.tensorcores_per_chip
        suffixes = [str(tensorcores)] if alias_owner[tensorcores] == topology else []
        suffixes.append(topology)
        name = f"{generation.prefix}-{suffixes[0]}"
        spec = _make_spec(generation, name, topology, _default_chips_per_vm(chips_of[topology]))
        entries.append((spec, [f"{spelling}-{suffix}" for spelling in generation.spellings for suffix in suffixes]))
    return entries


@functools.cache
def _build_catalog() -> _Catalog:
    catalog = _Catalog({}, [], {}, {})
    for generation in GENERATIONS:
        for spec, names in _generation_entries(generation):
            catalog.names.extend(names)
            catalog.by_name.update(dict.fromkeys(names, spec))
            catalog.by_pathways[spec.pathways_instance_type] = spec
            for per_vm in _allowed_chips_per_vm(generation, spec.chips)[1:]:
                alternate = _make_spec(generation, spec.name, spec.topology, per_vm)
                catalog.alternates[spec.name, alternate.machine_type] = alternate
                catalog.by_pathways[alternate.pathways_instance_type] = alternate
    return catalog


def _normalize(name: str) -> str:
    return name.strip().lower()


def closest_tpu_names(name: str, n: int = 5) -> list[str]:
    """The n accepted names most similar to `name` (difflib ratio), best first."""
    return difflib.get_close_matches(_normalize(name), _build_catalog().names, n=n, cutoff=0.0)


def all_tpu_names() -> list[str]:
    """Every accepted name, aliases included: by generation, then chip count, device type before topology."""
    return list(_build_catalog().names)


def allowed_machine_types(name: str) -> list[str]:
    """The host machine types a slice can run on, default first (`v6e-8`: ct6e-standard-4t, ct6e-standard-8t)."""
    spec = resolve_tpu_type(name)
    generation = _GENERATION_BY_NAME[spec.generation]
    return [generation.machine_types[per_vm] for per_vm in _allowed_chips_per_vm(generation, spec.chips)]


def resolve_tpu_type(name: str, *, machine_type: str | None = None) -> TpuSpec:
    """The slice a user's TPU name means, on its default host or on `machine_type` if that host fits it."""
    catalog = _build_catalog()
    spec = catalog.by_name.get(_normalize(name))
    if spec is None:
        raise UnknownTpuType(name, closest_tpu_names(name))
    if machine_type is None or _normalize(machine_type) == spec.machine_type:
        return spec
    alternate = catalog.alternates.get((spec.name, _normalize(machine_type)))
    if alternate is None:
        allowed = allowed_machine_types(spec.name)
        raise ConfigError.at(
            "machineType",
            machine_type,
            f"{' or '.join(allowed)} for {name} ({spec.topology})",
            "8-chip hosts (ct5lp-hightpu-8t, ct6e-standard-8t) fit only a 2x4 slice; leave machineType unset "
            "for the default host",
        )
    return alternate


def resolve_pathways_instance_type(instance_type: str) -> TpuSpec:
    """The slice a Pathways instance type names: `tpuv6e:2x2`, `tpuv5:2x2x1` (v5p), `tpuv6e1t:2x4` (8-chip host)."""
    by_pathways = _build_catalog().by_pathways
    spec = by_pathways.get(_normalize(instance_type))
    if spec is None:
        forms = "<pathways prefix>:<topology>, prefix one of " + ", ".join(
            sorted({key.split(":")[0] for key in by_pathways})
        )
        suggestions = difflib.get_close_matches(_normalize(instance_type), list(by_pathways), n=5, cutoff=0.0)
        raise UnknownTpuType(instance_type, suggestions, path="pathwaysInstanceType", forms=forms)
    return spec


CATALOG_ROW_KEYS = (
    "name",
    "generation",
    "topology",
    "machine_type",
    "accelerator",
    "chips_per_vm",
    "vms_per_slice",
    "chips",
    "multi_host",
    "pathways_instance_type",
)


def catalog_row(name: str) -> dict[str, object]:
    """One accepted name and the slice it resolves to, as plain JSON-ready values (`name` is the name given)."""
    spec = resolve_tpu_type(name)
    row = {key: getattr(spec, key) for key in CATALOG_ROW_KEYS}
    row["name"] = _normalize(name)
    return row


def catalog_rows() -> list[dict[str, object]]:
    """A row for every accepted name, aliases included, in `all_tpu_names()` order."""
    return [catalog_row(name) for name in _build_catalog().names]


def distinct_specs(generation: str | None = None) -> list[TpuSpec]:
    """Each default slice once (topology spellings and aliases folded), optionally for one generation."""
    seen: dict[str, TpuSpec] = {}
    for spec in _build_catalog().by_name.values():
        if generation is None or spec.generation == generation:
            seen.setdefault(spec.name, spec)
    return list(seen.values())


def alternate_specs(spec: TpuSpec) -> list[TpuSpec]:
    """The same slice on its non-default hosts (v5e/v6e 2x4 on one 8-chip VM)."""
    return [alt for (name, _), alt in _build_catalog().alternates.items() if name == spec.name]


def machine_type_generation(machine_type: str) -> tuple[str, int] | None:
    """(generation, chips per VM) of a TPU machine type such as `ct6e-standard-4t`; None for other machines."""
    for generation in GENERATIONS:
        for chips_per_vm, name in generation.machine_types.items():
            if name == machine_type:
                return generation.generation, chips_per_vm
    return None


def find_generation(word: str) -> Generation | None:
    """The generation a bare prefix names (`v6e`, `v5litepod`, `v5e`), or None."""
    word = _normalize(word)
    return next((g for g in GENERATIONS if word == g.generation or word in g.spellings), None)


__all__ = [
    "ACCEPTED_FORMS",
    "CATALOG_ROW_KEYS",
    "GENERATIONS",
    "Generation",
    "TpuSpec",
    "UnknownTpuType",
    "all_tpu_names",
    "allowed_machine_types",
    "alternate_specs",
    "catalog_row",
    "catalog_rows",
    "closest_tpu_names",
    "distinct_specs",
    "find_generation",
    "generate_topologies",
    "resolve_pathways_instance_type",
    "resolve_tpu_type",
]
