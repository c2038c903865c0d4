"""Args given as another resource's output (`pulumi.Input` fields): judged by the same rules as plain values, once
their value is known.

The Args were read before the component registered anything, with the output standing in; when the output
resolves, its value is checked. A bad value stops the program with one `ConfigError` naming the Args field, carried
by `InvalidInput` (which Pulumi prints without a traceback, under the real engine as under the mocks), before any
resource that takes the value is registered. A secret output's value is never shown.
"""

import dataclasses
from typing import Any, Callable

import pulumi

from tpuplane.components.errors import InvalidInput
from tpuplane.infra.args import Source, field_problems
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.model import ConfigModel
from tpuplane.infra.redaction import MASK, REDACTED

Rule = Callable[[Any], list[Problem]]


def _masked(problem: Problem, value: Any) -> Problem:
    """The problem without the secret value: neither as what was given nor quoted in the words around it."""
    try:
        secret = str(value)
    except ValueError:  # an integer too long to write out is quoted nowhere either
        secret = ""

    def hide(text: str) -> str:
        return text.replace(secret, MASK) if secret else text

    return dataclasses.replace(problem, given=REDACTED, allowed=hide(problem.allowed), hint=hide(problem.hint))


def checked_when_known(value: pulumi.Input[Any], model: type[ConfigModel], name: str, source: Source,
                       rules: tuple[Rule, ...] = ()) -> pulumi.Input[Any]:
    """`value` as it is when plain (it was read with the Args), else the output, its value judged by the field's
    type and `rules` when known."""
    if not isinstance(value, pulumi.Output):
        return value

    async def judged(known: Any) -> Any:
        problems = field_problems(model, name, known, source) or [p for rule in rules for p in rule(known)]
        if not problems:
            return known
        if await value.is_secret():
            problems = [_masked(p, known) for p in problems]
        raise InvalidInput(source.root, ConfigError(problems))

    return value.apply(judged)
