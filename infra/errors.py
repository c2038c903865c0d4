"""The one error type users see for bad input: where, what was given, what is allowed, and a hint.

Every rule in `tpuplane.infra` raises `ConfigError` before any resource exists, so the CLI can print it
(exit status 2) and the Pulumi program can fail preview with the same words.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One broken rule. `path` is the user's config path, e.g. `tpuplane:tpuPools[1].slices`."""

    path: str
    given: object
    allowed: str
    hint: str = ""

    def __str__(self) -> str:
        text = f"{self.path}: got {self.given!r}; allowed: {self.allowed}"
        return f"{text}. Hint: {self.hint}" if self.hint else text


class ConfigError(ValueError):
    """Bad input, found before anything is created. Carries one or more `Problem`s."""

    def __init__(self, problems: Problem | list[Problem]):
        self.problems: list[Problem] = [problems] if isinstance(problems, Problem) else list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def at(cls, path: str, given: object, allowed: str, hint: str = "") -> "ConfigError":
        return cls(Problem(path, given, allowed, hint))
