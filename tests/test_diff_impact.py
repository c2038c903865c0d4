"""Specification of what `tpuplane diff` adds from the two plans: key properties of created and deleted
resources, the estimated monthly cost the change adds or removes, and the fleet after the change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plan_factory import cluster, cluster_queue, node_pool, patch, plan
from tpuplane.cli.main import app
from tpuplane.infra.review.cost import load_prices
from tpuplane.infra.review.diff_report import render
from tpuplane.infra.review.impact import diff_context
from tpuplane.infra.review.plan import parse_plan
from tpuplane.infra.review.plan_diff import diff_plans

ON_DEMAND = {"nodeConfig": {"spot": None}}


def report(base: dict, head: dict, fmt: str, prices=None) -> str:
    b, h = parse_plan(base), parse_plan(head)
    return render(diff_plans(b, h), fmt, diff_context(b, h, prices or load_prices()))


@pytest.fixture
def grown():
    """A PR that adds one on-demand v6e-16 slice beside a spot one."""
    base = plan(cluster(), node_pool("train-0"), cluster_queue())
    head = plan(cluster(), node_pool("train-0"), patch(node_pool("serve-0"), ON_DEMAND), cluster_queue())
    return base, head


def test_diff_markdown_shows_key_properties_of_a_created_node_pool(grown):
    out = report(*grown, "markdown")

    row = next(line for line in out.splitlines() if "`serve-0`" in line)
    assert "machine type: ct6e-standard-4t; topology: 4x4; nodes: 4; capacity: on-demand" in row


def test_diff_text_shows_key_properties_of_a_deleted_node_pool(grown):
    base, head = grown

    lines = report(head, base, "text").splitlines()

    i = lines.index("  -  NodePool serve-0 (delete)")
    assert lines[i + 1].strip().startswith("machine type: ct6e-standard-4t; topology: 4x4; nodes: 4;")


def test_diff_markdown_prices_the_added_chips_per_generation_and_mode(grown):
    prices = load_prices()
    monthly = 16 * 730 * prices.rate("v6e", "on-demand")

    out = report(*grown, "markdown")

    # `$` is escaped: GitHub reads two dollar amounts on a line as math
    assert f"| v6e | on-demand | +16 | +11,680 | +\\${monthly:,.0f} |" in out
    assert f"**Estimated TPU cost change: +\\${monthly:,.0f}/month.**" in out
    assert f"list prices of {prices.date}" in out


def test_diff_markdown_cost_comes_before_the_resource_list(grown):
    out = report(*grown, "markdown")

    assert out.index("#### TPU impact") < out.index("#### Estimated cost") < out.index("#### Resources")


def test_diff_markdown_shows_the_fleet_after_the_change_with_a_diagram(grown):
    out = report(*grown, "markdown")

    fleet = out[out.index("#### The fleet after this change"):]
    assert "| `serve-0` | v6e-16 |" in fleet and "```mermaid" in fleet


def test_diff_without_chip_changes_says_the_cost_does_not_change():
    base = plan(cluster(), node_pool("train-0"), cluster_queue(tpu_quota=16))
    head = plan(cluster(), node_pool("train-0"), cluster_queue(tpu_quota=8))

    assert "No change in TPU chips, so no change in estimated TPU cost." in report(base, head, "markdown")


def test_diff_json_carries_the_estimate_and_its_prices_date(grown):
    doc = json.loads(report(*grown, "json"))

    assert doc["costImpact"]["estimate"] is True and doc["costImpact"]["pricesDate"] == load_prices().date
    assert [line["chips"] for line in doc["costImpact"]["lines"]] == [16]
    created = next(c for c in doc["changes"] if c["name"] == "serve-0")
    assert created["keyProperties"]["capacity"] == "on-demand"


def test_diff_command_prices_with_a_stack_price_file(grown, tmp_path: Path):
    paths = []
    for name, doc in zip(("base", "head"), grown):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(doc))
    prices = tmp_path / "prices.yaml"
    prices.write_text("date: '2031-01-01'\nchip_hour: {v6e: {on-demand: 1.0}}\n")

    result = CliRunner().invoke(app, ["diff", *map(str, paths), "--prices", str(prices)])

    assert result.exit_code == 1
    assert "+\\$11,680/month" in result.stdout and "list prices of 2031-01-01" in result.stdout
