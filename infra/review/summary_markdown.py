"""The fleet summary as GitHub markdown: tables and a Mermaid diagram, for `plan --format markdown` and the
PR comment of `tpuplane diff`. GitHub renders ```mermaid blocks as diagrams, so a reviewer sees the cluster,
its pool groups, the Kueue flavors over them and the queues that hand out their quota, at a glance.
"""

from __future__ import annotations

import re

from tpuplane.infra.review.fold import Folding
from tpuplane.infra.review.cost import (
    PriceTable, fleet_cost, group_cost, money_range, total, totals_text, unpriced_note,
)
from tpuplane.infra.review.markup import md_code, md_fence, md_text, mermaid_text
from tpuplane.infra.review.summary import FleetSummary, Quota


def table(header: tuple[str, ...], rows: list[tuple[str, ...]], right: int = 0) -> list[str]:
    """A markdown table of cells already written as markdown (`md_text`, `md_code(cell=True)`); the last `right`
    columns are numbers, right-aligned."""
    align = ["---"] * (len(header) - right) + ["---:"] * right
    return ["|" + "|".join(f" {title} " if title else " " for title in header) + "|", "|" + "|".join(align) + "|",
            *("| " + " | ".join(row) + " |" for row in rows)]


def quota_text(quotas: tuple[Quota, ...], flavor: str) -> str:
    return ", ".join(f"{x.resource}={x.nominal}" + (f" (+{x.borrowing_limit})" if x.borrowing_limit else "")
                     for x in quotas if x.flavor == flavor)


def _pool_rows(summary: FleetSummary, prices: PriceTable) -> list[tuple[str, ...]]:
    return [(md_code(g.name, cell=True), md_text(g.tpu_type), md_text(g.machine_type), md_text(g.capacity),
             md_text(g.reservation or "-"), g.slices_text, g.vms_text, g.chips_text, md_text(group_cost(g, prices)))
            for g in summary.pool_groups]


def summary_markdown(summary: FleetSummary, prices: PriceTable, heading: str = "####") -> list[str]:
    """The fleet first: pool groups, chips and cost per generation, queues, Pathways, counts."""
    lines = [f"{heading} TPU fleet", ""]
    if summary.pool_groups:
        lines += table(("Pool group", "TPU type", "Machine type", "Capacity", "Reservation", "Slices", "VMs",
                        "Chips", "Est. monthly"), _pool_rows(summary, prices), right=4)
        costs = fleet_cost(summary, prices)
        unpriced = unpriced_note(costs)
        lines += ["", *table(("Generation", "Capacity", "Chips", "Chip-hours/month", "Est. monthly"),
                             [(md_text(c.generation), md_text(c.capacity), c.chips_text, c.chip_hours_text,
                               md_text(money_range(c.monthly_min, c.monthly, prices.currency))) for c in costs],
                             right=3),
                  "", f"**{totals_text(costs)[0]} TPU chips, est. "
                      f"{md_text(money_range(total(costs, minimum=True), total(costs), prices.currency))}/month"
                      f"{md_text(f' ({unpriced})' if unpriced else '')}.** "
                      f"_{md_text(prices.note)}_"]
    else:
        lines.append("No TPU node pools.")
    if summary.cpu_pools:
        lines += ["", "CPU pools: " + ", ".join(f"{md_code(c.name)} ({md_text(c.machine_type)}, {md_text(c.nodes)} "
                                                "nodes)" for c in summary.cpu_pools)]
    if summary.queues:
        lines += ["", f"{heading} Queues", "", *table(
            ("ClusterQueue", "Cohort", "Flavor", "Quota", "LocalQueues"),
            [(md_code(q.name, cell=True), md_text(q.cohort or "-"), md_code(flavor, cell=True),
              md_text(quota_text(q.quotas, flavor)), md_text(", ".join(q.local_queues) or "-"))
             for q in summary.queues for flavor in q.flavors])]
    if summary.autoprovisioning:
        lines += ["", "Node auto-provisioning: " + ", ".join(f"{md_code(kind)} up to {most}"
                                                            for kind, most in summary.autoprovisioning)]
    if summary.storage:
        lines += ["", f"{heading} Storage", "", *table(
            ("Storage", "Kind", "Location", "Access", "Namespaces"),
            [(md_code(v.name, cell=True), md_text(v.kind_text), md_code(v.location, cell=True),
              "read-only" if v.read_only else "read-write", md_text(", ".join(v.namespaces)))
             for v in summary.storage])]
    if summary.grants:
        lines += ["", f"{heading} IAM grants", "", *table(
            ("Member", "Role", "On"), [(md_code(g.member, cell=True), md_code(g.role, cell=True),
                                        md_code(g.target, cell=True)) for g in summary.grants])]
    if summary.dashboards:
        lines += ["", "Dashboards: " + ", ".join(md_code(title) for title in summary.dashboards)]
    if summary.pathways or summary.sidecar_images:
        lines += ["", f"{heading} Pathways", ""]
        lines += [f"- service {md_code(s.namespace + '/' + s.name)}: {md_text(s.instances)} x "
                  f"{md_code(s.instance_type)}, server {md_code(s.server_image)}" for s in summary.pathways]
        lines += [f"- sidecar image {md_code(', '.join(i.tags))} from {md_code(i.base_image)}"
                  for i in summary.sidecar_images]
    lines += ["", f"{heading} Resources", "",
              ", ".join(f"{n} {md_text(kind)}" for kind, n in summary.resource_counts) + "."]
    if summary.config_objects:
        lines += ["", "ConfigGroup objects: " + ", ".join(
            f"{md_code(kind + '/' + name)}" for _, kind, name in summary.config_objects) + "."]
    return lines


