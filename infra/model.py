"""The base of every config model: camelCase in YAML, snake_case in Python, unknown keys are errors."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict


def camel(name: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)


class ConfigModel(BaseModel):
    """A typo in a stack config must fail, not be ignored: `extra="forbid"`. Frozen: config is a value."""

    model_config = ConfigDict(alias_generator=camel, populate_by_name=True, extra="forbid", frozen=True)
