"""Render a `PlanDiff` as a PR comment (markdown), a terminal report (text) or JSON for other tools.

Markdown is made to be read in a PR: the counts, the TPU impact and one row per resource first, the
property-level details folded in `<details>` blocks, the whole within GitHub's comment limit (`fold`: what does not
fit is left out whole and named). Every format is deterministic (sorted input, sorted keys), so re-posting the
comment on an unchanged PR produces the same bytes, and secrets were already redacted by the diff.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from tpuplane.infra.review.fold import GITHUB_COMMENT_MAX, Folding
from tpuplane.infra.review.report_format import ReportFormat
from tpuplane.infra.review.impact import DiffContext, add_fleet, cost_json, cost_markdown, cost_text, grant_changes
from tpuplane.infra.review.markup import html_text, md_code, md_text, visible
from tpuplane.infra.review.plan_diff import Action, PlanDiff, PropertyChange, ResourceChange, TpuImpact
from tpuplane.infra.review.summary import key_text, short_type
from tpuplane.infra.review.summary_markdown import table


_SYMBOL = {Action.CREATE: "+", Action.UPDATE: "~", Action.REPLACE: "+-", Action.DELETE: "-"}
_PROPERTY_SYMBOL = {"add": "+", "remove": "-", "change": "~"}
_IMPACT_COLUMNS = (
    ("slices_added", "Slices added"), ("slices_removed", "Slices removed"),
    ("slices_recreated", "Slices recreated"), ("chips_added", "Chips added"),
    ("chips_removed", "Chips removed"), ("chips_recreated", "Chips recreated"),
)
_MAX_VALUE = 80
_PATHS_SHOWN = 10  # changed paths named in a resource's row; its details list every one
_NAMES_SHOWN = 10  # replaced resources named in the warning; the table lists every one


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


def _md_impact(impacts: tuple[TpuImpact, ...]) -> list[str]:
    if not impacts:
        return ["No TPU slice is added, removed or recreated."]
    return table(("TPU generation", *(title for _, title in _IMPACT_COLUMNS)),
                 [(md_text(row.generation), *(str(getattr(row, f)) for f, _ in _IMPACT_COLUMNS)) for row in impacts],
                 right=len(_IMPACT_COLUMNS))


def _md_row(c: ResourceChange, context: DiffContext | None) -> list[str]:
    """One resource: its changed paths (the first few, and how many more), or its key properties."""
    action = f"**{c.action.value}**" if c.action in (Action.REPLACE, Action.DELETE) else c.action.value
    paths = ", ".join(md_code(p.path, cell=True) for p in c.properties[:_PATHS_SHOWN])
    if len(c.properties) > _PATHS_SHOWN:
        paths += f" and {len(c.properties) - _PATHS_SHOWN} more"
    shown = paths or md_text(key_text(context.key_properties(c)) if context else "")
    return [f"| {md_code(_SYMBOL[c.action], cell=True)} {action} | {md_code(c.name, cell=True)} | "
            f"{md_code(short_type(c.type), cell=True)} | {shown} |"]


# What `_md_details` writes whatever the values: its tags, headings and table frame, and per property a row of
# five cells (`| + |  |  |  |  |` and its newline); a part needs at least that much room.
_DETAILS_LEAST = 100
_DETAILS_ROW_LEAST = 17


def _md_details(change: ResourceChange) -> list[str]:
    count = f"{len(change.properties)} propert{'y' if len(change.properties) == 1 else 'ies'}"
    rows = [(_PROPERTY_SYMBOL[p.kind], md_code(p.path, cell=True),
             "" if p.kind == "add" else md_code(_value(p.before), cell=True),
             "" if p.kind == "remove" else md_code(_value(p.after), cell=True), md_text(p.replaces))
            for p in change.properties]
    return ["<details>",
            f"<summary>{_SYMBOL[change.action]} {change.action.value} <code>{html_text(change.name)}</code> "
            f"({html_text(short_type(change.type))}): {count}</summary>",
            "", f"URN: {md_code(change.urn)}", "",
            *table(("", "Property", "Before", "After", "Forces replacement"), rows), "", "</details>", ""]


def _md_warning(replaced: list[ResourceChange]) -> list[str]:
    names = ", ".join(f"{md_code(c.name)} ({md_text(short_type(c.type))})" for c in replaced[:_NAMES_SHOWN])
    more = f" and {len(replaced) - _NAMES_SHOWN} more" if len(replaced) > _NAMES_SHOWN else ""
    return ["> [!WARNING]", f"> {len(replaced)} resource{'s' if len(replaced) != 1 else ''} will be replaced: "
            f"{names}{more}. A replaced TPU node pool is a slice torn down and provisioned again.", ""]


def render_markdown(diff: PlanDiff, context: DiffContext | None = None, max_length: int = GITHUB_COMMENT_MAX
                    ) -> str:
    """The PR comment, at most `max_length` characters: the summary, TPU impact and cost always; then the row of
    each resource, the fleet after the change and each resource's property details while they fit."""
    fold = Folding(max_length)
    fold.add([f"### tpuplane diff: {md_code(_stacks(diff))}", ""])
    if not diff.has_changes:
        return "\n".join([*fold.lines, "No changes."]) + "\n"
    fold.add([f"**{_summary_line(diff)}.**", ""])
    fold.mark_note()
    replaced = [c for c in diff.changes if c.action is Action.REPLACE]
    if replaced:
        fold.add(_md_warning(replaced), what="the list of replaced resources")
    fold.add(["#### TPU impact", "", *_md_impact(diff.tpu_impact), ""])
    if context and (grants := grant_changes(diff, context)):
        fold.add(["#### IAM grants", "", *(f"- {md_code(_SYMBOL[g.action])} {g.action.value}: {md_code(g.text)}"
                                           for g in grants), ""], what="the IAM grants")
    if context:
        fold.add(["#### Estimated cost", "", *cost_markdown(context), ""], what="the estimated cost")
    fold.add(["#### Resources", "", *table(("", "Resource", "Type", "Properties"), [])])
    for change in diff.changes:
        fold.add(functools.partial(_md_row, change, context), what="resource rows")
    fold.add([""])
    if context:
        add_fleet(fold, context)
    for change in diff.changes:
        if change.properties:
            fold.add(functools.partial(_md_details, change), what="resources' property details",
                     at_least=_DETAILS_LEAST + _DETAILS_ROW_LEAST * len(change.properties))
    return fold.text("`tpuplane diff BASE HEAD --format text` (or `json`) lists every change.")


