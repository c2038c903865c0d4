"""Reading input: where it comes from (`Source`) and the one reader every section and every Args goes through.

A component's Args and a stack config section are one vocabulary (`tpuplane.infra.model`). A reader is told where
it reads from: a stack config section (`Source.config("tpuplane:cluster", ...)`, camelCase keys) or a component's
Args (`Source.args("TpuClusterArgs", ...)`, snake_case fields). Every problem it finds is named through the
source, so an error names what the user wrote: `tpuplane:cluster.cpuPool.minNodes` in a stack config,
`TpuClusterArgs.cpu_pool.min_nodes` in a program. Nothing renames paths after the fact.
"""

from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Iterable, Mapping, TypeVar

from pydantic import BeforeValidator, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.model import Allowed, ConfigModel, FromStack, Hint, camel, field_marker, nested_model

Model = TypeVar("Model", bound=ConfigModel)


@dataclass(frozen=True)
class Source:
    """Where a reader reads `model` from: `root` is the section's config path or the Args' name. `origins` tells,
    for one read, where the stack took a value from when that is not the field's `FromStack` path (a default the
    stack supplies for a key the section left out, a value it derives from another key)."""

    root: str
    model: type[ConfigModel] | None
    stack: bool = False
    origins: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def config(cls, root: str, model: type[ConfigModel], origins: Mapping[str, str] | None = None) -> "Source":
        return cls(root, model, True, origins or {})

    @classmethod
    def args(cls, root: str, model: type[ConfigModel]) -> "Source":
        return cls(root, model, False)

    def key(self, name: str, model: type[ConfigModel] | None = None) -> str:
        """A field as this source spells it: its config key, or its Args name."""
        info = (model or self.model).model_fields.get(name) if (model or self.model) else None
        if not self.stack:
            return name
        return (info.alias if info is not None and info.alias else None) or camel(name)

    def origin(self, name: str) -> str | None:
        """Where a stack took this field from, when it is not a key of the section."""
        if not self.stack:
            return None
        marker = field_marker(self.model.model_fields.get(name) if self.model else None, FromStack)
        return self.origins.get(name) or (marker.path if marker else None)

    def section_key(self, name: str) -> bool:
        """Does the user give this field here: every Args field, and the keys of a stack config section (not
        what the stack fills from elsewhere)."""
        model = self.model
        return not (self.stack and field_marker(model.model_fields.get(name) if model else None, FromStack))

    def path(self, *parts: str | int) -> str:
        """The path of a field (and of fields and list entries below it), as the user spells it."""
        return self._walk(parts)[0]

    def at(self, *parts: str | int) -> "Source":
        """The source of a nested model: `source.at("cpu_pool")`, `source.at("teams", 2)`."""
        path, model = self._walk(parts)
        return Source(path, model, self.stack)

    def _walk(self, parts: tuple[str | int, ...]) -> tuple[str, type[ConfigModel] | None]:
        path, model = self.root, self.model
        for i, part in enumerate(parts):
            if isinstance(part, int):
                path += f"[{part}]"
                continue
            info = model.model_fields.get(part) if model is not None else None
            origin = self.origin(part) if i == 0 else None
            path = origin if origin else _join(path, self.key(part, model))
            model = nested_model(info.annotation) if info is not None else None
        return path, model


_NOT_A_MAPPING = ("a mapping of field names to values",
                  Hint("build Args as SomeArgs(field=value, ...), nested ones as dicts"))
_MAPPING_TYPES = ("model_type", "dict_type", "model_attributes_type")


def check_args(args: object, path: str) -> Mapping[str, Any]:
    """Input is a mapping (a TypedDict, a nested dict, a YAML mapping); anything else is named, not a traceback."""
    if not isinstance(args, Mapping):
        raise ConfigError.at(path, type(args).__name__, _NOT_A_MAPPING[0], _NOT_A_MAPPING[1].text)
    return args


