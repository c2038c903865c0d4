"""A component's Args, checked with the stack config's own models and rules, its errors naming Args fields.

The components (`tpuplane.components`) take plain Args mappings; the stack config and the Args are two spellings
of the same facts, so the Args are validated by the same pydantic models and the same rules. Only the paths in
the errors differ: `tpuplane:kueue.teams[2].name` in a stack, `BatchStackArgs.teams[2].name` in a program.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterable, Mapping, TypeVar

from pydantic import BaseModel, ValidationError

from tpuplane.infra.errors import ConfigError, Problem

Model = TypeVar("Model", bound=BaseModel)


def snake_path(path: str) -> str:
    """`teams[0].borrowingLimit` -> `teams[0].borrowing_limit`: Python programs spell fields in snake_case."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), path)


def model_from_args(model: type[Model], args: Mapping[str, Any], path: str) -> Model:
    """`model` from the Args fields it declares; a bad or unknown value is a ConfigError at `<path>.<field>`."""
    try:
        return model.model_validate(dict(args))
    except ValidationError as exc:
        raise ConfigError([Problem(path + "".join(f"[{part}]" if isinstance(part, int) else f".{snake_path(part)}"
                                                  for part in e["loc"]), e.get("input"),
                                   e["msg"].removeprefix("Value error, ")) for e in exc.errors()]) from None


def renamed(problems: list[Problem], paths: Mapping[str, str]) -> list[Problem]:
    """Problems found by the stack config's rules, their config paths renamed by prefix to Args paths
    (`{"tpuplane:kueue": "BatchStackArgs"}`) and spelled in snake_case."""
    out = []
    for problem in problems:
        for prefix, replacement in paths.items():
            if problem.path == prefix or problem.path.startswith((prefix + ".", prefix + "[")):
                problem = dataclasses.replace(problem, path=replacement + snake_path(problem.path[len(prefix):]))
                break
        out.append(problem)
    return out


def check_args(args: object, path: str) -> Mapping[str, Any]:
    """Args are a mapping (a TypedDict); anything else is named, not a traceback."""
    if not isinstance(args, Mapping):
        raise ConfigError.at(path, type(args).__name__, f"a {path} mapping",
                             f"build it as {path}(field=value, ...)")
    return args


def reject_unknown(args: Mapping[str, Any], path: str, fields: Iterable[str]) -> None:
    """A misspelt field must fail, not be ignored (the stack config's `extra="forbid"`)."""
    unknown = sorted(set(args) - set(fields))
    if unknown:
        raise ConfigError.at(f"{path}.{unknown[0]}", args[unknown[0]], f"one of {', '.join(sorted(fields))}",
                             "check the spelling of the field")


def require_text(args: Mapping[str, Any], path: str, fields: Iterable[str]) -> None:
    """Fields without a default that the models below do not read (project, region, ...) must be given."""
    missing = [Problem(f"{path}.{field}", args.get(field), "text", "this field is required")
               for field in fields if not isinstance(args.get(field), str)]
    if missing:
        raise ConfigError(missing)


def require_flag(args: Mapping[str, Any], path: str, field: str) -> None:
    """An optional true/false field is a boolean when given (`"false"` is not false)."""
    if not isinstance(args.get(field, False), bool):
        raise ConfigError.at(f"{path}.{field}", args[field], "true or false")
