"""`tpuplane diff`: what a PR changes, property by property, and what it does to TPU capacity."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import typer
from plan_factory import (
    NODE_POOL,
    cluster,
    cpu_pool,
    diff_docs,
    node_pool,
    patch,
    plan,
    reservation,
)
from typer.testing import CliRunner

from tpuplane.cli.diff import diff_command
from tpuplane.infra.fleet.catalog import machine_type_generation
from tpuplane.infra.review.cost import load_prices
from tpuplane.infra.review.diff_report import render
from tpuplane.infra.review.report_format import DIFF_FORMATS
from tpuplane.infra.review.impact import diff_context
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.review.plan import parse_plan, tpu_pool
from tpuplane.infra.review.plan_diff import Action, PlanDiff, TpuImpact


def change_of(diff: PlanDiff, name: str):
    return next(c for c in diff.changes if c.name == name)


def paths_of(diff: PlanDiff, name: str) -> list[str]:
    return [p.path for p in change_of(diff, name).properties]


def impact(diff: PlanDiff, generation: str) -> TpuImpact:
    return next(i for i in diff.tpu_impact if i.generation == generation)


# --- resources: added, removed, updated, replaced -----------------------------------------------------------


def test_diff_plans_identical_plans_have_no_changes():
    base = plan(cluster(), node_pool())
    diff = diff_docs(base, plan(cluster(), node_pool()))
    assert not diff.has_changes and diff.tpu_impact == ()


def test_diff_plans_resource_only_in_head_is_created():
    diff = diff_docs(plan(cluster()), plan(cluster(), node_pool("train-1")))
    assert [(c.name, c.action) for c in diff.changes] == [("train-1", Action.CREATE)]


def test_diff_plans_resource_only_in_base_is_deleted():
    diff = diff_docs(plan(cluster(), node_pool("train-1")), plan(cluster()))
    assert [(c.name, c.action) for c in diff.changes] == [("train-1", Action.DELETE)]


def test_diff_plans_label_change_is_an_in_place_update_at_its_nested_path():
    head = patch(node_pool(), {"nodeConfig": {"labels": {"team": "research"}}})
    diff = diff_docs(plan(node_pool()), plan(head))
    change = change_of(diff, "train-0")
    assert change.action is Action.UPDATE
    [prop] = change.properties
    assert (prop.path, prop.kind, prop.before, prop.after, prop.replaces) == (
        "nodeConfig.labels.team", "add", None, "research", "")


def test_diff_plans_label_keys_with_dots_are_quoted_in_the_path():
    head = patch(node_pool(), {"nodeConfig": {"labels": {"cloud.google.com/gke-tpu-topology": "4x8"}}})
    assert paths_of(diff_docs(plan(node_pool()), plan(head)), "train-0") == [
        'nodeConfig.labels["cloud.google.com/gke-tpu-topology"]']


def test_diff_plans_list_items_are_named_by_index():
    head = patch(node_pool(), {"nodeLocations": ["us-east5-a"]})
    diff = diff_docs(plan(node_pool()), plan(head))
    [prop] = change_of(diff, "train-0").properties
    assert (prop.path, prop.before, prop.after) == ("nodeLocations[0]", "us-east5-b", "us-east5-a")


def test_diff_plans_added_list_item_is_reported_leaf_by_leaf():
    extra = {"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NO_SCHEDULE"}
    base = node_pool()
    head = patch(base, {"nodeConfig": {"taints": [*base["inputs"]["nodeConfig"]["taints"], extra]}})
    assert paths_of(diff_docs(plan(base), plan(head)), "train-0") == [
        "nodeConfig.taints[1].effect", "nodeConfig.taints[1].key", "nodeConfig.taints[1].value"]


def test_diff_plans_null_input_equals_absent_input():
    head = patch(node_pool(), {"version": None})
    head["inputs"]["version"] = None
    assert not diff_docs(plan(node_pool()), plan(head)).has_changes


@pytest.mark.parametrize(("make", "changes", "path"), [
    (node_pool, {"nodeConfig": {"machineType": "ct6e-standard-8t"}}, "nodeConfig.machineType"),
    (node_pool, {"placementPolicy": {"tpuTopology": "4x8"}}, "placementPolicy.tpuTopology"),
    (node_pool, {"nodeConfig": {"spot": False}}, "nodeConfig.spot"),
    (node_pool, {"nodeConfig": {"flexStart": True}}, "nodeConfig.flexStart"),
    (node_pool, {"nodeConfig": {"reservationAffinity": {"consumeReservationType": "ANY_RESERVATION"}}},
     "nodeConfig.reservationAffinity.consumeReservationType"),
    (node_pool, {"nodeConfig": {"taints": [{"key": "google.com/tpu", "value": "yes", "effect": "NO_SCHEDULE"}]}},
     "nodeConfig.taints[0].value"),
    (node_pool, {"nodeLocations": ["us-east5-a"]}, "nodeLocations[0]"),
    (node_pool, {"initialNodeCount": 2}, "initialNodeCount"),
    (node_pool, {"queuedProvisioning": {"enabled": True}}, "queuedProvisioning.enabled"),
    (cluster, {"location": "us-central1"}, "location"),
    (cluster, {"network": "tpu-vpc"}, "network"),
    (cluster, {"subnetwork": "tpu-subnet"}, "subnetwork"),
    (cluster, {"ipAllocationPolicy": {"clusterIpv4CidrBlock": "10.224.0.0/12"}},
     "ipAllocationPolicy.clusterIpv4CidrBlock"),
    (cluster, {"privateClusterConfig": {"masterIpv4CidrBlock": "172.16.0.0/28"}},
     "privateClusterConfig.masterIpv4CidrBlock"),
    (reservation, {"specificReservation": {"instanceProperties": {"machineType": "ct5p-hightpu-4t"}}},
     "specificReservation.instanceProperties.machineType"),
])
def test_diff_plans_replacing_field_marks_the_resource_replaced(make, changes, path):
    base = make()
    change = change_of(diff_docs(plan(base), plan(patch(base, changes))), base["name"])
    assert change.action is Action.REPLACE
    assert [(p.path, bool(p.replaces)) for p in change.properties] == [(path, True)]


@pytest.mark.parametrize(("make", "changes"), [
    (node_pool, {"nodeCount": 8}),
    (node_pool, {"nodeConfig": {"labels": {"team": "a"}}}),
    (node_pool, {"management": {"autoRepair": False}}),
    (node_pool, {"autoscaling": {"maxNodeCount": 4}}),
    (cluster, {"resourceLabels": {"team": "a"}}),
    (cluster, {"deletionProtection": False}),
    (reservation, {"specificReservation": {"count": 12}}),
])
def test_diff_plans_in_place_field_is_an_update(make, changes):
    base = make()
    change = change_of(diff_docs(plan(base), plan(patch(base, changes))), base["name"])
    assert change.action is Action.UPDATE and not any(p.replaces for p in change.properties)


def test_diff_plans_replacement_names_its_reason():
    base = node_pool()
    head = patch(base, {"nodeConfig": {"spot": False}})
    [prop] = change_of(diff_docs(plan(base), plan(head)), "train-0").properties
    assert "ForceNew" in prop.replaces


def test_diff_plans_sorts_changes_by_urn():
    base = plan(node_pool("b"), node_pool("a"))
    head = plan(patch(node_pool("b"), {"nodeCount": 5}), patch(node_pool("a"), {"nodeCount": 5}), node_pool("c"))
    diff = diff_docs(base, head)
    assert [c.urn for c in diff.changes] == sorted(c.urn for c in diff.changes)


# --- TPU impact ----------------------------------------------------------------------------------------------


def test_tpu_impact_resize_4_to_8_adds_chips_without_new_slices():
    diff = diff_docs(plan(node_pool(node_count=4)), plan(node_pool(node_count=8)))
    assert diff.tpu_impact == (TpuImpact("v6e", chips_added=16),)


def test_tpu_impact_resize_8_to_6_removes_chips():
    diff = diff_docs(plan(node_pool(node_count=8)), plan(node_pool(node_count=6)))
    assert diff.tpu_impact == (TpuImpact("v6e", chips_removed=8),)


def test_tpu_impact_machine_type_change_recreates_the_slice():
    base = node_pool(machine_type="ct6e-standard-4t", node_count=2)
    head = patch(base, {"nodeConfig": {"machineType": "ct6e-standard-8t"}, "nodeCount": 1})
    assert diff_docs(plan(base), plan(head)).tpu_impact == (
        TpuImpact("v6e", slices_recreated=1, chips_recreated=8),)


def test_tpu_impact_generation_change_removes_one_generation_and_adds_another():
    base = node_pool(machine_type="ct6e-standard-4t", node_count=4)
    head = patch(base, {"nodeConfig": {"machineType": "ct5p-hightpu-4t"}, "nodeCount": 2})
    assert diff_docs(plan(base), plan(head)).tpu_impact == (
        TpuImpact("v5p", slices_added=1, chips_added=8), TpuImpact("v6e", slices_removed=1, chips_removed=16))


def test_tpu_impact_counts_added_and_removed_slices_per_generation():
    base = plan(node_pool("train-0"), node_pool("train-1"), node_pool("big-0", machine_type="ct5p-hightpu-4t"))
    head = plan(node_pool("train-0"), node_pool("train-2"), node_pool("train-3"))
    diff = diff_docs(base, head)
    assert diff.tpu_impact == (
        TpuImpact("v5p", slices_removed=1, chips_removed=16),
        TpuImpact("v6e", slices_added=2, slices_removed=1, chips_added=32, chips_removed=16),
    )


def test_tpu_impact_ignores_cpu_pools_and_other_resources():
    diff = diff_docs(plan(cpu_pool(), cluster()),
                           plan(patch(cpu_pool(), {"nodeCount": 3}), patch(cluster(), {"network": "x"})))
    assert diff.has_changes and diff.tpu_impact == ()


def test_tpu_pool_sizes_flex_start_pools_by_their_autoscaling_ceiling():
    inputs = patch(node_pool(), {"nodeCount": None, "autoscaling": {"minNodeCount": 0, "maxNodeCount": 4}})["inputs"]
    assert tpu_pool(inputs).chips == 16


@pytest.mark.parametrize(("machine_type", "expected"), [
    ("ct6e-standard-4t", ("v6e", 4)), ("ct6e-standard-8t", ("v6e", 8)), ("ct5lp-hightpu-8t", ("v5e", 8)),
    ("ct5p-hightpu-4t", ("v5p", 4)), ("ct4p-hightpu-4t", ("v4", 4)), ("tpu7x-standard-4t", ("tpu7x", 4)),
    ("n2-standard-64", None), ("a3-highgpu-8g", None),
])
def test_machine_type_generation_reads_the_catalog(machine_type, expected):
    assert machine_type_generation(machine_type) == expected


def test_tpu_pool_agrees_with_the_catalog_for_every_tpu_name():
    from tpuplane.infra.fleet import catalog

    for name in catalog.all_tpu_names():
        spec = catalog.resolve_tpu_type(name)
        pool = tpu_pool({"nodeConfig": {"machineType": spec.machine_type}, "nodeCount": spec.vms_per_slice})
        assert (pool.generation, pool.chips) == (spec.generation, spec.chips), name


# --- secrets -------------------------------------------------------------------------------------------------

SECRET = "hunter2-do-not-print"


@pytest.mark.parametrize("changes", [
    {"masterAuth": {"password": SECRET}},
    {"apiTokens": [SECRET]},
    {"notes": f"-----BEGIN RSA PRIVATE KEY-----{SECRET}"},
])
def test_diff_plans_redacts_secret_values_in_every_format(changes):
    base = cluster()
    diff = diff_docs(plan(base), plan(patch(base, changes)))
    assert [p.after for p in change_of(diff, "fleet").properties] == ["[secret]"]
    for fmt in DIFF_FORMATS:
        assert SECRET not in render(diff, fmt)


# --- rendering -----------------------------------------------------------------------------------------------


@pytest.fixture
def busy_diff() -> tuple[dict[str, Any], dict[str, Any]]:
    """Base and head plans with one create, update, replace and delete."""
    base = plan(cluster(), node_pool("train-0"), node_pool("train-1"), reservation())
    head = plan(patch(cluster(), {"resourceLabels": {"team": "ml"}}),
                patch(node_pool("train-0"), {"nodeConfig": {"machineType": "ct6e-standard-8t"}, "nodeCount": 2}),
                node_pool("train-2"), reservation())
    return base, head


def _shuffled(p: dict[str, Any], seed: int) -> dict[str, Any]:
    """The same plan with resources and dict keys in another order."""
    def reorder(value: Any) -> Any:
        if isinstance(value, dict):
            keys = list(value)
            random.Random(seed).shuffle(keys)
            return {k: reorder(value[k]) for k in keys}
        return [reorder(v) for v in value] if isinstance(value, list) else value

    out = reorder(p)
    random.Random(seed).shuffle(out["resources"])
    return out


@pytest.mark.parametrize("fmt", DIFF_FORMATS)
def test_render_is_byte_identical_for_reordered_plans(busy_diff, fmt):
    base, head = busy_diff
    first = render(diff_docs(base, head), fmt)
    assert all(render(diff_docs(_shuffled(base, s), _shuffled(head, s + 1)), fmt) == first for s in range(3))


def test_render_markdown_puts_the_summary_before_folded_details(busy_diff):
    text = render(diff_docs(*busy_diff), "markdown")
    assert "**4 changes: 1 to create, 1 to update, 1 to replace, 1 to delete.**" in text
    assert text.index("| TPU generation |") < text.index("| | Resource |") < text.index("<details>")
    assert "nodeConfig.machineType" in text.split("<details>", 1)[1]
    assert "> [!WARNING]" in text


def test_render_markdown_says_no_changes():
    text = render(diff_docs(plan(cluster()), plan(cluster())), "markdown")
    assert "No changes." in text and "<details>" not in text


def test_render_text_marks_replacing_properties(busy_diff):
    text = render(diff_docs(*busy_diff), "text")
    assert "+- NodePool train-0 (replace)" in text
    assert '~ nodeConfig.machineType: "ct6e-standard-4t" => "ct6e-standard-8t"  [forces replacement:' in text
    assert "v6e: slices +1 -1 recreated 1; chips +16 -16 recreated 16" in text


def test_render_json_lists_changes_and_tpu_impact(busy_diff):
    data = json.loads(render(diff_docs(*busy_diff), "json"))
    assert data["summary"] == {"create": 1, "update": 1, "replace": 1, "delete": 1}
    assert data["tpuImpact"] == [{"generation": "v6e", "slicesAdded": 1, "slicesRemoved": 1, "slicesRecreated": 1,
                                  "chipsAdded": 16, "chipsRemoved": 16, "chipsRecreated": 16}]
    replaced = next(c for c in data["changes"] if c["action"] == "replace")
    assert replaced["type"] == NODE_POOL and replaced["properties"][0]["path"] == "nodeConfig.machineType"


# --- the plan shape ------------------------------------------------------------------------------------------


def test_parse_plan_rejects_duplicate_urns():
    with pytest.raises(ConfigError, match=r"resources\[1\]\.urn"):
        parse_plan(plan(cluster(), cluster()))


def test_parse_plan_names_the_missing_field():
    broken = plan(cluster())
    del broken["resources"][0]["inputs"]
    with pytest.raises(ConfigError, match=r"plan: resources\[0\]\.inputs: got None; allowed: a value: this key is "
                                          r"required"):
        parse_plan(broken)


# --- the CLI -------------------------------------------------------------------------------------------------


@pytest.fixture
def run_diff(tmp_path: Path):
    """`tpuplane diff` as the lead registers it, on plans written to files."""
    app = typer.Typer()
    app.callback()(lambda: None)  # a group, so `diff` stays a sub-command as in the real CLI
    app.command("diff")(diff_command)

    def run(base: Any, head: Any, *args: str):
        paths = []
        for role, content in (("base", base), ("head", head)):
            path = tmp_path / f"{role}.json"
            if content is not None:
                path.write_text(content if isinstance(content, str) else json.dumps(content))
            paths.append(str(path))
        return CliRunner().invoke(app, ["diff", *paths, *args])

    return run


def test_diff_command_exits_0_when_nothing_changes(run_diff):
    result = run_diff(plan(cluster()), plan(cluster()))
    assert result.exit_code == 0 and "No changes." in result.stdout


def test_diff_command_exits_1_and_prints_the_report_when_something_changes(run_diff, busy_diff):
    result = run_diff(*busy_diff, "--format", "text")
    assert result.exit_code == 1
    base, head = (parse_plan(p) for p in busy_diff)
    assert result.stdout == render(diff_docs(*busy_diff), "text", diff_context(base, head, load_prices()))


def test_diff_command_writes_json(run_diff, busy_diff):
    result = run_diff(*busy_diff, "--format", "json")
    assert json.loads(result.stdout)["summary"]["replace"] == 1


@pytest.mark.parametrize(("base", "message"), [
    (None, "a readable file"),
    ("{not json", "a JSON document"),
    (json.dumps({"project": "p", "stack": "s"}), "resources"),
    (json.dumps({"project": "p", "stack": "s", "resources": [{"urn": 1}]}), "resources[0].urn"),
    ('{"project": "p", "stack": "s", "resources": [], "x": NaN}', "NaN"),
    ('{"project": "p", "project": "q", "stack": "s", "resources": []}', "duplicate key"),
    ("[" * 100_000 + "]" * 100_000, "nesting"),
])
def test_diff_command_exits_2_on_bad_input(run_diff, base, message):
    result = run_diff(base, plan(cluster()))
    assert result.exit_code == 2
    assert message in result.stderr and result.stdout == ""


def test_diff_plans_identical_plans_holding_nan_have_no_changes():
    pool = patch(node_pool(), {"labels": {"ratio": float("nan")}})
    assert not diff_docs(plan(pool), plan(json.loads(json.dumps(pool)))).has_changes


def test_diff_command_rejects_unknown_format(run_diff):
    assert run_diff(plan(cluster()), plan(cluster()), "--format", "html").exit_code == 2

