"""Render a `PlanDiff` as a PR comment (markdown), a terminal report (text) or JSON for other tools.

Markdown is made to be read in a PR: the counts, the TPU impact and one row per resource first, the
property-level details folded in `<details>` blocks. Every format is deterministic (sorted input, sorted
keys), so re-posting the comment on an unchanged PR produces the same bytes, and secrets were already
redacted by the diff.
"""

from __future__ import annotations

import html
import json
from typing import Any

from tpuplane.infra.review.report_format import ReportFormat
from tpuplane.infra.review.impact import (
    DiffContext,
    cost_json,
    cost_markdown,
    cost_text,
    fleet_markdown,
    grant_changes,
    key_text,
)
from tpuplane.infra.review.plan_diff import Action, PlanDiff, PropertyChange, ResourceChange, TpuImpact
from tpuplane.infra.review.summary import short_type


_SYMBOL = {Action.CREATE: "+", Action.UPDATE: "~", Action.REPLACE: "+-", Action.DELETE: "-"}
_PROPERTY_SYMBOL = {"add": "+", "remove": "-", "change": "~"}
_IMPACT_COLUMNS = (
    ("slices_added", "Slices added"), ("slices_removed", "Slices removed"),
    ("slices_recreated", "Slices recreated"), ("chips_added", "Chips added"),
    ("chips_removed", "Chips removed"), ("chips_recreated", "Chips recreated"),
)
_MAX_VALUE = 80


def _value(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 1] + "…"


def _summary_line(diff: PlanDiff) -> str:
    counts = ", ".join(f"{diff.count(a)} to {a.value}" for a in Action)
    return f"{len(diff.changes)} change{'s' if len(diff.changes) != 1 else ''}: {counts}"


def _stacks(diff: PlanDiff) -> str:
    base, head = "/".join(diff.base), "/".join(diff.head)
    return base if base == head else f"{base} -> {head}"


