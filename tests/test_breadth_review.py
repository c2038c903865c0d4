"""A plan shows storage, IAM grants, scaling ranges, node auto-provisioning and the dashboard in every format, and a
diff says which grants a change adds, removes or changes, and what the providers replace. Plans come from the stack
program under Pulumi's mocks (GCP and Kubernetes cannot exist here)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from conftest import STACKS, stack_file_config

from tpuplane.components.offline import run_program_file
from tpuplane.infra.review.cost import fleet_cost, load_prices, total
from tpuplane.infra.review.diff_report import render
from tpuplane.infra.review.impact import diff_context
from tpuplane.infra.review.plan import Plan
from tpuplane.infra.review.plan_diff import Action, diff_plans
from tpuplane.infra.review.plan_report import render_plan
from tpuplane.infra.review.report_format import ReportFormat
from tpuplane.infra.review.summary import Grant, StorageVolume, summarize

PRICES = load_prices()
HOSTILE_TITLE = "[red]x[/red] | `y` <b>z</b>"


def plan(config: dict[str, Any], stack: str = "pathways") -> Plan:
    return run_program_file(STACKS / "__main__.py", config, project="tpuplane", stack=stack).redacted()


@pytest.fixture(scope="module")
def pathways() -> Plan:
    return plan(stack_file_config("pathways"))


@pytest.fixture(scope="module")
def fixed() -> Plan:
    """The pathways stack before its batch group scaled: 4 slices always there."""
    config = copy.deepcopy(stack_file_config("pathways"))
    config["tpuplane:tpuPools"][1] = {"name": "batch", "tpuType": "v6e-16", "slices": 4, "capacity": "spot"}
    return plan(config)


@pytest.fixture(scope="module")
def changed() -> Plan:
    """The pathways stack after a change: evals may now write the datasets bucket, research loses its checkpoint
    bucket, the batch group holds two slices, and the dashboard has a hostile title."""
    config = copy.deepcopy(stack_file_config("pathways"))
    storage = config["tpuplane:storage"]
    storage["volumes"][0]["readOnly"] = False
    del storage["volumes"][1]
    config["tpuplane:tpuPools"][1]["autoscaling"]["minSlices"] = 2
    config["tpuplane:dashboard"] = {"displayName": HOSTILE_TITLE}
    return plan(config)


def test_the_summary_lists_storage_grants_and_dashboards(pathways):
    summary = summarize(pathways)

    assert summary.storage == (
        StorageVolume("checkpoints", "gcs", "gs://acme-ml-checkpoints/research", False, ("research",)),
        StorageVolume("datasets", "gcs", "gs://acme-ml-datasets", True, ("evals", "research")))
    workload = [g for g in summary.grants if "tpuplane-workload" in g.member]
    assert [(g.member.split("[")[1], g.role, g.target) for g in workload] == [
        ("evals/tpuplane-workload]", "roles/storage.objectViewer", "bucket acme-ml-datasets"),
        ("research/tpuplane-workload]", "roles/storage.objectUser", "bucket acme-ml-checkpoints"),
        ("research/tpuplane-workload]", "roles/storage.objectViewer", "bucket acme-ml-datasets"),
        ("research/tpuplane-workload]", "roles/aiplatform.user", "project acme-ml")]
    assert summary.dashboards == ("TPU fleet shared",)


def test_a_group_that_scales_shows_its_range_and_costs_from_its_minimum_to_its_maximum(pathways):
    summary = summarize(pathways)
    batch = next(g for g in summary.pool_groups if g.name == "batch")

    assert (batch.slices_text, batch.held, batch.min_chips, batch.chips) == ("1-4", (True, False, False, False), 16, 64)
    spot = next(c for c in fleet_cost(summary, PRICES) if c.capacity == "spot")
    assert (spot.min_chips, spot.chips, spot.scales) == (16, 64, True)
    assert spot.monthly_min * 4 == pytest.approx(spot.monthly)
    assert total(fleet_cost(summary, PRICES), minimum=True) < total(fleet_cost(summary, PRICES))


def test_node_auto_provisioning_limits_are_in_the_summary():
    summary = summarize(plan(stack_file_config("prod"), "prod"))

    assert dict(summary.autoprovisioning) == {"cpu": 16000, "memory": 40000, "tpu-v5p-slice": 256,
                                              "tpu-v6e-slice": 64}


@pytest.mark.parametrize("fmt, shown", [
    (ReportFormat.TEXT, ("total                  48-96     35,040-70,080", "16-64     11,680-46,720")),
    (ReportFormat.MARKDOWN, ("**48-96 TPU chips, est.", "| 16-64 | 11,680-46,720 |", "| 1-4 | 4-16 | 16-64 |")),
    (ReportFormat.HTML, ("<b>48-96</b>TPU chips", "<b>3-6</b>slices", '<td class="num">11,680-46,720</td>')),
])
def test_every_format_totals_chips_and_chip_hours_from_the_minimum_to_the_maximum(pathways, fmt, shown):
    """batch scales between 1 and 4 v6e-16 slices (16-64 chips), serve holds 2 (32): the fleet has 48-96 chips."""
    out = render_plan(pathways, fmt, PRICES)

    for text in shown:
        assert text in out, (fmt, text)


@pytest.mark.parametrize("fmt", [ReportFormat.TEXT, ReportFormat.MARKDOWN, ReportFormat.HTML])
def test_every_format_shows_a_lustre_instance_on_the_legacy_port(fmt):
    config = copy.deepcopy(stack_file_config("pathways"))
    config["tpuplane:storage"]["volumes"].append({"name": "lustre", "teams": ["research"], "lustre": {
        "zone": "us-east5-b", "instance": "lfs1", "ip": "10.90.2.2", "filesystem": "lfs", "size": "9000Gi",
        "enableLegacyLustrePort": True}})

    assert "lustre (legacy port 6988)" in render_plan(plan(config), fmt, PRICES)


@pytest.mark.parametrize("fmt", [ReportFormat.TEXT, ReportFormat.MARKDOWN, ReportFormat.HTML])
def test_every_format_shows_storage_grants_and_the_scaling_range(pathways, fmt):
    out = render_plan(pathways, fmt, PRICES)

    for shown in ("gs://acme-ml-datasets", "roles/storage.objectUser", "TPU fleet shared", "1-4"):
        assert shown in out, (fmt, shown)


def test_a_hostile_dashboard_title_stays_text_in_every_format(changed):
    text = render_plan(changed, ReportFormat.TEXT, PRICES)
    markdown = render_plan(changed, ReportFormat.MARKDOWN, PRICES)
    html = render_plan(changed, ReportFormat.HTML, PRICES)

    assert "Dashboards: [red]x[/red] | `y` <b>z</b>" in text  # printed as written, not as rich markup
    assert "Dashboards: ``[red]x[/red] | `y` <b>z</b>``" in markdown  # in code longer than its backticks: no HTML
    assert "<b>z</b>" not in html and "&lt;b&gt;z&lt;/b&gt;" in html


# ---- diffs ----------------------------------------------------------------------------------------------------


def test_a_diff_lists_the_grants_a_change_adds_removes_and_changes(pathways, changed):
    diff = diff_plans(pathways, changed)
    context = diff_context(pathways, changed, PRICES)

    document = json.loads(render(diff, ReportFormat.JSON, context))
    grants = {(g["action"], g["member"].split("[")[1], g["roleBefore"], g["role"], g["on"])
              for g in document["grantChanges"]}
    assert grants == {
        ("replace", "evals/tpuplane-workload]", "roles/storage.objectViewer", "roles/storage.objectUser",
         "bucket acme-ml-datasets"),
        ("replace", "research/tpuplane-workload]", "roles/storage.objectViewer", "roles/storage.objectUser",
         "bucket acme-ml-datasets"),
        ("delete", "research/tpuplane-workload]", None, "roles/storage.objectUser", "bucket acme-ml-checkpoints"),
    }
    markdown = render(diff, ReportFormat.MARKDOWN, context)
    assert "#### IAM grants" in markdown and "- `-` delete: `serviceAccount:acme-ml.svc.id.goog[research/" \
                                            "tpuplane-workload] roles/storage.objectUser on bucket acme-ml-checkpoints`" in markdown
    assert "IAM grants:" in render(diff, ReportFormat.TEXT, context)


def test_volumes_and_claims_are_replaced_as_the_kubernetes_provider_replaces_them(pathways, changed):
    changes = {c.name: c for c in diff_plans(pathways, changed).changes}

    volume, claim = changes["persistentvolume-datasets.research"], changes["persistentvolumeclaim-research-datasets"]
    assert volume.action is Action.REPLACE and "spec.csi.readOnly" in [p.path for p in volume.properties if p.replaces]
    assert claim.action is Action.REPLACE and [p.path for p in claim.properties if p.replaces] == ["spec.accessModes[0]"]


def test_holding_one_more_slice_changes_the_pools_limits_in_place(pathways, changed):
    changes = {c.name: c for c in diff_plans(pathways, changed).changes}

    pool = changes["batch-1"]
    assert pool.action is Action.UPDATE  # its initial size is the autoscaler's (ignored by TpuSlicePool)
    assert {p.path: (p.before, p.after) for p in pool.properties} == {"autoscaling.minNodeCount": (0, 4),
                                                                      "initialNodeCount": (0, 4)}
    assert not any(c.name.startswith("batch-") and c.action is Action.REPLACE for c in changes.values())


def test_grant_of_reads_a_bucket_and_a_project_grant():
    from tpuplane.infra.review.summary import grant_of

    assert grant_of("gcp:storage/bucketIAMMember:BucketIAMMember", "g", {"bucket": "b", "role": "r", "member": "m"}) \
        == Grant("m", "r", "bucket b", "g")
    assert grant_of("gcp:projects/iAMMember:IAMMember", "g", {"project": "p", "role": "r", "member": "m"}) \
        == Grant("m", "r", "project p", "g")
    assert grant_of("gcp:storage/bucket:Bucket", "g", {}) is None


def test_a_fixed_group_that_starts_to_scale_is_updated_in_place(fixed, pathways):
    changes = {c.name: c for c in diff_plans(fixed, pathways).changes}

    assert {changes[f"batch-{i}"].action for i in range(4)} == {Action.UPDATE}
    assert {p.path for p in changes["batch-1"].properties} == {
        "autoscaling.locationPolicy", "autoscaling.maxNodeCount", "autoscaling.minNodeCount", "initialNodeCount",
        "nodeCount"}


def test_a_group_that_starts_to_scale_from_zero_lowers_the_cost_floor_in_every_diff_format(fixed, pathways):
    """4 held spot slices become 1-4: the maximum stays (64 chips), the minimum drops by 3 slices (48 chips)."""
    diff, context = diff_plans(fixed, pathways), diff_context(fixed, pathways, PRICES)
    floor = -round(48 * 730 * PRICES.rate("v6e", "spot"))

    [line] = context.cost
    assert (line.capacity, line.chips, line.min_chips, line.min_chip_hours) == ("spot", 0, -48, -48 * 730)
    text = render(diff, ReportFormat.TEXT, context)
    assert (f"v6e spot: chips min -48 / max +0, chip-hours/month min -35,040 / max +0, min -${-floor:,} / max $0/month"
            in text) and f"total min -${-floor:,} / max $0/month" in text
    markdown = render(diff, ReportFormat.MARKDOWN, context)
    assert "| v6e | spot | min -48 / max +0 | min -35,040 / max +0 |" in markdown
    assert f"**Estimated TPU cost change: min -\\${-floor:,} / max \\$0/month" in markdown
    document = json.loads(render(diff, ReportFormat.JSON, context))["costImpact"]
    assert document["monthlyDelta"] == 0 and round(document["monthlyDeltaMin"]) == floor
    assert [(x["chips"], x["minChips"]) for x in document["lines"]] == [(0, -48)]
