"""The base of every input model: one declaration per field, read in either spelling.

A component's Args and a stack config section are the same fields: the model names them in snake_case (the
Args' spelling) and its aliases are the camelCase keys of the stack config (`alias=` where a key differs). A
field that a stack fills from elsewhere (another section, a value it derives) says where with `FromStack`; it is
not a key of its section. `Hint` is the advice every error on the field carries.
"""

from __future__ import annotations

import math
import re
import types
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic.fields import FieldInfo


def camel(name: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)


@dataclass(frozen=True)
class FromStack:
    """In a stack config, the field is not a key of its section: the stack fills it from `path` (a key of another
    section, or the section a derived value comes from), or, with no path, leaves it at its default."""

    path: str


@dataclass(frozen=True)
class Hint:
    """What to do about a bad value of this field, whichever rule refused it."""

    text: str


@dataclass(frozen=True)
class Allowed:
    """What the field takes, in words: the error of a missing or malformed value says it."""

    text: str


def field_marker(info: FieldInfo | None, kind: type) -> Any:
    """The `FromStack`, `Hint` or `Allowed` a field declares, or None."""
    return next((m for m in info.metadata if isinstance(m, kind)), None) if info is not None else None


class ConfigModel(BaseModel):
    """A typo must fail, not be ignored: `extra="forbid"`. Frozen: input is a value. Each spelling is read on its
    own (`tpuplane.infra.args.read`): a stack config's camelCase keys, or an Args' snake_case fields.

    Scalars are strict without `strict=True` (which would also refuse enum values given as strings, the only
    way YAML and Pulumi's JSON config can spell them): a number field takes a number, never `true` or `'0.5'`;
    a boolean field takes `true`/`false` only; numbers are finite and integers fit in 64 bits; text is printable
    ASCII, as GCP and Kubernetes names are, except in the fields a model lists in `unicode_fields`."""

    model_config = ConfigDict(alias_generator=camel, validate_by_name=True, validate_by_alias=True, extra="forbid",
                              frozen=True)
    unicode_fields: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="before")
    @classmethod
    def _strict_scalars(cls, value: Any, info: ValidationInfo) -> Any:
        kinds = _scalar_kinds(cls.model_fields[info.field_name].annotation)
        if value is None or not kinds:
            return value
        if isinstance(value, bool):
            if bool not in kinds:
                raise ValueError(f"{_kind_names(kinds)}, not a boolean")
        elif isinstance(value, int):
            if not kinds & {int, float}:
                raise ValueError(f"{_kind_names(kinds)}, not a number")
            if not -INT64 <= value < INT64:
                raise ValueError("a 64-bit integer")
        elif isinstance(value, float):
            if not kinds & {int, float}:
                raise ValueError(f"{_kind_names(kinds)}, not a number")
            if not math.isfinite(value):
                raise ValueError("a finite number")
            if float not in kinds and not value.is_integer():
                raise ValueError("a valid integer, not a fraction")
        elif isinstance(value, str):
            if str not in kinds:
                raise ValueError(f"{_kind_names(kinds)}, not text (write the value unquoted)")
            if info.field_name not in cls.unicode_fields and not _PRINTABLE_ASCII.fullmatch(value):
                raise ValueError("printable ASCII text (no Unicode letters or digits, no control characters)")
        return value

    @classmethod
    def config_key(cls, name: str) -> str | None:
        """The field's key in a stack config section; None when the stack fills it from elsewhere."""
        info = cls.model_fields[name]
        return None if field_marker(info, FromStack) else info.alias or camel(name)


INT64 = 1 << 63
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")


def _scalar_kinds(annotation: Any) -> set[type]:
    """The scalar types a field accepts (`int | None` -> {int}); empty for containers and models. An Enum
    counts as text: YAML spells it as a string."""
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        else (annotation,)
    kinds = set()
    for arg in args:
        if isinstance(arg, type) and issubclass(arg, Enum):
            kinds.add(str)
        elif arg in (bool, int, float, str):
            kinds.add(arg)
        elif arg is not type(None):
            return set()  # a container, a model or a special type: pydantic checks it
    return kinds


def _kind_names(kinds: set[type]) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "text"}
    return " or ".join(names[k] for k in (bool, int, float, str) if k in kinds)


def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, alone, in a list or optional (`list[Team]` -> Team); None for scalars."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = nested_model(arg)
        if found is not None:
            return found
    return None
