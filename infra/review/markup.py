"""One escaping function per output context: every value a report shows came from a plan, a diff, a price file
or a workload file, which a PR can change, so none of them may add structure to the report it lands in.

- `visible` (from `tpuplane.infra.visible_text`, where error messages get it too): one line, with control
  characters, line separators and invisible format characters written as escapes (`\\n`, `\\u202e`): a value can
  neither start a new line (a heading, a fence, a table row) nor hide or reorder text. Every other function starts
  from it.
- `md_text`: markdown inline text and GFM table cells: the characters that start inline markup backslash-escaped
  (emphasis, strikethrough, links and images, code, HTML and autolinks, entities, math, cell separators, and `#`),
  so a value adds no structure to the line it is on; other punctuation stays as it is, readable in the source.
- `md_code`: an inline code span whose backtick fence is longer than any backtick run of the value.
- `md_fence`: a fenced block whose fence is longer than any backtick run of its body, so no line closes it.
- `html_text`: HTML element content and attribute values (the HTML report, `<summary>` in a PR comment).
- `mermaid_text`: a Mermaid label: quotes, brackets, `#`, `%` (directives), `<`, `>`, `&` and backticks as
  Mermaid entity codes (`#quot;`), which Mermaid shows as the characters themselves.
- `terminal_text`: a table cell or line on a terminal, with rich's markup escaped.

Pure functions of text; the renderers call them on every value, never on the report's own markup.
"""

from __future__ import annotations

import html
import re

from rich.markup import escape as _rich_escape

from tpuplane.infra.visible_text import visible

_MD_INLINE_MARKUP = re.compile(r"([\\`*_\[\]<&|~#$])")
_BACKTICK_RUN = re.compile(r"`+")
_MERMAID_ENTITIES = {ch: f"#{ord(ch)};" for ch in "#%\"'`<>&[](){}|;\\"}
_MERMAID_SPECIAL = re.compile("[" + re.escape("".join(_MERMAID_ENTITIES)) + "]")


def md_text(value: object) -> str:
    """Markdown inline text (a paragraph, a heading, a list item, a GFM table cell): shows `value`, nothing else."""
    return _MD_INLINE_MARKUP.sub(r"\\\1", visible(value))


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0)


def md_code(value: object, *, cell: bool = False) -> str:
    """An inline code span showing `value` ("" for an empty value). In a GFM table cell (`cell`), `|` is escaped:
    GitHub splits cells before it reads code spans."""
    text = visible(value)
    if not text:
        return ""
    fence = "`" * (_longest_backtick_run(text) + 1)
    # CommonMark strips one space from each side of a code span, so a padded value keeps its own
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    if cell:
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def md_fence(body: str, info: str = "") -> list[str]:
    """A fenced code block of `body`'s lines: its fence is longer than any backtick run in the body."""
    fence = "`" * max(3, _longest_backtick_run(body) + 1)
    return [f"{fence}{info}", *body.splitlines(), fence]


def html_text(value: object, *, lines: bool = False) -> str:
    """HTML element content or a quoted attribute value. On one line, so that inside a PR comment's HTML block
    (`<summary>`) no blank line ends the block; with `lines` (a `<pre>` of the HTML report), line breaks kept."""
    return html.escape(visible(value, lines=lines), quote=True)


def mermaid_text(value: object) -> str:
    """Text inside a quoted Mermaid label (node or edge)."""
    return _MERMAID_SPECIAL.sub(lambda m: _MERMAID_ENTITIES[m[0]], visible(value))


def terminal_text(value: object) -> str:
    """A value in a rich table or line on a terminal: one line, and no rich markup (`[bold]`, `[/]`)."""
    return _rich_escape(visible(value))
