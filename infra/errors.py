"""The one error type users see for bad input: where, what was given, what is allowed, and a hint.

Every rule in `tpuplane.infra` raises `ConfigError` before any resource exists, so the CLI can print it
(exit status 2) and the Pulumi program can fail preview with the same words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from tpuplane.infra.redaction import redact, redact_text
from tpuplane.infra.visible_text import visible


@dataclass(frozen=True)
class Problem:
    """One broken rule. `path` is the user's config path, e.g. `tpuplane:tpuPools[1].slices`."""

    path: str
    given: object
    allowed: str
    hint: str = ""

    def __str__(self) -> str:
        """Never shows a secret: the given value is redacted by its key and by what it is, and each part of the
        message on its own (so a secret-named path does not hide the rest of the message)."""
        given = redact(self.given, re.split(r"[.:\[\]]", self.path.rstrip("]"))[-1].strip('"'))
        text = f"{_line(self.path)}: got {redact_text(_shown(given))}; allowed: {_line(self.allowed)}"
        return f"{text}. Hint: {_line(self.hint)}" if self.hint else text

    @property
    def subject(self) -> tuple[str, str]:
        """Where and what: two problems about the same value at the same path are about one thing."""
        return self.path, _shown(self.given)


def _line(text: str) -> str:
    """A part of a problem's line, secrets masked: a user's value quoted in a path, an allowed list or a hint (a
    stack name in the file name it is looked for by) stays on this one line, its line breaks and invisible
    characters escaped."""
    return visible(redact_text(text))


class _Sized:
    """Stands in for a huge integer in a message: its size, since its repr can raise (over 4,300 digits)."""

    def __init__(self, bits: int) -> None:
        self.bits = bits

    def __repr__(self) -> str:
        return f"<a {self.bits}-bit integer>"


def _without_huge_integers(value: object, depth: int = 0) -> object:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return _Sized(value.bit_length())
    if depth < 32 and isinstance(value, (list, tuple)):
        return type(value)(_without_huge_integers(v, depth + 1) for v in value)
    if depth < 32 and isinstance(value, dict):
        return {k: _without_huge_integers(v, depth + 1) for k, v in value.items()}
    return value


def _shown(given: object) -> str:
    """The given value as a message shows it: huge integers by size, at any depth (their repr can raise), long
    values cut, and an object whose repr fails by its type."""
    try:
        text = repr(_without_huge_integers(given))
    except Exception:  # noqa: BLE001 - a value from a user's program may have any __repr__
        text = f"<a {type(given).__name__}>"
    return text if len(text) <= _SHOWN_MAX else text[:_SHOWN_MAX - 1] + "…"


_SHOWN_MAX = 1000


class ConfigError(ValueError):
    """Bad input, found before anything is created. Carries one or more `Problem`s."""

    def __init__(self, problems: Problem | list[Problem]):
        self.problems: list[Problem] = [problems] if isinstance(problems, Problem) else list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def at(cls, path: str, given: object, allowed: str, hint: str = "") -> "ConfigError":
        return cls(Problem(path, given, allowed, hint))


def problems_of(check: Callable[[], object]) -> list[Problem]:
    """Run a check that raises ConfigError and return its problems (none when it passes): for rules that report
    every problem at once instead of stopping at the first."""
    try:
        check()
    except ConfigError as exc:
        return exc.problems
    return []

