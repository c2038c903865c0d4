"""Specification of the cost estimate: chips x hours a month x a dated list price per generation and
capacity mode, overridable per stack, and always labelled as an estimate with its prices' date."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpuplane.infra.errors import ConfigError
from tpuplane.infra.review.cost import (
    cost_delta, fleet_cost, group_cost, load_prices, money, money_range, total, unpriced_note,
)
from tpuplane.infra.review.plan import parse_plan
from tpuplane.infra.review.summary import summarize

from plan_factory import node_pool, patch, plan


def _summary(*resources):
    parsed = parse_plan(plan(*resources))
    return summarize(parsed)


@pytest.fixture
def prices_file(tmp_path: Path):
    def write(text: str) -> Path:
        path = tmp_path / "prices.yaml"
        path.write_text(text)
        return path

    return write


def test_shipped_prices_are_dated_and_sourced():
    prices = load_prices()

    assert prices.date and prices.source and prices.hours_per_month == 730
    assert "Estimated" in prices.note and prices.date in prices.note


def test_fleet_cost_is_chips_times_hours_times_the_rate():
    prices = load_prices()
    summary = _summary(node_pool("train-0"))

    (line,) = fleet_cost(summary, prices)

    assert (line.generation, line.capacity, line.chips, line.chip_hours) == ("v6e", "spot", 16, 16 * 730)
    assert line.monthly == round(16 * 730 * prices.rate("v6e", "spot"), 2)


def test_an_override_file_merges_rates_and_replaces_the_date(prices_file):
    prices = load_prices(prices_file("date: '2030-01-01'\nsource: our contract\nchip_hour: {v6e: {spot: 0.5}}\n"))

    assert (prices.date, prices.rate("v6e", "spot")) == ("2030-01-01", 0.5)
    assert prices.rate("v5p", "on-demand") == load_prices().rate("v5p", "on-demand")


def test_an_override_with_a_bad_rate_names_the_field(prices_file):
    with pytest.raises(ConfigError, match=r"chip_hour\.v6e\.spot"):
        load_prices(prices_file("chip_hour: {v6e: {spot: cheap}}\n"))


@pytest.mark.parametrize("text, path, allowed", [
    ("chip_hour: {v7: {spot: 1.0}}\n", "chip_hour.v7", "a TPU generation"),
    ("chip_hour: {v6e: {reserved: 1.0}}\n", "chip_hour.v6e.reserved", "a capacity mode"),
    ("chip_hour: {v6e: {spot: -1}}\n", "chip_hour.v6e.spot", "greater than or equal to 0"),
    ("chip_hour: {v6e: {spot: 1e308}}\n", "chip_hour.v6e.spot", "less than or equal to 1000000"),
    ("chip_hour: {v6e: {spot: true}}\n", "chip_hour.v6e.spot", ""),
    ("chip_hour: [1]\n", "chip_hour", ""),
    ("hours_per_month: 0\n", "hours_per_month", "greater than 0"),
    ("currency: dollars\n", "currency", "pattern"),
    ("rates: {v6e: {spot: 1.0}}\n", "rates", ""),
])
def test_a_price_file_names_every_key_it_cannot_price_by(prices_file, text, path, allowed):
    """A generation or mode a pool never has (a typo) would price nothing, silently: it is refused."""
    with pytest.raises(ConfigError) as raised:
        load_prices(prices_file(text))

    [problem] = raised.value.problems
    assert problem.path.endswith(f"prices.yaml: {path}") and allowed in problem.allowed


def test_a_price_files_source_never_shows_its_credentials(prices_file):
    prices = load_prices(prices_file("source: https://user:SECRETPART@prices.example.com/tpu\n"))

    assert "SECRETPART" not in prices.note and "prices.example.com" in prices.note


def test_a_generation_without_a_price_costs_no_price_not_zero(prices_file):
    summary = _summary(node_pool("big-0", machine_type="tpu7x-standard-4t", topology="2x2x4"))

    (line,) = fleet_cost(summary, load_prices())

    assert line.monthly is None and money(line.monthly) == "no price"


def test_the_total_says_which_chips_it_could_not_price():
    summary = _summary(node_pool("big-0", machine_type="tpu7x-standard-4t", topology="2x2x4"), node_pool("train-0"))

    lines = fleet_cost(summary, load_prices())

    assert total(lines) == next(line.monthly for line in lines if line.generation == "v6e")
    assert unpriced_note(lines) == "not counting 16 tpu7x spot chips (no price)"


def test_cost_delta_counts_what_head_adds_and_removes_per_mode():
    base = _summary(node_pool("a-0"))
    head = _summary(*(patch(node_pool(name), {"nodeConfig": {"spot": None}}) for name in ("a-0", "a-1")))

    delta = {(d.generation, d.capacity): d.chips for d in cost_delta(base, head, load_prices())}

    assert delta == {("v6e", "on-demand"): 32, ("v6e", "spot"): -16}


def test_money_rounds_to_whole_units_and_signs_deltas():
    assert (money(18921.6), money(-1200.4, signed=True), money(5.0, signed=True)) == ("$18,922", "-$1,200", "+$5")


def test_a_groups_cost_is_its_fleet_lines_range():
    """One computation of chips x hours x rate: the pool-group column and the per-generation table agree."""
    summary = _summary(node_pool("train-0"))
    [group], [line] = summary.pool_groups, fleet_cost(summary, load_prices())

    assert group_cost(group, load_prices()) == money_range(line.monthly_min, line.monthly) == money(line.monthly)