def given(args: object, path: str) -> dict[str, Any]:
    """The Args' fields that are set: a mapping (else a ConfigError naming `path`) without its None values, which
    mean "unset" as they do for every Pulumi input."""
    return {key: value for key, value in check_args(args, path).items() if value is not None}


def reject_unknown(args: Mapping[str, Any], path: str, fields: tuple[str, ...]) -> None:
    """A misspelt field must fail, not be ignored; every one is named (for Args read field by field)."""
    unknown = sorted(set(args) - set(fields), key=str)
    if unknown:
        raise ConfigError([unknown_field(path, key, args[key], fields) for key in unknown])


def read(model: type[Model], raw: object, source: Source, *, supplied: Mapping[str, Any] | None = None,
         unread: Iterable[str] = ()) -> Model:
    """`raw` read as `model` from `source`; one ConfigError lists every problem, named as the user spells it.

    `raw` already read (a `model`) is returned as it is: input is validated once. `supplied` holds fields (by
    name) the caller already read elsewhere, such as a stack's project for its cluster; in a stack config those
    that declare `FromStack` are not keys of the section, and the section's own keys win over the others. A field
    the caller would supply from a section it could not read is `unread`: its absence is not reported again.
    """
    if isinstance(raw, model):
        return raw
    fields = dict(check_args(raw, source.root)) if source.stack else given(raw, source.root)
    keys = {source.key(name): name for name in model.model_fields if source.section_key(name)}
    unknown = [key for key in fields if key not in keys]
    data = {source.key(name): value for name, value in (supplied or {}).items()}
    data.update((key, value) for key, value in fields.items() if key in keys)
    problems = [_unknown_key(source, key, fields[key], keys) for key in unknown]
    try:
        result = model.model_validate(data, by_alias=source.stack, by_name=not source.stack)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc, source, unread) + problems) from None
    if problems:
        raise ConfigError(problems)
    return result


def read_checked(model: type[Model], raw: object, source: Source, rules: Callable[[Model, Source], list[Problem]],
                 *, supplied: Mapping[str, Any] | None = None) -> Model:
    """A component's reader: `raw` read as `model`, then judged by `rules`; input already read (a `model`) passes
    as it is, so it is checked once."""
    if isinstance(raw, model):
        return raw
    value = read(model, raw, source, supplied=supplied)
    problems = rules(value, source)
    if problems:
        raise ConfigError(problems)
    return value


def _join(path: str, key: str) -> str:
    """`root.key`; a root that ends in ':' (a file, `base plan p.json:`) is followed by a space."""
    return f"{path} {key}" if path.endswith(":") else f"{path}.{key}" if path else key


def _unknown_key(source: Source, key: str, value: object, keys: Mapping[str, str]) -> Problem:
    if source.stack:
        return Problem(_join(source.root, key), value, f"no such key; the keys here are {', '.join(sorted(keys))}",
                       "check the spelling against docs/reference/stack-config.md")
    return unknown_field(source.root, key, value, keys)


def unknown_field(path: str, key: str, value: object, fields: Iterable[str]) -> Problem:
    return Problem(_join(path, key), value, f"one of {', '.join(sorted(fields))}", "check the spelling of the field")


def validation_problems(exc: ValidationError, source: Source, unread: Iterable[str] = ()) -> list[Problem]:
    """pydantic's errors as problems: each location spelled as the source spells it, the field's own words for
    what it takes and its hint. The one place a pydantic location becomes a path."""
    problems = []
    for err in exc.errors():
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        names = _field_names(source, loc)
        if err["type"] == "missing" and names and (names[0] in unread or not source.section_key(str(names[0]))):
            continue  # what a stack did not supply comes from a section that could not be read: reported there
        info = _field_info(source.model, names)
        hint = field_marker(info, Hint)
        allowed, given_value = err["msg"].removeprefix("Value error, "), err.get("input")
        if err["type"] == "extra_forbidden":
            owner = _field_info(source.model, names[:-1])
            model = nested_model(owner.annotation) if owner is not None else source.model
            problems.append(_unknown_key(source.at(*names[:-1]), str(names[-1]), given_value,
                                         {source.key(name, model): name for name in model.model_fields}))
            continue
        marker = field_marker(info, Allowed) if names and isinstance(names[-1], str) else None
        if err["type"] == "missing":
            given_value = None
            if source.stack:
                allowed = "a value: this key is required"
            else:
                allowed, hint = (marker.text if marker else "a value"), hint or Hint("this field is required")
        elif err["type"] in _MAPPING_TYPES and not source.stack:
            given_value, allowed, hint = type(given_value).__name__, *_NOT_A_MAPPING
        elif err["type"].endswith("_type") and marker:
            allowed = marker.text
        problems.append(Problem(source.path(*names) or "(file)", given_value, allowed, hint.text if hint else ""))
    return problems


