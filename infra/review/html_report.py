"""`tpuplane plan --format html`: the fleet as one self-contained page (inline CSS, SVG and a little JS; no
network access, so it opens from a CI artifact or a mail attachment as it is).

The fleet is drawn as one block per slice, its area proportional to its chips and its colour its capacity
mode, so a reservation of 4 x v5p-128 and two flex-start v6e-8 look as different as they are. Below: queues
and their quotas, then every resource with its key properties and, folded, all its inputs.

Pure and deterministic: a summary and resources in, one HTML string out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from tpuplane.infra.quantity import whole_amount
from tpuplane.infra.review.cost import PriceTable, fleet_cost, money_range, total, totals_text, unpriced_note
from tpuplane.infra.review.markup import html_text as _e
from tpuplane.infra.review.plan import Plan, PlannedResource
from tpuplane.infra.review.summary import (
    FleetSummary, key_properties, key_text, range_text, short_type, summarize, urn_name,
)

CAPACITY_COLOURS = {"reservation": "#2e7d32", "on-demand": "#1565c0", "flex-start": "#8e24aa",
                    "queued": "#6a1b9a", "spot": "#ef6c00"}
_LABEL_WIDTH = 250
_ROW_WIDTH = 660
_MAX_SIDE = 120
_MIN_SIDE = 10
_GAP = 6

_CSS = """
:root { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328; }
body { margin: 24px auto; max-width: 1000px; padding: 0 16px; }
h1 { font-size: 1.5em; margin-bottom: 4px; } h2 { font-size: 1.15em; margin-top: 28px; }
.sub { color: #57606a; margin: 0 0 12px; }
.totals { display: flex; gap: 16px; flex-wrap: wrap; margin: 12px 0; }
.card { border: 1px solid #d0d7de; border-radius: 8px; padding: 10px 16px; min-width: 140px; }
.card b { display: block; font-size: 1.4em; }
.note { color: #57606a; font-size: 0.85em; }
table { border-collapse: collapse; width: 100%; font-size: 0.9em; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid #d8dee4; vertical-align: top; }
th { background: #f6f8fa; } td.num, th.num { text-align: right; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.9em; overflow-wrap: break-word; }
td.type code { white-space: nowrap; }
.legend span { display: inline-block; margin-right: 14px; font-size: 0.85em; }
.legend i { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 4px;
  vertical-align: -1px; }
.bar { background: #eaeef2; border-radius: 3px; height: 8px; width: 140px; display: inline-block; }
.bar i { display: block; height: 8px; border-radius: 3px; background: #1565c0; }
svg text { font-size: 12px; fill: #1f2328; } svg text.slice-label { fill: #fff; font-size: 11px; }
input#filter { padding: 5px 8px; width: 280px; margin-bottom: 8px; border: 1px solid #d0d7de; border-radius: 6px; }
details pre { background: #f6f8fa; padding: 8px; overflow-x: auto; font-size: 0.8em; }
"""

_JS = """
(function () {
  var input = document.getElementById('filter');
  function apply() {
    var needle = input.value.toLowerCase();
    var shown = 0;
    document.querySelectorAll('#resources tr.resource').forEach(function (row) {
      var match = row.dataset.search.indexOf(needle) !== -1;
      row.hidden = !match;
      if (match) { shown += 1; }
    });
    document.getElementById('shown').textContent = String(shown);
  }
  input.addEventListener('input', apply);
  // fleet.html#NodePool opens with the list filtered: a link can point at what a reviewer should look at.
  // A fragment that is not valid percent-encoding (`#%E0%A4%A`) filters by its text as it is.
  var fragment = window.location.hash.slice(1);
  try { input.value = decodeURIComponent(fragment); } catch (error) { input.value = fragment; }
  apply();
})();
"""

def _side(chips: int, largest: int) -> float:
    """A slice's square side: area proportional to chips, the largest slice _MAX_SIDE wide."""
    return max(_MIN_SIDE, _MAX_SIDE * math.sqrt(chips / largest)) if largest else _MIN_SIDE


def fleet_svg(summary: FleetSummary) -> str:
    """One row per pool group, one square per slice, coloured by capacity mode."""
    largest = max((g.chips_per_slice for g in summary.pool_groups), default=0)
    rows, y = [], 0.0
    for g in summary.pool_groups:
        side = _side(g.chips_per_slice, largest)
        per_row = max(1, int((_ROW_WIDTH + _GAP) // (side + _GAP)))
        lines = math.ceil(g.slices / per_row)
        height = max(lines * (side + _GAP), 48.0)
        colour = CAPACITY_COLOURS.get(g.capacity, "#57606a")
        parts = [f'<g class="pool-group" data-group="{_e(g.name)}" data-chips="{g.chips}" '
                 f'data-capacity="{_e(g.capacity)}" data-slices="{_e(g.slices_text)}">',
                 f'<text x="0" y="{y + 16:.1f}" font-weight="600">{_e(g.name)}</text>',
                 f'<text x="0" y="{y + 32:.1f}">{_e(g.slices_text)} x {_e(g.tpu_type)} · {g.chips_text} chips</text>',
                 f'<text x="0" y="{y + 46:.1f}" fill="{colour}">{_e(g.capacity)}'
                 f'{" " + _e(g.reservation) if g.reservation else ""}</text>']
        for i in range(g.slices):
            x = _LABEL_WIDTH + (i % per_row) * (side + _GAP)
            top = y + (i // per_row) * (side + _GAP)
            held = not g.held or g.held[i]  # a slice that scales from zero is drawn faint
            parts.append(f'<rect class="slice" x="{x:.1f}" y="{top:.1f}" width="{side:.1f}" height="{side:.1f}" '
                         f'rx="3" fill="{colour}" fill-opacity="{1 if held else 0.35}" data-chips="{g.chips_per_slice}" '
                         f'data-held="{str(held).lower()}"><title>{_e(g.node_pools[i])}: '
                         f'{_e(g.tpu_type)}, {g.chips_per_slice} chips, {g.vms_per_slice} VMs, '
                         f'{_e(g.capacity)}{"" if held else ", scales from zero"}</title></rect>')
            if side >= 60:
                parts.append(f'<text class="slice-label" x="{x + 6:.1f}" y="{top + 17:.1f}">'
                             f'{_e(g.node_pools[i])}</text><text class="slice-label" x="{x + 6:.1f}" '
                             f'y="{top + 32:.1f}">{g.chips_per_slice} chips</text>')
        parts.append("</g>")
        rows.append("".join(parts))
        y += height + 14
    if not rows:
        return '<p class="note">No TPU node pools.</p>'
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="TPU fleet" '
            f'width="{_LABEL_WIDTH + _ROW_WIDTH}" height="{y:.0f}" viewBox="0 0 {_LABEL_WIDTH + _ROW_WIDTH} '
            f'{y:.0f}">{"".join(rows)}</svg>')


def _legend(summary: FleetSummary) -> str:
    modes = sorted({g.capacity for g in summary.pool_groups})
    return '<p class="legend">' + "".join(
        f'<span><i style="background:{CAPACITY_COLOURS.get(m, "#57606a")}"></i>{_e(m)}</span>' for m in modes) + "</p>"


def _queues(summary: FleetSummary) -> str:
    if not summary.queues:
        return '<p class="note">No Kueue ClusterQueues.</p>'
    flavor_chips = {f.name: sum(g.chips for g in summary.pool_groups if g.name in f.pools) for f in summary.flavors}
    rows = []
    for q in summary.queues:
        for x in q.quotas:
            bar = ""
            capacity = flavor_chips.get(x.flavor, 0)
            chips = whole_amount(x.nominal) if x.resource == "google.com/tpu" else None
            if capacity and chips is not None:
                share = min(1.0, chips / capacity)
                bar = (f'<span class="bar" title="{chips} of {capacity} chips">'
                       f'<i style="width:{share * 100:.0f}%"></i></span>')
            rows.append(f"<tr><td><code>{_e(q.name)}</code></td><td>{_e(q.cohort or '-')}</td>"
                        f"<td><code>{_e(x.flavor)}</code></td><td>{_e(x.resource)}</td>"
                        f'<td class="num">{_e(x.nominal)}</td><td class="num">{_e(x.borrowing_limit or "-")}</td>'
                        f"<td>{bar}</td><td>{_e(', '.join(q.local_queues) or '-')}</td></tr>")
    return ("<table><thead><tr><th>ClusterQueue</th><th>Cohort</th><th>Flavor</th><th>Resource</th>"
            '<th class="num">Quota</th><th class="num">Borrowable</th><th>Share of flavor</th>'
            "<th>LocalQueues</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _costs(summary: FleetSummary, prices: PriceTable) -> str:
    lines = fleet_cost(summary, prices)
    unpriced = unpriced_note(lines)
    rows = "".join(
        f'<tr><td>{_e(c.generation)}</td><td><i style="color:{CAPACITY_COLOURS.get(c.capacity, "#57606a")}">'
        f'&#9632;</i> {_e(c.capacity)}</td><td class="num">{c.chips_text}'
        f'</td><td class="num">{c.chip_hours_text}</td>'
        f'<td class="num">{_e(money_range(c.monthly_min, c.monthly, prices.currency))}</td></tr>' for c in lines)
    return ('<table id="costs"><thead><tr><th>Generation</th><th>Capacity</th><th class="num">Chips</th>'
            '<th class="num">Chip-hours / month</th><th class="num">Est. monthly</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>"
            + (f'<p class="note unpriced">The total is {_e(unpriced)}.</p>' if unpriced else "")
            + f'<p class="note">{_e(prices.note)}</p>')


def _access(summary: FleetSummary) -> str:
    """Storage the teams mount, and every IAM grant of the plan."""
    parts = []
    if summary.storage:
        parts.append("<h3>Storage</h3><table id=\"storage\"><thead><tr><th>Storage</th><th>Kind</th><th>Location</th>"
                     "<th>Access</th><th>Namespaces</th></tr></thead><tbody>" + "".join(
                         f"<tr><td><code>{_e(v.name)}</code></td><td>{_e(v.kind_text)}</td><td><code>{_e(v.location)}"
                         f"</code></td><td>{'read-only' if v.read_only else 'read-write'}</td>"
                         f"<td>{_e(', '.join(v.namespaces))}</td></tr>" for v in summary.storage) + "</tbody></table>")
    if summary.grants:
        parts.append("<h3>IAM grants</h3><table id=\"grants\"><thead><tr><th>Member</th><th>Role</th><th>On</th>"
                     "</tr></thead><tbody>" + "".join(
                         f"<tr><td><code>{_e(g.member)}</code></td><td><code>{_e(g.role)}</code></td>"
                         f"<td><code>{_e(g.target)}</code></td></tr>" for g in summary.grants) + "</tbody></table>")
    return "".join(parts)


def _monitoring(summary: FleetSummary) -> str:
    items = [f"<li>node auto-provisioning: <code>{_e(kind)}</code> up to {_e(most)}</li>"
             for kind, most in summary.autoprovisioning]
    items += [f"<li>dashboard <code>{_e(title)}</code></li>" for title in summary.dashboards]
    return f"<ul>{''.join(items)}</ul>" if items else ""


def _resources(resources: Sequence[PlannedResource]) -> str:
    rows = []
    for r in resources:
        props = key_text(key_properties(r.type, r.read()))
        inputs = json.dumps(dict(r.inputs), indent=2, sort_keys=True) if r.inputs else ""
        folded = f"<details><summary>inputs</summary><pre>{_e(inputs, lines=True)}</pre></details>" if inputs else ""
        search = " ".join((urn_name(r.parent), short_type(r.type), r.name, props)).lower()
        rows.append(f'<tr class="resource" data-type="{_e(short_type(r.type))}" data-search="{_e(search)}">'
                    f'<td><code>{_e(urn_name(r.parent))}</code></td><td class="type"><code>'
                    f"{_e(short_type(r.type))}</code></td><td><code>{_e(r.name)}</code></td><td>{_e(props)}{folded}"
                    "</td></tr>")
    return ('<input id="filter" type="search" placeholder="Filter resources" aria-label="Filter resources"> '
            f'<span class="note"><span id="shown">{len(resources)}</span> of {len(resources)} shown</span>'
            '<table id="resources"><thead><tr><th>Component</th><th>Type</th><th>Name</th>'
            "<th>Key properties</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def render_html(plan: Plan, prices: PriceTable) -> str:
    """A redacted plan as one page."""
    summary, items = summarize(plan), plan.resources
    costs = fleet_cost(summary, prices)
    slices = range_text(sum(g.fewest_slices for g in summary.pool_groups), sum(g.slices for g in summary.pool_groups))
    cards = [("TPU chips", totals_text(costs)[0]), ("slices", slices),
             ("est. per month", money_range(total(costs, minimum=True), total(costs), prices.currency)),
             ("resources", str(len(items)))]
    pathways = "".join(
        f"<li>service <code>{_e(s.namespace)}/{_e(s.name)}</code>: {_e(s.instances)} x "
        f"<code>{_e(s.instance_type)}</code>, server <code>{_e(s.server_image)}</code></li>"
        for s in summary.pathways) + "".join(
        f"<li>sidecar image <code>{_e(', '.join(i.tags))}</code> from <code>{_e(i.base_image)}</code></li>"
        for i in summary.sidecar_images)
    config_objects = ", ".join(f"<code>{_e(kind)}/{_e(name)}</code>" for _, kind, name in summary.config_objects)
    title = f"{summary.project}/{summary.stack}"
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>tpuplane plan {_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Plan of <code>{_e(title)}</code></h1>",
        f'<p class="sub">cluster {_e(summary.cluster or "-")} · generated offline by <code>tpuplane plan</code></p>',
        '<div class="totals">' + "".join(f'<div class="card"><b>{_e(v)}</b>{_e(k)}</div>' for k, v in cards)
        + "</div>",
        '<section id="fleet"><h2>TPU fleet</h2>', _legend(summary), fleet_svg(summary), _costs(summary, prices),
        "</section>",
        '<section id="queues"><h2>Queues</h2>', _queues(summary), "</section>",
        *([f'<section id="access"><h2>Storage and access</h2>{access}</section>'] if (access := _access(summary))
          else []),
        *([f'<section id="fleet-extras"><h2>Autoscaling and monitoring</h2>{extras}</section>']
          if (extras := _monitoring(summary)) else []),
        *([f'<section id="pathways"><h2>Pathways</h2><ul>{pathways}</ul></section>'] if pathways else []),
        '<section id="resource-list"><h2>Resources</h2>',
        '<p class="note">' + _e(", ".join(f"{n} {kind}" for kind, n in summary.resource_counts)) + "</p>",
        *([f'<p class="note">ConfigGroup objects: {config_objects}</p>'] if config_objects else []),
        _resources(items), "</section>",
        f"<script>{_JS}</script>", "</body></html>", ""])