class _NodeIds:
    """Mermaid node ids: one per (kind, name), distinct even when two names differ only in characters an id
    cannot hold (`a-b`, `a_b`), and never a Mermaid keyword (`end`)."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], str] = {}
        self._taken: set[str] = set()

    def __call__(self, kind: str, name: str) -> str:
        key = (kind, name)
        if key not in self._ids:
            base = f"{kind}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"
            node_id = next(f"{base}_{n}" if n else base for n in range(len(self._taken) + 1)
                           if (f"{base}_{n}" if n else base) not in self._taken)
            self._ids[key] = node_id
            self._taken.add(node_id)
        return self._ids[key]


MERMAID_MAX_TEXT = 50_000  # Mermaid's default maxTextSize: a longer diagram shows as an error, not a drawing


def add_diagram(fold: Folding, summary: FleetSummary) -> None:
    """The diagram, when Mermaid would draw it and it fits."""
    diagram = mermaid(summary)
    if sum(len(line) + 1 for line in diagram) > MERMAID_MAX_TEXT:
        fold.skip("the diagram (more than Mermaid draws)")
    else:
        fold.add([*diagram, ""], what="the diagram")


def mermaid(summary: FleetSummary) -> list[str]:
    """cluster -> pool groups -> flavors -> ClusterQueues -> LocalQueues, as a ```mermaid block."""
    node, label = _NodeIds(), mermaid_text
    lines = ["flowchart LR"]
    root = node("cluster", summary.cluster or summary.stack)
    lines.append(f'  {root}["cluster {label(summary.cluster or summary.stack)}"]')
    for g in summary.pool_groups:
        lines.append(f'  {node("pool", g.name)}["{label(g.name)}<br/>{g.slices_text} x {label(g.tpu_type)}<br/>'
                     f'{g.chips_text} chips, {label(g.capacity)}"]')
        lines.append(f'  {root} --> {node("pool", g.name)}')
    for c in summary.cpu_pools:
        lines.append(f'  {node("pool", c.name)}["{label(c.name)}<br/>{label(c.machine_type)}, {label(c.nodes)} '
                     'nodes"]')
        lines.append(f'  {root} --> {node("pool", c.name)}')
    for f in summary.flavors:
        lines.append(f'  {node("flavor", f.name)}(["flavor {label(f.name)}"])')
        lines += [f'  {node("pool", pool)} --> {node("flavor", f.name)}' for pool in f.pools]
    for q in summary.queues:
        cohort = f"<br/>cohort {label(q.cohort)}" if q.cohort else ""
        lines.append(f'  {node("cq", q.name)}[/"ClusterQueue {label(q.name)}{cohort}"/]')
        for flavor in q.flavors:
            quota = ", ".join(f"{x.resource}={x.nominal}" for x in _edge_quotas(q.quotas, flavor))
            lines.append(f'  {node("flavor", flavor)} -- "{label(quota)}" --> {node("cq", q.name)}')
        for local in q.local_queues:
            lines.append(f'  {node("lq", local)}("LocalQueue {label(local)}")')
            lines.append(f'  {node("cq", q.name)} --> {node("lq", local)}')
    return md_fence("\n".join(lines), "mermaid")


def _edge_quotas(quotas, flavor: str) -> list:
    """What a flavor -> ClusterQueue edge says: the TPU quota of a TPU flavor (its cpu and memory follow from its
    host VMs), otherwise the flavor's non-zero quotas (the CPU flavor holds no TPU)."""
    own = [x for x in quotas if x.flavor == flavor]
    tpu = [x for x in own if x.resource == "google.com/tpu" and x.nominal != "0"]
    return tpu or [x for x in own if x.nominal != "0"] or own