def _field_names(source: Source, loc: list[str | int]) -> list[str | int]:
    """A pydantic location (keys as the source spells them) as field names, walking nested models."""
    names: list[str | int] = []
    model = source.model
    for part in loc:
        if isinstance(part, int) or model is None:
            names.append(part)
            continue
        by_key = {source.key(name, model): name for name in model.model_fields}
        name = by_key.get(part, part)
        names.append(name)
        info = model.model_fields.get(name)
        model = nested_model(info.annotation) if info is not None else None
    return names


def _field_info(model: type[ConfigModel] | None, names: list[str | int]) -> FieldInfo | None:
    info = None
    for name in names:
        if isinstance(name, int):
            continue
        info = model.model_fields.get(name) if model is not None else None
        model = nested_model(info.annotation) if info is not None else None
    return info


# ---- text fields --------------------------------------------------------------------------------------------

def is_output(value: object) -> bool:
    """A value another resource gives once it exists (a `pulumi.Output`, or an awaitable `pulumi.Input`), told
    by its shape: the core never imports pulumi."""
    return inspect.isawaitable(value) or (callable(getattr(value, "apply", None))
                                          and callable(getattr(value, "is_secret", None)))


def text(allowed: str, pattern: re.Pattern[str] | None = None, *, output_ok: bool = False) -> Any:
    """The type of a text field: non-empty text that matches `pattern`, else an error saying `allowed`. With
    `output_ok` (a `pulumi.Input` field) it also takes another resource's output, judged by the same rule once its
    value is known (`field_problems`). None passes (an optional field's default)."""
    says = allowed + (" or another resource's output" if output_ok else "")

    def check(value: object) -> object:
        if value is None or (isinstance(value, str) and value and (pattern is None or pattern.fullmatch(value))):
            return value
        if output_ok and is_output(value):
            return value
        raise ValueError(says)

    return Annotated[Any, BeforeValidator(check), Allowed(allowed)]


@functools.cache  # a field's validator is built once, not once per output it checks
def _field_adapter(model: type[ConfigModel], name: str) -> TypeAdapter[Any]:
    info = model.model_fields[name]
    return TypeAdapter(Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation)


def field_problems(model: type[ConfigModel], name: str, value: object, source: Source) -> list[Problem]:
    """`value` judged by the type of `model`'s field `name` alone: for a value that was another resource's output
    when the Args were read, now that it is known."""
    info = model.model_fields[name]
    try:
        _field_adapter(model, name).validate_python(value)
    except ValidationError as exc:
        marker = field_marker(info, Allowed)
        return [Problem(p.path, p.given, marker.text if marker else p.allowed,
                        "the value the output this field was given resolved to")
                for p in validation_problems(exc, Source(source.path(name), None, source.stack))]
    return []


def text_list(allowed: str, pattern: re.Pattern[str]) -> Any:
    """The type of a list of texts, each matching `pattern`; each bad entry is named by its index."""
    def check(value: object) -> object:
        if not isinstance(value, list):
            raise ValueError(f"a list of {allowed}")
        return value

    return Annotated[list[text(allowed, pattern)], BeforeValidator(check), Allowed(f"a list of {allowed}")]
