"""How `tpuplane plan` shows a plan in each of its formats: the fleet first (summary tables), then resources by
component with their key properties; every property only on request (`--details`) or folded (markdown).

Renderers receive an already-redacted plan and never cut a value silently: long values wrap, or end in `…`
where a one-line summary is wanted.
"""

from __future__ import annotations

import html
import io
import json
from typing import Any

import yaml
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from tpuplane.infra.review.cost import CostLine, PriceTable, fleet_cost, group_cost, money_range, total
from tpuplane.infra.review.html_report import render_html
from tpuplane.infra.review.plan import Plan
from tpuplane.infra.review.report_format import ReportFormat
from tpuplane.infra.review.summary import FleetSummary, key_properties, short_type, summarize, urn_name
from tpuplane.infra.review.summary_markdown import code, mermaid, summary_markdown

CAPACITY_STYLE = {"reservation": "green", "on-demand": "blue", "flex-start": "magenta", "queued": "magenta",
                  "spot": "yellow"}
_KEY_VALUE_MAX = 120


def plain_text(renderable: RenderableType, width: int = 160) -> str:
    """What a pipe or file gets: no colour, a fixed width and no trailing blanks, the same bytes every run."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None).print(renderable, highlight=False)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"


def short(text: str, limit: int = _KEY_VALUE_MAX) -> str:
    """One-line summaries end in an ellipsis rather than being cut mid-value."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        return [item for k, v in value.items() for item in _flatten(v, f"{prefix}.{k}" if prefix else k)]
    if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        return [item for i, v in enumerate(value) for item in _flatten(v, f"{prefix}[{i}]")]
    return [(prefix, value)]


def _table(title: str, *columns: str, right: int = 0) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", header_style="bold", box=None,
                  pad_edge=False, padding=(0, 2, 0, 0))
    for i, column in enumerate(columns):
        table.add_column(column, justify="right" if i >= len(columns) - right else "left", overflow="fold")
    return table


def summary_renderables(summary: FleetSummary, prices: PriceTable) -> list[RenderableType]:
    """The fleet at a glance, as rich tables (coloured on a terminal, plain text when piped)."""
    out: list[RenderableType] = []
    cluster = f" · cluster {summary.cluster}" if summary.cluster else ""
    out.append(Text.assemble((f"{summary.project}/{summary.stack}", "bold"),
                             f": {summary.total_resources} resources{cluster}"))
    if summary.pool_groups:
        pools = _table("TPU pool groups", "group", "TPU type", "machine type", "capacity", "reservation",
                       "slices", "VMs", "chips", "est. $/month", right=4)
        for g in summary.pool_groups:
            pools.add_row(Text(g.name, "bold"), Text(g.tpu_type), Text(g.machine_type),
                          Text(g.capacity, CAPACITY_STYLE.get(g.capacity, "")), Text(g.reservation or "-"),
                          g.slices_text, str(g.vms), str(g.chips), group_cost(g, prices))
        costs = fleet_cost(summary, prices)
        chips = _table("Chips per generation", "generation", "capacity", "chips", "chip-hours/month",
                       "est. $/month", right=3)
        for c in costs:
            chips.add_row(c.generation, Text(c.capacity, CAPACITY_STYLE.get(c.capacity, "")), chips_text(c),
                          f"{c.chip_hours:,.0f}", money_range(c.monthly_min, c.monthly, prices.currency))
        chips.add_row(Text("total", "bold"), "", Text(str(sum(c.chips for c in costs)), "bold"),
                      f"{sum(c.chip_hours for c in costs):,.0f}",
                      Text(money_range(total(costs, minimum=True), total(costs), prices.currency), "bold"))
        out += ["", pools, "", chips, Text(prices.note + SCALING_NOTE if any(c.scales for c in costs)
                                           else prices.note, "dim")]
    else:
        out += ["", Text("No TPU node pools.", "dim")]
    if summary.cpu_pools:
        out.append(Text("CPU pools: " + ", ".join(f"{c.name} ({c.machine_type}, {c.nodes} nodes)"
                                                  for c in summary.cpu_pools)))
    if summary.queues:
        queues = _table("Queues (Kueue)", "ClusterQueue", "cohort", "flavor", "quota", "LocalQueues")
        for q in summary.queues:
            for i, flavor in enumerate(q.flavors):
                quota = ", ".join(f"{x.resource}={x.nominal}" + (f" (+{x.borrowing_limit})" if x.borrowing_limit
                                                                 else "") for x in q.quotas if x.flavor == flavor)
                queues.add_row(Text(q.name, "bold") if i == 0 else "", (q.cohort or "-") if i == 0 else "",
                               flavor, quota, ", ".join(q.local_queues) if i == 0 else "")
        out += ["", queues]
    if summary.autoprovisioning:
        out.append(Text("Node auto-provisioning: " + nap_text(summary)))
    if summary.storage:
        storage = _table("Storage (mounted by name)", "storage", "kind", "location", "access", "namespaces")
        for v in summary.storage:
            storage.add_row(Text(v.name, "bold"), Text(v.kind), Text(v.location),
                            "read-only" if v.read_only else "read-write", Text(", ".join(v.namespaces)))
        out += ["", storage]
    if summary.grants:
        grants = _table("IAM grants", "member", "role", "on")
        for grant in summary.grants:
            grants.add_row(Text(grant.member), Text(grant.role), Text(grant.target))
        out += ["", grants]
    if summary.dashboards:
        out += ["", Text.assemble(("Dashboards: ", "bold"), ", ".join(summary.dashboards))]
    if summary.pathways or summary.sidecar_images:
        pathways = _table("Pathways", "service", "instances", "server / sidecar image")
        for s in summary.pathways:
            pathways.add_row(f"{s.namespace}/{s.name}", f"{s.instances} x {s.instance_type}", s.server_image)
        for i in summary.sidecar_images:
            pathways.add_row(f"sidecar {i.name}", "", f"{', '.join(i.tags)} (from {i.base_image})")
        out += ["", pathways]
    out += ["", Text.assemble(("Resources: ", "bold"),
                              ", ".join(f"{n} {kind}" for kind, n in summary.resource_counts))]
    return out


