"""A PR comment within GitHub's size limit: the parts of a report are laid out in the order a reviewer needs them,
and what would not fit is left out whole (never cut mid-value), counted, and named in a note at the top.

GitHub refuses a comment body over 65,536 characters; the PR workflow posts several stacks' diffs in one comment,
so each report is given its share (`tpuplane diff --max-length`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

GITHUB_COMMENT_MAX = 65_536
NOTE_RESERVE = 1_000  # room kept for the note, so adding it never breaks the limit
SMALLEST_PART = 200  # with less room than this left, what remains is counted without being rendered


@dataclass
class Folding:
    """Lines of a markdown report, kept within `limit` characters (newlines counted)."""

    limit: int
    lines: list[str] = field(default_factory=list)
    size: int = 0
    folded: dict[str, int] = field(default_factory=dict)  # what was left out -> how many
    note_at: int | None = None

    def _room(self) -> int:
        return self.limit - NOTE_RESERVE - self.size

    def add(self, lines: list[str] | Callable[[], list[str]], *, what: str | None = None, at_least: int = 0
            ) -> bool:
        """Add `lines` whole; with `what` (a part the report can do without), only when they fit, else count them
        as folded. `lines` may be a function that renders them, called only when there is room left at all, and
        at least `at_least` characters, what the caller knows the part needs before rendering it (a report of
        100,000 resources renders what it shows, not what it folds). Returns whether they were added."""
        if callable(lines):
            if what is not None and self._room() < max(SMALLEST_PART, at_least):
                self.skip(what)
                return False
            lines = lines()
        size = sum(len(line) + 1 for line in lines)
        if what is not None and size > self._room():
            self.skip(what)
            return False
        self.lines += lines
        self.size += size
        return True

    def skip(self, what: str) -> None:
        """Leave out a part for another reason than its size here (the note says so through `what`)."""
        self.folded[what] = self.folded.get(what, 0) + 1

    def mark_note(self) -> None:
        """The note, if any, goes here (after the summary, before the details)."""
        self.note_at = len(self.lines)

    def text(self, hint: str) -> str:
        """The report, with a note of what was folded at the mark; `hint` says where the rest can be read."""
        lines = list(self.lines)
        if self.folded:
            parts = ", ".join(f"{what} ({count:,})" for what, count in self.folded.items())
            note = ["> [!NOTE]", f"> Folded to stay within {self.limit:,} characters (GitHub takes a comment of at most "
                    f"{GITHUB_COMMENT_MAX:,}): {parts} not shown. {hint}", ""]
            at = len(lines) if self.note_at is None else self.note_at
            lines[at:at] = note
        return "\n".join(lines).rstrip("\n") + "\n"
