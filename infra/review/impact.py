"""What a diff needs beyond the changed paths: the inputs of created and deleted resources (for their key
properties), the fleet after the change (summary and diagram) and the estimated monthly cost it adds or
removes per TPU generation and capacity mode, the way Infracost prices a PR.

`diff_report` renders a `PlanDiff` alone; given a `DiffContext` built from the same two plans, every format
also shows these. Pure: plans and a price table in, a frozen context out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tpuplane.infra.review.cost import CostLine, PriceTable, change_text, cost_delta, money, total, unpriced_note
from tpuplane.infra.review.markup import md_text, visible
from tpuplane.infra.review.plan import Plan, PlannedResource
from tpuplane.infra.review.plan_diff import Action, PlanDiff, ResourceChange
from tpuplane.infra.review.summary import FleetSummary, Grant, grant_of, key_properties, summarize
from tpuplane.infra.review.fold import Folding
from tpuplane.infra.review.summary_markdown import add_diagram, summary_markdown, table


@dataclass(frozen=True)
class DiffContext:
    resources: Mapping[str, PlannedResource]  # URN -> resource (head's, else base's)
    head: FleetSummary
    cost: tuple[CostLine, ...]  # per (generation, capacity): chips and money head adds (+) or removes (-)
    prices: PriceTable

    def key_properties(self, change: ResourceChange) -> list[tuple[str, str]]:
        """Key properties of a created or deleted resource; changed resources show their changed paths."""
        if change.action not in (Action.CREATE, Action.DELETE):
            return []
        resource = self.resources.get(change.urn)
        return key_properties(resource.type, resource.read()) if resource is not None else []

    @property
    def monthly_delta(self) -> float:
        return total(self.cost)

    @property
    def monthly_delta_min(self) -> float:
        return total(self.cost, minimum=True)

    def money_text(self, low: float | None, high: float | None) -> str:
        return change_text(low, high, lambda value: money(value, self.prices.currency, signed=True))

    @property
    def total_text(self) -> str:
        return self.money_text(self.monthly_delta_min, self.monthly_delta)


def _chips(line: CostLine) -> str:
    return change_text(line.min_chips, line.chips, lambda chips: f"{chips:+d}")


def _chip_hours(line: CostLine) -> str:
    return change_text(line.min_chip_hours, line.chip_hours, lambda hours: f"{hours:+,.0f}")


def diff_context(base: Plan, head: Plan, prices: PriceTable) -> DiffContext:
    resources = {**base.by_urn(), **head.by_urn()}
    base_summary, head_summary = summarize(base), summarize(head)
    return DiffContext(resources, head_summary, cost_delta(base_summary, head_summary, prices), prices)


@dataclass(frozen=True)
class GrantChange:
    """An IAM grant the change makes (`create`), takes away (`delete`), or changes: `before` is its earlier role."""

    action: Action
    grant: Grant
    before: str = ""

    @property
    def text(self) -> str:
        role = f"{self.before} -> {self.grant.role}" if self.before else self.grant.role
        return f"{self.grant.member} {role} on {self.grant.target}"


def grant_changes(diff: PlanDiff, context: DiffContext) -> list[GrantChange]:
    """Every IAM grant added, removed or changed: who may reach what, before the properties that say so."""
    changes = []
    for change in diff.changes:
        resource = context.resources.get(change.urn)
        grant = grant_of(change.type, change.name, resource.read()) if resource is not None else None
        if grant is None:
            continue
        role = next((p for p in change.properties if p.path == "role"), None)
        changes.append(GrantChange(change.action, grant, str(role.before) if role and role.before else ""))
    return changes


def cost_markdown(context: DiffContext) -> list[str]:
    note = md_text(context.prices.note)
    if not context.cost:
        return ["No change in TPU chips, so no change in estimated TPU cost.", "", f"_{note}_"]
    lines = table(("Generation", "Capacity", "Chips", "Chip-hours/month", "Est. monthly change"),
                  [(md_text(c.generation), md_text(c.capacity), _chips(c), _chip_hours(c),
                    md_text(context.money_text(c.monthly_min, c.monthly))) for c in context.cost], right=3)
    unpriced = unpriced_note(context.cost)
    return [*lines, "", f"**Estimated TPU cost change: {md_text(context.total_text)}"
                        f"/month{md_text(f' ({unpriced})' if unpriced else '')}.** _{note}_"]


def add_fleet(fold: Folding, context: DiffContext) -> None:
    """The fleet after the change: summary tables and the diagram (GitHub renders ```mermaid), while they fit."""
    if fold.add(["#### The fleet after this change", "",
                 *summary_markdown(context.head, context.prices, heading="#####"), ""],
                what="the fleet after this change"):
        add_diagram(fold, context.head)


def cost_text(context: DiffContext) -> list[str]:
    lines = ["Estimated TPU cost change:"]
    lines += [visible(f"  {c.generation} {c.capacity}: chips {_chips(c)}, chip-hours/month {_chip_hours(c)}, "
                      f"{context.money_text(c.monthly_min, c.monthly)}/month") for c in context.cost] or ["  none"]
    unpriced = unpriced_note(context.cost)
    return [*lines, visible(f"  total {context.total_text}/month"
                            f"{f' ({unpriced})' if unpriced else ''}. {context.prices.note}")]


def cost_json(context: DiffContext) -> dict[str, Any]:
    return {
        "estimate": True, "pricesDate": context.prices.date, "pricesSource": context.prices.source,
        "currency": context.prices.currency, "hoursPerMonth": context.prices.hours_per_month,
        "monthlyDelta": context.monthly_delta, "monthlyDeltaMin": context.monthly_delta_min,
        "lines": [{"generation": c.generation, "capacity": c.capacity, "chips": c.chips, "minChips": c.min_chips,
                   "chipHoursPerMonth": c.chip_hours, "minChipHoursPerMonth": c.min_chip_hours,
                   "monthly": c.monthly, "monthlyMin": c.monthly_min} for c in context.cost],
    }