SCALING_NOTE = " Ranges: groups that scale, from their minimum to their maximum."


def chips_text(line: CostLine) -> str:
    return f"{line.min_chips}-{line.chips}" if line.scales else str(line.chips)


def nap_text(summary: FleetSummary) -> str:
    return ", ".join(f"{kind} up to {most}" for kind, most in summary.autoprovisioning)


def render_table(plan: Plan, details: bool = False, prices: PriceTable | None = None) -> RenderableType:
    """The summary (when prices are given), then the component tree: each resource with its key properties,
    and with `details` every input as `path = value`."""
    root = Tree(Text.assemble((plan.project, "bold"), "/", (plan.stack, "bold"),
                              f": {len(plan.resources)} resources by component"))
    known = {r.urn for r in plan.resources}
    children: dict[str, list] = {}
    for res in plan.resources:  # in URN order, so siblings always print in the same order
        children.setdefault(res.parent if res.parent in known else "", []).append(res)

    def add(node: Tree, parent_urn: str) -> None:
        for res in children.get(parent_urn, []):
            label = Text.assemble((short_type(res.type), "cyan"), " ", (res.name, "bold"))
            props = key_properties(res.type, res.inputs)
            if props:
                label.append("  " + "; ".join(f"{k}: {short(v)}" for k, v in props), "green")
            child = node.add(label)
            if details:
                for path, value in _flatten(dict(res.inputs)) if res.inputs else ():
                    child.add(Text.assemble((path, "dim"), " = ", json.dumps(value, sort_keys=True)))
            add(child, res.urn)

    add(root, "")
    if prices is None:
        return root
    return Group(*summary_renderables(summarize(plan), prices), "", root)


def render_markdown(plan: Plan, prices: PriceTable) -> str:
    """A PR-ready page: summary tables and a Mermaid diagram first, resources by component, inputs folded."""
    summary = summarize(plan)
    lines = [f"### Plan of `{plan.project}/{plan.stack}`", "", *summary_markdown(summary, prices), "",
             *mermaid(summary), "", "#### Resources by component", "",
             "| Component | Type | Name | Key properties |", "| --- | --- | --- | --- |"]
    for r in plan.resources:
        props = "; ".join(f"{k}: {short(v)}" for k, v in key_properties(r.type, r.inputs))
        lines.append(f"| {code(urn_name(r.parent))} | {code(short_type(r.type))} | {code(r.name)} | "
                     f"{props.replace('|', chr(92) + '|')} |")
    lines += ["", "<details><summary>Every property of every resource</summary>", ""]
    for r in plan.resources:
        if r.inputs:
            lines += [f"<details><summary><code>{short_type(r.type)}</code> <b>{html.escape(r.name)}</b></summary>", "",
                      "```yaml", yaml.safe_dump(dict(r.inputs), sort_keys=True).rstrip(), "```", "</details>", ""]
    lines.append("</details>")
    return "\n".join(lines) + "\n"


def render_plan(plan: Plan, fmt: ReportFormat, prices: PriceTable, *, details: bool = False) -> str:
    """A redacted plan in one of `PLAN_FORMATS`, as a file or pipe gets it (a terminal gets `render_table` in
    colour)."""
    if fmt is ReportFormat.JSON:
        return json.dumps(plan.to_json(), indent=2, sort_keys=True, allow_nan=False) + "\n"
    if fmt is ReportFormat.MARKDOWN:
        return render_markdown(plan, prices)
    if fmt is ReportFormat.HTML:
        return render_html(plan, prices)
    return plain_text(render_table(plan, details=details, prices=prices))