# ---------------------------------------------------------------------------------------------------------
# text


def _text_property(p: PropertyChange) -> str:
    path = visible(p.path)
    if p.kind == "add":
        line = f"      + {path}: {_value(p.after)}"
    elif p.kind == "remove":
        line = f"      - {path}: {_value(p.before)}"
    else:
        line = f"      ~ {path}: {_value(p.before)} => {_value(p.after)}"
    return f"{line}  [forces replacement: {p.replaces}]" if p.replaces else line


def render_text(diff: PlanDiff, context: DiffContext | None = None) -> str:
    """One line per resource and per changed property, every value on its own line (`visible`)."""
    lines = [f"tpuplane diff {visible(_stacks(diff))}"]
    if not diff.has_changes:
        return "\n".join([*lines, "No changes."]) + "\n"
    for c in diff.changes:
        lines.append(f"  {_SYMBOL[c.action]:<2} {visible(short_type(c.type))} {visible(c.name)} ({c.action.value})")
        lines += [_text_property(p) for p in c.properties]
        if context and context.key_properties(c):
            lines.append(f"      {visible(key_text(context.key_properties(c)))}")
    lines.append("TPU impact:")
    if not diff.tpu_impact:
        lines.append("  none")
    for row in diff.tpu_impact:
        lines.append(f"  {visible(row.generation)}: slices +{row.slices_added} -{row.slices_removed} "
                     f"recreated {row.slices_recreated}; chips +{row.chips_added} -{row.chips_removed} "
                     f"recreated {row.chips_recreated}")
    if context and (grants := grant_changes(diff, context)):
        lines += ["IAM grants:", *(f"  {_SYMBOL[g.action]:<2} {visible(g.text)}" for g in grants)]
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


def render(diff: PlanDiff, fmt: ReportFormat | str = ReportFormat.MARKDOWN, context: DiffContext | None = None,
           *, max_length: int = GITHUB_COMMENT_MAX) -> str:
    """`context` (from the same two plans) adds key properties, the estimated cost and the fleet after; markdown
    (a PR comment) stays within `max_length` characters."""
    fmt = ReportFormat(fmt)
    if fmt is ReportFormat.MARKDOWN:
        return render_markdown(diff, context, max_length)
    return {ReportFormat.TEXT: render_text, ReportFormat.JSON: render_json}[fmt](diff, context)
