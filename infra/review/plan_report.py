"""How `tpuplane plan` shows a plan in each of its formats: the fleet first (summary tables), then resources by
component with their key properties; every property only on request (`--details`) or folded (markdown).

Renderers receive an already-redacted plan and never cut a value: long values wrap. Every value goes through
the escaping function of the context it lands in (`tpuplane.infra.review.markup`).
"""

from __future__ import annotations

import functools
import io
import json
from typing import Any

import yaml
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from tpuplane.infra.review.cost import (
    PriceTable, fleet_cost, group_cost, money_range, total, totals_text, unpriced_note,
)
from tpuplane.infra.review.fold import GITHUB_COMMENT_MAX, Folding
from tpuplane.infra.review.html_report import render_html
from tpuplane.infra.review.markup import html_text, md_code, md_fence, md_text, visible
from tpuplane.infra.review.plan import Plan, PlannedResource
from tpuplane.infra.review.report_format import ReportFormat
from tpuplane.infra.review.summary import FleetSummary, key_properties, key_text, short_type, summarize, urn_name
from tpuplane.infra.review.summary_markdown import add_diagram, quota_text, summary_markdown, table

CAPACITY_STYLE = {"reservation": "green", "on-demand": "blue", "flex-start": "magenta", "queued": "magenta",
                  "spot": "yellow"}


