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


def model_from_args(model: type[Model], args: Any, path: str, *, snake: bool = True) -> Model:
    """`model` from the Args fields it declares; a bad or unknown value is a ConfigError at `<path>.<field>`.
    `snake=False` keeps the field names of a document (a workload file's camelCase) in the paths."""
    check_args(args, path)
    spell = snake_path if snake else str
    try:
        return model.model_validate(dict(args))
    except ValidationError as exc:
        raise ConfigError([Problem(path + "".join(f"[{part}]" if isinstance(part, int) else f".{spell(part)}"
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
    """Args are a mapping (a TypedDict, or a nested one); anything else is named, not a traceback."""
    if not isinstance(args, Mapping):
        raise ConfigError.at(path, type(args).__name__, "a mapping of field names to values",
                             "build Args as SomeArgs(field=value, ...), nested ones as dicts")
    return args


def reject_unknown(args: Mapping[str, Any], path: str, fields: Iterable[str]) -> None:
    """A misspelt field must fail, not be ignored (the stack config's `extra="forbid"`); every one is named."""
    unknown = sorted(set(args) - set(fields), key=str)
    if unknown:
        raise ConfigError([Problem(f"{path}.{field}", args[field], f"one of {', '.join(sorted(fields))}",
                                   "check the spelling of the field") for field in unknown])


# What a value taken from another resource (a pulumi Output) is not: plain data of the wrong kind.
_PLAIN_DATA = (bool, int, float, bytes, list, tuple, dict, set)


def text_problems(args: Mapping[str, Any], path: str, field: str, *, pattern: re.Pattern[str] | None = None,
                  allowed: str = "text", required: bool = True, output_ok: bool = False) -> list[Problem]:
    """A text field: given when required, text that matches `pattern` when plain, and, for a `pulumi.Input`
    field (`output_ok`), either that or a value from another resource (which only the cloud can judge)."""
    if field not in args or args[field] is None:
        return [Problem(f"{path}.{field}", None, allowed, "this field is required")] if required else []
    value = args[field]
    if isinstance(value, str):
        if value and (pattern is None or pattern.fullmatch(value)):
            return []
    elif output_ok and not isinstance(value, _PLAIN_DATA):
        return []  # an Output of another resource
    return [Problem(f"{path}.{field}", value, allowed + (" or another resource's output" if output_ok else ""))]


def text_list_problems(args: Mapping[str, Any], path: str, field: str, *, pattern: re.Pattern[str],
                       allowed: str) -> list[Problem]:
    """An optional list of texts, each matching `pattern`; each bad entry named by its index."""
    values = args.get(field, [])
    if not isinstance(values, list):
        return [Problem(f"{path}.{field}", values, f"a list of {allowed}")]
    return [Problem(f"{path}.{field}[{i}]", value, allowed) for i, value in enumerate(values)
            if not isinstance(value, str) or not pattern.fullmatch(value)]


def require_flag(args: Mapping[str, Any], path: str, field: str) -> None:
    """An optional true/false field is a boolean when given (`"false"` is not false)."""
    if not isinstance(args.get(field, False), bool):
        raise ConfigError.at(f"{path}.{field}", args[field], "true or false")


def snake_paths(problems: list[Problem]) -> list[Problem]:
    """Problems found by the stack config's rules under an Args path (`TpuSlicePoolArgs.tpuType`), their fields
    spelled in snake_case (`TpuSlicePoolArgs.tpu_type`)."""
    return [dataclasses.replace(p, path=f"{head}.{snake_path(rest)}" if rest else head)
            for p in problems for head, _, rest in [p.path.partition(".")]]


def given(args: object, path: str) -> dict[str, Any]:
    """The Args' fields that are set: a mapping (else a ConfigError naming `path`) without its None values, which
    mean "unset" as they do for every Pulumi input."""
    return {key: value for key, value in check_args(args, path).items() if value is not None}