# ---------------------------------------------------------------------------------------------------------
# markdown


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{_cell(text).replace('`', chr(39))}`"


def _md_impact(impacts: tuple[TpuImpact, ...]) -> list[str]:
    if not impacts:
        return ["No TPU slice is added, removed or recreated."]
    lines = ["| TPU generation | " + " | ".join(title for _, title in _IMPACT_COLUMNS) + " |",
             "|---|" + "---:|" * len(_IMPACT_COLUMNS)]
    for row in impacts:
        lines.append(f"| {row.generation} | " + " | ".join(str(getattr(row, f)) for f, _ in _IMPACT_COLUMNS) + " |")
    return lines


def _md_resources(changes: tuple[ResourceChange, ...], context: DiffContext | None = None) -> list[str]:
    """Changed resources show their changed paths; created and deleted ones their key properties."""
    lines = ["| | Resource | Type | Properties |", "|---|---|---|---|"]
    for c in changes:
        action = f"**{c.action.value}**" if c.action in (Action.REPLACE, Action.DELETE) else c.action.value
        paths = ", ".join(_code(p.path) for p in c.properties) or _cell(
            key_text(context.key_properties(c)) if context else "")
        lines.append(f"| {_code(_SYMBOL[c.action])} {action} | {_code(c.name)} | {_code(short_type(c.type))} "
                     f"| {paths} |")
    return lines


def _md_details(change: ResourceChange) -> list[str]:
    lines = [
        "<details>",
        f"<summary>{_SYMBOL[change.action]} {change.action.value} <code>{html.escape(change.name)}</code> "
        f"({short_type(change.type)}): {len(change.properties)} propert"
        f"{'y' if len(change.properties) == 1 else 'ies'}</summary>",
        "",
        f"URN: {_code(change.urn)}",
        "",
        "| | Property | Before | After | Forces replacement |",
        "|---|---|---|---|---|",
    ]
    for p in change.properties:
        before = "" if p.kind == "add" else _code(_value(p.before))
        after = "" if p.kind == "remove" else _code(_value(p.after))
        lines.append(f"| {_PROPERTY_SYMBOL[p.kind]} | {_code(p.path)} | {before} | {after} | {_cell(p.replaces)} |")
    return [*lines, "", "</details>"]


def render_markdown(diff: PlanDiff, context: DiffContext | None = None) -> str:
    lines = [f"### tpuplane diff: {_code(_stacks(diff))}", ""]
    if not diff.has_changes:
        return "\n".join([*lines, "No changes."]) + "\n"
    lines += [f"**{_summary_line(diff)}.**", ""]
    replaced = [c for c in diff.changes if c.action is Action.REPLACE]
    if replaced:
        names = ", ".join(f"{_code(c.name)} ({short_type(c.type)})" for c in replaced)
        lines += ["> [!WARNING]", f"> {len(replaced)} resource{'s' if len(replaced) != 1 else ''} will be "
                  f"replaced: {names}. A replaced TPU node pool is a slice torn down and provisioned again.", ""]
    lines += ["#### TPU impact", "", *_md_impact(diff.tpu_impact), ""]
    if context and (grants := grant_changes(diff, context)):
        lines += ["#### IAM grants", "", *(f"- {_code(_SYMBOL[g.action])} {g.action.value}: {_code(g.text)}"
                                          for g in grants), ""]
    if context:
        lines += ["#### Estimated cost", "", *cost_markdown(context), ""]
    lines += ["#### Resources", "", *_md_resources(diff.changes, context), ""]
    if context:
        lines += [*fleet_markdown(context), ""]
    for change in diff.changes:
        if change.properties:
            lines += [*_md_details(change), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------------------------
# text


def _text_property(p: PropertyChange) -> str:
    if p.kind == "add":
        line = f"      + {p.path}: {_value(p.after)}"
    elif p.kind == "remove":
        line = f"      - {p.path}: {_value(p.before)}"
    else:
        line = f"      ~ {p.path}: {_value(p.before)} => {_value(p.after)}"
    return f"{line}  [forces replacement: {p.replaces}]" if p.replaces else line


def render_text(diff: PlanDiff, context: DiffContext | None = None) -> str:
    lines = [f"tpuplane diff {_stacks(diff)}"]
    if not diff.has_changes:
        return "\n".join([*lines, "No changes."]) + "\n"
    for c in diff.changes:
        lines.append(f"  {_SYMBOL[c.action]:<2} {short_type(c.type)} {c.name} ({c.action.value})")
        lines += [_text_property(p) for p in c.properties]
        if context and context.key_properties(c):
            lines.append(f"      {key_text(context.key_properties(c))}")
    lines.append("TPU impact:")
    if not diff.tpu_impact:
        lines.append("  none")
    for row in diff.tpu_impact:
        lines.append(f"  {row.generation}: slices +{row.slices_added} -{row.slices_removed} "
                     f"recreated {row.slices_recreated}; chips +{row.chips_added} -{row.chips_removed} "
                     f"recreated {row.chips_recreated}")
    if context and (grants := grant_changes(diff, context)):
        lines += ["IAM grants:", *(f"  {_SYMBOL[g.action]:<2} {g.text}" for g in grants)]
    if context:
        lines += cost_text(context)
    lines.append(_summary_line(diff))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------
# json


def diff_to_dict(diff: PlanDiff, context: DiffContext | None = None) -> dict[str, Any]:
    """camelCase, like the plan file."""
    extra = {} if context is None else {
        "costImpact": cost_json(context),
        "grantChanges": [{"action": g.action.value, "member": g.grant.member, "role": g.grant.role,
                          "roleBefore": g.before or None, "on": g.grant.target} for g in grant_changes(diff, context)]}
    return {**extra,
        "base": {"project": diff.base[0], "stack": diff.base[1]},
        "head": {"project": diff.head[0], "stack": diff.head[1]},
        "summary": {a.value: diff.count(a) for a in Action},
        "tpuImpact": [
            {"generation": row.generation, **{_camel(f): getattr(row, f) for f, _ in _IMPACT_COLUMNS}}
            for row in diff.tpu_impact
        ],
        "changes": [
            {"urn": c.urn, "type": c.type, "name": c.name, "action": c.action.value,
             **({"keyProperties": dict(context.key_properties(c))} if context else {}),
             "properties": [{"path": p.path, "kind": p.kind, "before": p.before, "after": p.after,
                             "replaces": p.replaces} for p in c.properties]}
            for c in diff.changes
        ],
    }


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.title() for part in rest)


def render_json(diff: PlanDiff, context: DiffContext | None = None) -> str:
    return json.dumps(diff_to_dict(diff, context), indent=2, sort_keys=True) + "\n"


def render(diff: PlanDiff, fmt: ReportFormat | str = ReportFormat.MARKDOWN, context: DiffContext | None = None
           ) -> str:
    """`context` (from the same two plans) adds key properties, the estimated cost and the fleet after."""
    renderers = {ReportFormat.MARKDOWN: render_markdown, ReportFormat.TEXT: render_text,
                 ReportFormat.JSON: render_json}
    return renderers[ReportFormat(fmt)](diff, context)