def plain_text(renderable: RenderableType, width: int = 160) -> str:
    """What a pipe or file gets: no colour, a fixed width and no trailing blanks, the same bytes every run."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None).print(renderable, highlight=False)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"


def _text(value: object, style: str = "") -> Text:
    """A value in a terminal table or tree: one line, never read as rich markup."""
    return Text(visible(value), style)


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
    out.append(Text.assemble((visible(f"{summary.project}/{summary.stack}"), "bold"),
                             f": {summary.total_resources} resources{visible(cluster)}"))
    if summary.pool_groups:
        pools = _table("TPU pool groups", "group", "TPU type", "machine type", "capacity", "reservation",
                       "slices", "VMs", "chips", "est. $/month", right=4)
        for g in summary.pool_groups:
            pools.add_row(_text(g.name, "bold"), _text(g.tpu_type), _text(g.machine_type),
                          _text(g.capacity, CAPACITY_STYLE.get(g.capacity, "")), _text(g.reservation or "-"),
                          g.slices_text, g.vms_text, g.chips_text, _text(group_cost(g, prices)))
        costs = fleet_cost(summary, prices)
        chips = _table("Chips per generation", "generation", "capacity", "chips", "chip-hours/month",
                       "est. $/month", right=3)
        for c in costs:
            chips.add_row(_text(c.generation), _text(c.capacity, CAPACITY_STYLE.get(c.capacity, "")), c.chips_text,
                          c.chip_hours_text, _text(money_range(c.monthly_min, c.monthly, prices.currency)))
        all_chips, all_chip_hours = totals_text(costs)
        chips.add_row(Text("total", "bold"), "", Text(all_chips, "bold"), all_chip_hours,
                      _text(money_range(total(costs, minimum=True), total(costs), prices.currency), "bold"))
        unpriced = unpriced_note(costs)
        note = prices.note + SCALING_NOTE if any(c.scales for c in costs) else prices.note
        out += ["", pools, "", chips, *([_text(f"The total is {unpriced}.", "yellow")] if unpriced else []),
                _text(note, "dim")]
    else:
        out += ["", Text("No TPU node pools.", "dim")]
    if summary.cpu_pools:
        out.append(_text("CPU pools: " + ", ".join(f"{c.name} ({c.machine_type}, {c.nodes} nodes)"
                                                   for c in summary.cpu_pools)))
    if summary.queues:
        queues = _table("Queues (Kueue)", "ClusterQueue", "cohort", "flavor", "quota", "LocalQueues")
        for q in summary.queues:
            for i, flavor in enumerate(q.flavors):
                queues.add_row(_text(q.name, "bold") if i == 0 else "", _text(q.cohort or "-") if i == 0 else "",
                               _text(flavor), _text(quota_text(q.quotas, flavor)),
                               _text(", ".join(q.local_queues)) if i == 0 else "")
        out += ["", queues]
    if summary.autoprovisioning:
        out.append(_text("Node auto-provisioning: " + nap_text(summary)))
    if summary.storage:
        storage = _table("Storage (mounted by name)", "storage", "kind", "location", "access", "namespaces")
        for v in summary.storage:
            storage.add_row(_text(v.name, "bold"), _text(v.kind_text), _text(v.location),
                            "read-only" if v.read_only else "read-write", _text(", ".join(v.namespaces)))
        out += ["", storage]
    if summary.grants:
        grants = _table("IAM grants", "member", "role", "on")
        for grant in summary.grants:
            grants.add_row(_text(grant.member), _text(grant.role), _text(grant.target))
        out += ["", grants]
    if summary.dashboards:
        out += ["", Text.assemble(("Dashboards: ", "bold"), visible(", ".join(summary.dashboards)))]
    if summary.pathways or summary.sidecar_images:
        pathways = _table("Pathways", "service", "instances", "server / sidecar image")
        for s in summary.pathways:
            pathways.add_row(_text(f"{s.namespace}/{s.name}"), _text(f"{s.instances} x {s.instance_type}"),
                             _text(s.server_image))
        for i in summary.sidecar_images:
            pathways.add_row(_text(f"sidecar {i.name}"), "", _text(f"{', '.join(i.tags)} (from {i.base_image})"))
        out += ["", pathways]
    out += ["", Text.assemble(("Resources: ", "bold"),
                              visible(", ".join(f"{n} {kind}" for kind, n in summary.resource_counts)))]
    return out


SCALING_NOTE = " Ranges: groups that scale, from their minimum to their maximum."


def nap_text(summary: FleetSummary) -> str:
    return ", ".join(f"{kind} up to {most}" for kind, most in summary.autoprovisioning)


def render_table(plan: Plan, details: bool = False, prices: PriceTable | None = None) -> RenderableType:
    """The summary (when prices are given), then the component tree: each resource with its key properties,
    and with `details` every input as `path = value`."""
    root = Tree(Text.assemble((visible(plan.project), "bold"), "/", (visible(plan.stack), "bold"),
                              f": {len(plan.resources)} resources by component"))
    known = {r.urn for r in plan.resources}
    children: dict[str, list] = {}
    for res in plan.resources:  # in URN order, so siblings always print in the same order
        children.setdefault(res.parent if res.parent in known else "", []).append(res)

    def add(node: Tree, parent_urn: str) -> None:
        for res in children.get(parent_urn, []):
            label = Text.assemble((visible(short_type(res.type)), "cyan"), " ", (visible(res.name), "bold"))
            props = key_properties(res.type, res.read())
            if props:
                label.append("  " + visible(key_text(props)), "green")
            child = node.add(label)
            if details:
                for path, value in _flatten(dict(res.inputs)) if res.inputs else ():
                    child.add(Text.assemble((visible(path), "dim"), " = ", json.dumps(value, sort_keys=True)))
            add(child, res.urn)

    add(root, "")
    if prices is None:
        return root
    return Group(*summary_renderables(summarize(plan), prices), "", root)


def _md_resource_row(r: PlannedResource) -> list[str]:
    return [f"| {md_code(urn_name(r.parent), cell=True)} | {md_code(short_type(r.type), cell=True)} | "
            f"{md_code(r.name, cell=True)} | {md_text(key_text(key_properties(r.type, r.read())))} |"]


def _md_inputs(r: PlannedResource) -> list[str]:
    """Every input of a resource, folded: YAML in a fence no value can close."""
    return [f"<details><summary><code>{html_text(short_type(r.type))}</code> <b>{html_text(r.name)}</b></summary>",
            "", *md_fence(yaml.safe_dump(dict(r.inputs), sort_keys=True), "yaml"), "</details>", ""]


def render_markdown(plan: Plan, prices: PriceTable, max_length: int = GITHUB_COMMENT_MAX) -> str:
    """A PR-ready page of at most `max_length` characters: summary tables and a Mermaid diagram first, resources by
    component, inputs folded; what does not fit is left out whole and named at the top."""
    fold = Folding(max_length)
    fold.add([f"### Plan of {md_code(f'{plan.project}/{plan.stack}')}", ""])
    fold.mark_note()
    summary = summarize(plan)
    if fold.add([*summary_markdown(summary, prices), ""], what="the fleet summary"):
        add_diagram(fold, summary)
    fold.add(["#### Resources by component", "", *table(("Component", "Type", "Name", "Key properties"), [])])
    for r in plan.resources:
        fold.add(functools.partial(_md_resource_row, r), what="resource rows")
    fold.add(["", "<details><summary>Every property of every resource</summary>", ""])
    for r in plan.resources:
        if r.inputs:
            fold.add(functools.partial(_md_inputs, r), what="resources' inputs")
    fold.add(["</details>"])
    return fold.text("`tpuplane plan --format json` (or `--details`) prints everything.")


def render_plan(plan: Plan, fmt: ReportFormat, prices: PriceTable, *, details: bool = False,
                max_length: int = GITHUB_COMMENT_MAX) -> str:
    """A redacted plan in one of `PLAN_FORMATS`, as a file or pipe gets it (a terminal gets `render_table` in
    colour); markdown, a PR comment, within `max_length` characters."""
    if fmt is ReportFormat.JSON:
        return json.dumps(plan.to_json(), indent=2, sort_keys=True, allow_nan=False) + "\n"
    if fmt is ReportFormat.MARKDOWN:
        return render_markdown(plan, prices, max_length)
    if fmt is ReportFormat.HTML:
        return render_html(plan, prices)
    return plain_text(render_table(plan, details=details, prices=prices))
