"""The TPU catalog: every name users type resolves to the slice xpk and GKE mean by it."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tpuplane.cli.catalog import catalog_command
from tpuplane.infra.fleet.catalog import (
    CATALOG_ROW_KEYS,
    GENERATIONS,
    TpuSpec,
    UnknownTpuType,
    all_tpu_names,
    allowed_machine_types,
    alternate_specs,
    catalog_rows,
    closest_tpu_names,
    distinct_specs,
    generate_topologies,
    resolve_pathways_instance_type,
    resolve_tpu_type,
)
from tpuplane.infra.errors import ConfigError

# --- resolution -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "topology", "machine_type", "vms", "chips_per_vm", "chips"),
    [
        ("v5litepod-8", "2x4", "ct5lp-hightpu-4t", 2, 4, 8),
        ("v5litepod-16", "4x4", "ct5lp-hightpu-4t", 4, 4, 16),
        ("v6e-1", "1x1", "ct6e-standard-1t", 1, 1, 1),
        ("v6e-4", "2x2", "ct6e-standard-4t", 1, 4, 4),
        ("v6e-8", "2x4", "ct6e-standard-4t", 2, 4, 8),
        ("v6e-16", "4x4", "ct6e-standard-4t", 4, 4, 16),
        ("v4-8", "2x2x1", "ct4p-hightpu-4t", 1, 4, 4),
        ("v5p-8", "2x2x1", "ct5p-hightpu-4t", 1, 4, 4),
        ("v5p-16", "2x2x2", "ct5p-hightpu-4t", 2, 4, 8),
        ("v5p-128", "4x4x4", "ct5p-hightpu-4t", 16, 4, 64),
        ("tpu7x-2", "1x1x1", "tpu7x-standard-1t", 1, 1, 1),
        ("tpu7x-8", "2x2x1", "tpu7x-standard-4t", 1, 4, 4),
        ("tpu7x-16", "2x2x2", "tpu7x-standard-4t", 2, 4, 8),
        ("tpu7x-128", "4x4x4", "tpu7x-standard-4t", 16, 4, 64),
    ],
)
def test_resolve_tpu_type_reference_examples(name, topology, machine_type, vms, chips_per_vm, chips):
    spec = resolve_tpu_type(name)
    assert (spec.name, spec.topology, spec.machine_type) == (name, topology, machine_type)
    assert (spec.vms_per_slice, spec.chips_per_vm, spec.chips) == (vms, chips_per_vm, chips)
    assert spec.multi_host == (vms > 1)


@pytest.mark.parametrize(
    ("name", "topology"),
    [
        ("v4-768", "4x4x24"),
        ("v5p-768", "4x8x12"),
        ("v4-1152", "4x4x36"),
        ("v5p-1152", "4x12x12"),
        ("v4-8192", "4x4x256"),
        ("v4-2048", "8x8x16"),
        ("v4-4096", "8x16x16"),
        ("v5p-16384", "4x8x256"),
        ("tpu7x-16384", "16x16x32"),
        ("tpu7x-18432", "16x24x24"),
        ("tpu7-512", "4x8x8"),
        ("tpu7x-512", "4x8x8"),
    ],
)
def test_resolve_tpu_type_alias_follows_xpk_tie_break(name, topology):
    assert resolve_tpu_type(name).topology == topology


def test_resolve_tpu_type_topology_that_lost_the_alias_keeps_its_topology_name():
    spec = resolve_tpu_type("tpu7x-4x4x16")
    assert (spec.name, spec.device_type, spec.vms_per_slice) == ("tpu7x-4x4x16", "tpu7x-512", 64)
    assert resolve_tpu_type("tpu7x-512").vms_per_slice == 64


@pytest.mark.parametrize(
    ("name", "accelerator", "pathways_instance_type"),
    [
        ("v4-8", "tpu-v4-podslice", "tpuv4:2x2x1"),
        ("v5litepod-16", "tpu-v5-lite-podslice", "tpuv5e:4x4"),
        ("v5p-8", "tpu-v5p-slice", "tpuv5:2x2x1"),
        ("v6e-4", "tpu-v6e-slice", "tpuv6e:2x2"),
        ("tpu7-16", "tpu7", "tpu7:2x2x2"),
        ("tpu7x-128", "tpu7x", "tpu7x:4x4x4"),
    ],
)
def test_resolve_tpu_type_accelerator_label_and_pathways_type(name, accelerator, pathways_instance_type):
    spec = resolve_tpu_type(name)
    assert (spec.accelerator, spec.pathways_instance_type) == (accelerator, pathways_instance_type)


@pytest.mark.parametrize(
    ("name", "needs_policy"),
    [
        ("tpu7x-2", False),
        ("tpu7x-8", False),
        ("tpu7x-16", True),
        ("tpu7-8", False),
        ("tpu7-16", True),
        ("v5p-16", False),
    ],
)
def test_resolve_tpu_type_workload_policy_only_for_multi_host_tpu7(name, needs_policy):
    assert resolve_tpu_type(name).needs_workload_policy is needs_policy


@pytest.mark.parametrize("spelling", ["V6E-16", " v6e-16 ", "v6e-4X4"])
def test_resolve_tpu_type_ignores_case_and_surrounding_space(spelling):
    assert resolve_tpu_type(spelling) == resolve_tpu_type("v6e-16")


@pytest.mark.parametrize("suffix", ["8", "2x4", "16", "4x4", "256", "16x16"])
def test_resolve_tpu_type_v5e_is_a_spelling_of_v5litepod(suffix):
    spec = resolve_tpu_type(f"v5e-{suffix}")
    assert spec == resolve_tpu_type(f"v5litepod-{suffix}")
    assert spec.name.startswith("v5litepod-") and spec.generation == "v5e"


def test_tpu_spec_fields_are_the_shared_interface():
    assert [f.name for f in dataclasses.fields(TpuSpec)] == [
        "name", "generation", "topology", "machine_type", "accelerator", "chips_per_vm",
        "vms_per_slice", "chips", "multi_host", "pathways_instance_type", "needs_workload_policy",
    ]  # fmt: skip


def test_tpu_spec_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolve_tpu_type("v6e-16").chips = 32  # type: ignore[misc]


def test_tpu_spec_tensorcores_count_two_per_chip_on_v5p():
    spec = resolve_tpu_type("v5p-128")
    assert (spec.chips, spec.tensorcores, spec.single_host) == (64, 128, False)


# --- host machine types --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "machine_type", "pathways_instance_type"),
    [("v6e-8", "ct6e-standard-8t", "tpuv6e1t:2x4"), ("v5e-8", "ct5lp-hightpu-8t", "tpuv5e1t:2x4")],
)
def test_resolve_tpu_type_8_chip_host_makes_2x4_single_host(name, machine_type, pathways_instance_type):
    spec = resolve_tpu_type(name, machine_type=machine_type)
    assert (spec.machine_type, spec.vms_per_slice, spec.chips_per_vm, spec.chips) == (machine_type, 1, 8, 8)
    assert spec.single_host and spec.topology == "2x4"
    assert spec.pathways_instance_type == pathways_instance_type


def test_resolve_tpu_type_default_machine_type_may_be_given_explicitly():
    assert resolve_tpu_type("v6e-8", machine_type="ct6e-standard-4t") == resolve_tpu_type("v6e-8")


@pytest.mark.parametrize(
    ("name", "machine_type"),
    [
        ("v6e-16", "ct6e-standard-8t"),
        ("v6e-8", "ct5lp-hightpu-8t"),
        ("v6e-4", "ct6e-standard-1t"),
        ("v5p-8", "n2-standard-8"),
    ],
)
def test_resolve_tpu_type_machine_type_that_does_not_fit_names_the_allowed_ones(name, machine_type):
    with pytest.raises(ConfigError) as caught:
        resolve_tpu_type(name, machine_type=machine_type)
    problem = caught.value.problems[0]
    assert (problem.path, problem.given) == ("machineType", machine_type)
    for allowed in allowed_machine_types(name):
        assert allowed in problem.allowed


def test_allowed_machine_types_lists_default_first():
    assert allowed_machine_types("v6e-8") == ["ct6e-standard-4t", "ct6e-standard-8t"]
    assert allowed_machine_types("v6e-16") == ["ct6e-standard-4t"]


# --- unknown names ---------------------------------------------------------------------------------------------


def test_resolve_tpu_type_unknown_name_suggests_closest_like_xpk():
    with pytest.raises(UnknownTpuType) as caught:
        resolve_tpu_type("v5p-9")
    assert caught.value.suggestions == ["v5p-896", "v5p-8", "v5p-9984", "v5p-9856", "v5p-9728"]
    assert "v5p-896, v5p-8, v5p-9984, v5p-9856, v5p-9728" in str(caught.value)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, ConfigError)


@pytest.mark.parametrize(
    "name", ["", "v6e", "v6e-4x4x4", "v5p-2x2", "v7-8", "v6e-3", "v5litepod-2", "v4-2x2x3", "tpu8-8"]
)
def test_resolve_tpu_type_malformed_or_missing_name_is_unknown_with_five_suggestions(name):
    with pytest.raises(UnknownTpuType) as caught:
        resolve_tpu_type(name)
    assert len(caught.value.suggestions) == 5
    assert all(suggestion in all_tpu_names() for suggestion in caught.value.suggestions)


def test_closest_tpu_names_returns_n_best():
    assert closest_tpu_names("v6e-15", n=2) == ["v6e-1", "v6e-16"]


# --- golden counts and topology rules --------------------------------------------------------------------------


def test_all_tpu_names_golden_key_counts_per_family():
    counts: dict[str, int] = {}
    for name in all_tpu_names():
        family = name.rsplit("-", 1)[0]
        counts[family] = counts.get(family, 0) + 1
    # xpk's counts, except v5e: GKE's single-host 1x1 and 2x2 add two shapes and their two aliases.
    assert counts == {"v4": 868, "v5litepod": 16, "v5e": 16, "v5p": 541, "v6e": 16, "tpu7": 19, "tpu7x": 564}


def test_all_tpu_names_are_unique_and_grouped_by_generation():
    names = all_tpu_names()
    assert len(names) == len(set(names))
    order = [resolve_tpu_type(name).generation for name in names]
    assert order == sorted(order, key=[g.generation for g in GENERATIONS].index)


def test_all_tpu_names_ascend_in_chips_within_a_generation():
    specs = [resolve_tpu_type(name) for name in all_tpu_names()]
    for generation in GENERATIONS:
        chips = [spec.chips for spec in specs if spec.generation == generation.generation]
        assert chips == sorted(chips)


@pytest.mark.parametrize(
    ("generation", "count", "largest_chips"),
    [("v4", 800, 4096), ("v5p", 414, 8960), ("tpu7", 10, 256), ("tpu7x", 433, 9216), ("v6e", 8, 256), ("v5e", 8, 256)],
)
def test_generate_topologies_count_and_largest_slice(generation, count, largest_chips):
    topologies = generate_topologies(next(g for g in GENERATIONS if g.generation == generation))
    assert len(topologies) == len(set(topologies)) == count
    assert max(math.prod(map(int, t.split("x"))) for t in topologies) == largest_chips


def test_generate_topologies_v4_takes_every_permutation_others_only_ascending():
    v4, v5p = (set(generate_topologies(g)) for g in GENERATIONS if g.generation in ("v4", "v5p"))
    assert {"4x8x4", "8x4x4", "4x4x8"} <= v4
    assert "4x4x8" in v5p and "8x4x4" not in v5p


def test_default_topologies_are_generated_shapes_of_their_generation():
    sizes = {g.generation: len(g.default_topologies) for g in GENERATIONS}
    assert (sizes["v4"], sizes["v5p"], sizes["tpu7"], sizes["tpu7x"]) == (11, 96, 9, 98)
    for generation in GENERATIONS:
        assert generation.default_topologies <= set(generate_topologies(generation))


def test_generate_topologies_match_each_generation_dims():
    for generation in GENERATIONS:
        assert {len(t.split("x")) for t in generate_topologies(generation)} == {generation.dims}


# --- Pathways ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance_type", "name", "machine_type"),
    [
        ("tpuv6e:2x2", "v6e-4", "ct6e-standard-4t"),
        ("tpuv5:2x2x1", "v5p-8", "ct5p-hightpu-4t"),
        ("tpuv5e:4x4", "v5litepod-16", "ct5lp-hightpu-4t"),
        ("tpuv5e1t:2x4", "v5litepod-8", "ct5lp-hightpu-8t"),
        ("tpuv6e1t:2x4", "v6e-8", "ct6e-standard-8t"),
        ("tpu7x:4x4x4", "tpu7x-128", "tpu7x-standard-4t"),
    ],
)
def test_resolve_pathways_instance_type_examples(instance_type, name, machine_type):
    spec = resolve_pathways_instance_type(instance_type)
    assert (spec.name, spec.machine_type) == (name, machine_type)


def test_resolve_pathways_instance_type_round_trips_every_slice():
    for spec in distinct_specs():
        for variant in (spec, *alternate_specs(spec)):
            assert resolve_pathways_instance_type(variant.pathways_instance_type) == variant


def test_resolve_pathways_instance_type_unknown_suggests_closest():
    with pytest.raises(UnknownTpuType) as caught:
        resolve_pathways_instance_type("tpuv6e:3x3")
    assert caught.value.problems[0].path == "pathwaysInstanceType"
    assert len(caught.value.suggestions) == 5 and all(s.startswith("tpuv6e") for s in caught.value.suggestions)


# --- rows and the property every name satisfies ---------------------------------------------------------------


def test_catalog_rows_one_row_per_accepted_name_with_exact_keys():
    rows = catalog_rows()
    assert [row["name"] for row in rows] == all_tpu_names()
    assert all(tuple(row) == CATALOG_ROW_KEYS for row in rows)
    by_name = {row["name"]: row for row in rows}
    assert by_name["v6e-4x4"] == {**by_name["v6e-16"], "name": "v6e-4x4"}


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(all_tpu_names()))
def test_every_name_resolves_to_a_consistent_slice(name):
    spec = resolve_tpu_type(name)
    assert spec.chips == spec.vms_per_slice * spec.chips_per_vm == math.prod(map(int, spec.topology.split("x")))
    assert resolve_tpu_type(spec.name) == spec
    assert spec.multi_host == (spec.vms_per_slice > 1)
    assert spec.needs_workload_policy == (spec.generation in ("tpu7", "tpu7x") and spec.multi_host)
    assert spec.chips_per_vm == (1 if spec.chips == 1 else 4)
    assert spec.pathways_instance_type.endswith(f":{spec.topology}")


# --- CLI -----------------------------------------------------------------------------------------------------


@pytest.fixture
def invoke():
    """Run `catalog` as the lead registers it: a sub-command of a Typer app with more than one command."""
    app = typer.Typer()
    app.command("catalog")(catalog_command)
    app.command("version")(lambda: None)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["catalog", *args])


def test_catalog_command_json_has_every_accepted_name(invoke):
    result = invoke("--json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert [row["name"] for row in rows] == all_tpu_names()
    assert all(tuple(row) == CATALOG_ROW_KEYS for row in rows)


def test_catalog_command_json_for_one_name(invoke):
    result = invoke("v5p-2x2x2", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "name": "v5p-2x2x2", "generation": "v5p", "topology": "2x2x2", "machine_type": "ct5p-hightpu-4t",
        "accelerator": "tpu-v5p-slice", "chips_per_vm": 4, "vms_per_slice": 2, "chips": 8, "multi_host": True,
        "pathways_instance_type": "tpuv5:2x2x2",
    }  # fmt: skip


def test_catalog_command_unknown_name_exits_2_with_suggestions_on_stderr(invoke):
    result = invoke("v5p-9")
    assert result.exit_code == 2
    assert "v5p-896, v5p-8, v5p-9984" in result.stderr
    assert result.stdout == ""


def test_catalog_command_table_shows_every_generation(invoke):
    result = invoke()
    assert result.exit_code == 0
    for text in ("v4-8 ", "v5litepod-256", "v5p-17920", "v6e-256", "tpu7-512", "tpu7x-18432", "ct6e-standard-8t"):
        assert text in result.stdout


def test_catalog_command_generation_lists_all_its_names(invoke):
    result = invoke("v5e", "--json")
    assert result.exit_code == 0
    names = [row["name"] for row in json.loads(result.stdout)]
    assert len(names) == 32 and "v5e-4x4" in names and "v5litepod-16" in names


def test_catalog_command_one_name_shows_the_other_host(invoke):
    result = invoke("v6e-8")
    assert result.exit_code == 0
    assert "ct6e-standard-4t" in result.stdout and "ct6e-standard-8t" in result.stdout
    assert "tpuv6e1t:2x4" in result.stdout


@pytest.mark.parametrize(("name", "machine_type", "topology"), [
    ("v5litepod-1", "ct5lp-hightpu-1t", "1x1"), ("v5e-4", "ct5lp-hightpu-4t", "2x2")])
def test_resolve_tpu_type_knows_gkes_single_host_v5e(name, machine_type, topology):
    spec = resolve_tpu_type(name)
    assert (spec.machine_type, spec.topology, spec.vms_per_slice, spec.multi_host) == (machine_type, topology, 1, False)
