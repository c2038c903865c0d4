"""Text made visible: a value shown on one line can neither start another (a forged error line, a heading, a table
row) nor hide or reorder what follows it. The bottom layer with `tpuplane.infra.redaction`: error messages and every
report's escaping (`tpuplane.infra.review.markup`) start from it."""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, line and paragraph separators, and the format characters that hide or reorder text
# (zero-width characters, bidirectional embeddings, overrides and isolates, the byte-order mark).
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
                        "\ufff9-\ufffb]")
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_invisible(match: re.Match[str]) -> str:
    ch = match[0]
    return _NAMED_ESCAPES.get(ch) or f"\\u{ord(ch):04x}"


def visible(value: object, *, lines: bool = False) -> str:
    """`value` as one line of visible text (with `lines`, its line breaks kept), control and invisible characters
    written as escapes (`\\n`, `\\u202e`)."""
    if lines:
        return "\n".join(_INVISIBLE.sub(_escape_invisible, line) for line in str(value).split("\n"))
    return _INVISIBLE.sub(_escape_invisible, str(value))
