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

from tpuplane.infra.review.cost import CostLine, PriceTable, cost_delta, money, total
from tpuplane.infra.review.plan import Plan
from tpuplane.infra.review.plan_diff import Action, PlanDiff, ResourceChange
from tpuplane.infra.review.summary import GRANT_TYPES, FleetSummary, Grant, grant_of, key_properties, summarize
from tpuplane.infra.review.summary_markdown import cell, mermaid, summary_markdown


@dataclass(frozen=True)
class DiffContext:
    inputs: Mapping[str, Mapping[str, Any]]  # URN -> inputs (head's, else base's)
    head: FleetSummary
    cost: tuple[CostLine, ...]  # per (generation, capacity): chips and money head adds (+) or removes (-)
    prices: PriceTable

    def key_properties(self, change: ResourceChange) -> list[tuple[str, str]]:
        """Key properties of a created or deleted resource; changed resources show their changed paths."""
        if change.action not in (Action.CREATE, Action.DELETE):
            return []
        return key_properties(change.type, self.inputs.get(change.urn, {}))

    @property
    def monthly_delta(self) -> float:
        return total(self.cost)


def diff_context(base: Plan, head: Plan, prices: PriceTable) -> DiffContext:
    inputs = {r.urn: r.inputs for r in base.resources}
    inputs.update({r.urn: r.inputs for r in head.resources})
    base_summary, head_summary = summarize(base), summarize(head)
    return DiffContext(inputs, head_summary, cost_delta(base_summary, head_summary, prices), prices)


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
        if change.type not in GRANT_TYPES:
            continue
        grant = grant_of(change.type, change.name, context.inputs.get(change.urn, {}))
        assert grant is not None
        role = next((p for p in change.properties if p.path == "role"), None)
        changes.append(GrantChange(change.action, grant, str(role.before) if role and role.before else ""))
    return changes


def key_text(props: list[tuple[str, str]]) -> str:
    return "; ".join(f"{k}: {v}" for k, v in props)


def cost_markdown(context: DiffContext) -> list[str]:
    currency = context.prices.currency
    if not context.cost:
        return ["No change in TPU chips, so no change in estimated TPU cost.", "", f"_{context.prices.note}_"]
    lines = ["| Generation | Capacity | Chips | Chip-hours/month | Est. monthly change |", "|---|---|---:|---:|---:|"]
    lines += [f"| {c.generation} | {c.capacity} | {c.chips:+d} | {c.chip_hours:+,.0f} | "
              f"{money(c.monthly, currency, signed=True)} |" for c in context.cost]
    return [*lines, "", f"**Estimated TPU cost change: {money(context.monthly_delta, currency, signed=True)}"
                        f"/month.** _{cell(context.prices.note)}_"]


def fleet_markdown(context: DiffContext) -> list[str]:
    """The fleet after the change: summary tables and the diagram (GitHub renders ```mermaid)."""
    return ["#### The fleet after this change", "", *summary_markdown(context.head, context.prices, heading="#####"),
            "", *mermaid(context.head)]


def cost_text(context: DiffContext) -> list[str]:
    currency = context.prices.currency
    lines = ["Estimated TPU cost change:"]
    lines += [f"  {c.generation} {c.capacity}: chips {c.chips:+d}, chip-hours/month {c.chip_hours:+,.0f}, "
              f"{money(c.monthly, currency, signed=True)}/month" for c in context.cost] or ["  none"]
    return [*lines, f"  total {money(context.monthly_delta, currency, signed=True)}/month. {context.prices.note}"]


def cost_json(context: DiffContext) -> dict[str, Any]:
    return {
        "estimate": True, "pricesDate": context.prices.date, "pricesSource": context.prices.source,
        "currency": context.prices.currency, "hoursPerMonth": context.prices.hours_per_month,
        "monthlyDelta": context.monthly_delta,
        "lines": [{"generation": c.generation, "capacity": c.capacity, "chips": c.chips,
                   "chipHoursPerMonth": c.chip_hours, "monthly": c.monthly} for c in context.cost],
    }
