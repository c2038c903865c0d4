"""The fleet summary as GitHub markdown: tables and a Mermaid diagram, for `plan --format markdown` and the
PR comment of `tpuplane diff`. GitHub renders ```mermaid blocks as diagrams, so a reviewer sees the cluster,
its pool groups, the Kueue flavors over them and the queues that hand out their quota, at a glance.
"""

from __future__ import annotations

import re

from tpuplane.infra.review.cost import PriceTable, fleet_cost, group_cost, money_range, total
from tpuplane.infra.review.summary import FleetSummary


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def code(text: object) -> str:
    return f"`{cell(text).replace('`', chr(39))}`" if str(text) else ""


def _table(header: tuple[str, ...], rows: list[tuple[object, ...]], right: int = 0) -> list[str]:
    """A markdown table; the last `right` columns are numbers, right-aligned."""
    align = ["---"] * (len(header) - right) + ["---:"] * right
    return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|",
            *("| " + " | ".join(cell(v) for v in row) + " |" for row in rows)]


def pool_rows(summary: FleetSummary, prices: PriceTable) -> list[tuple[object, ...]]:
    return [(code(g.name), g.tpu_type, g.machine_type, g.capacity, g.reservation or "-", g.slices_text, g.vms,
             g.chips, group_cost(g, prices)) for g in summary.pool_groups]


def summary_markdown(summary: FleetSummary, prices: PriceTable, heading: str = "####") -> list[str]:
    """The fleet first: pool groups, chips and cost per generation, queues, Pathways, counts."""
    lines = [f"{heading} TPU fleet", ""]
    if summary.pool_groups:
        lines += _table(("Pool group", "TPU type", "Machine type", "Capacity", "Reservation", "Slices", "VMs",
                         "Chips", "Est. monthly"), pool_rows(summary, prices), right=4)
        costs = fleet_cost(summary, prices)
        lines += ["", *_table(("Generation", "Capacity", "Chips", "Chip-hours/month", "Est. monthly"),
                              [(c.generation, c.capacity, f"{c.min_chips}-{c.chips}" if c.scales else c.chips,
                                f"{c.chip_hours:,.0f}", money_range(c.monthly_min, c.monthly, prices.currency))
                               for c in costs], right=3),
                  "", f"**{sum(summary.chips_by_generation().values())} TPU chips, est. "
                      f"{money_range(total(costs, minimum=True), total(costs), prices.currency)}/month.** "
                      f"_{cell(prices.note)}_"]
    else:
        lines.append("No TPU node pools.")
    if summary.cpu_pools:
        lines += ["", "CPU pools: " + ", ".join(f"{code(c.name)} ({c.machine_type}, {c.nodes} nodes)"
                                                for c in summary.cpu_pools)]
    if summary.queues:
        lines += ["", f"{heading} Queues", "", *_table(
            ("ClusterQueue", "Cohort", "Flavor", "Quota", "LocalQueues"),
            [(code(q.name), q.cohort or "-", code(flavor),
              ", ".join(f"{x.resource}={x.nominal}" + (f" (+{x.borrowing_limit})" if x.borrowing_limit else "")
                        for x in q.quotas if x.flavor == flavor),
              ", ".join(q.local_queues) or "-") for q in summary.queues for flavor in q.flavors])]
    if summary.autoprovisioning:
        lines += ["", "Node auto-provisioning: " + ", ".join(f"{code(kind)} up to {most}"
                                                            for kind, most in summary.autoprovisioning)]
    if summary.storage:
        lines += ["", f"{heading} Storage", "", *_table(
            ("Storage", "Kind", "Location", "Access", "Namespaces"),
            [(code(v.name), v.kind, code(v.location), "read-only" if v.read_only else "read-write",
              ", ".join(v.namespaces)) for v in summary.storage])]
    if summary.grants:
        lines += ["", f"{heading} IAM grants", "", *_table(
            ("Member", "Role", "On"), [(code(g.member), code(g.role), code(g.target)) for g in summary.grants])]
    if summary.dashboards:
        lines += ["", "Dashboards: " + ", ".join(code(title) for title in summary.dashboards)]
    if summary.pathways or summary.sidecar_images:
        lines += ["", f"{heading} Pathways", ""]
        lines += [f"- service {code(s.namespace + '/' + s.name)}: {s.instances} x {code(s.instance_type)}, "
                  f"server {code(s.server_image)}" for s in summary.pathways]
        lines += [f"- sidecar image {code(', '.join(i.tags))} from {code(i.base_image)}"
                  for i in summary.sidecar_images]
    lines += ["", f"{heading} Resources", "",
              ", ".join(f"{n} {kind}" for kind, n in summary.resource_counts) + "."]
    if summary.config_objects:
        lines += ["", "ConfigGroup objects: " + ", ".join(
            f"{code(kind + '/' + name)}" for _, kind, name in summary.config_objects) + "."]
    return lines


def _node_id(kind: str, name: str) -> str:
    return f"{kind}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"


def _label(text: str) -> str:
    return text.replace('"', "'")


def mermaid(summary: FleetSummary) -> list[str]:
    """cluster -> pool groups -> flavors -> ClusterQueues -> LocalQueues, as a ```mermaid block."""
    lines = ["```mermaid", "flowchart LR"]
    root = _node_id("cluster", summary.cluster or summary.stack)
    lines.append(f'  {root}["cluster {_label(summary.cluster or summary.stack)}"]')
    for g in summary.pool_groups:
        lines.append(f'  {_node_id("pool", g.name)}["{_label(g.name)}<br/>{g.slices_text} x {g.tpu_type}<br/>'
                     f'{g.chips} chips, {g.capacity}"]')
        lines.append(f'  {root} --> {_node_id("pool", g.name)}')
    for c in summary.cpu_pools:
        lines.append(f'  {_node_id("pool", c.name)}["{_label(c.name)}<br/>{c.machine_type}, {c.nodes} nodes"]')
        lines.append(f'  {root} --> {_node_id("pool", c.name)}')
    for f in summary.flavors:
        lines.append(f'  {_node_id("flavor", f.name)}(["flavor {_label(f.name)}"])')
        lines += [f'  {_node_id("pool", pool)} --> {_node_id("flavor", f.name)}' for pool in f.pools]
    for q in summary.queues:
        cohort = f"<br/>cohort {q.cohort}" if q.cohort else ""
        lines.append(f'  {_node_id("cq", q.name)}[/"ClusterQueue {_label(q.name)}{cohort}"/]')
        for flavor in q.flavors:
            quota = ", ".join(f"{x.resource}={x.nominal}" for x in _edge_quotas(q.quotas, flavor))
            lines.append(f'  {_node_id("flavor", flavor)} -- "{_label(quota)}" --> {_node_id("cq", q.name)}')
        for local in q.local_queues:
            lines.append(f'  {_node_id("lq", local)}("LocalQueue {_label(local)}")')
            lines.append(f'  {_node_id("cq", q.name)} --> {_node_id("lq", local)}')
    lines.append("```")
    return lines


def _edge_quotas(quotas, flavor: str) -> list:
    """What a flavor -> ClusterQueue edge says: the TPU quota of a TPU flavor (its cpu and memory follow from its
    host VMs), otherwise the flavor's non-zero quotas (the CPU flavor holds no TPU)."""
    own = [x for x in quotas if x.flavor == flavor]
    tpu = [x for x in own if x.resource == "google.com/tpu" and x.nominal != "0"]
    return tpu or [x for x in own if x.nominal != "0"] or own
