"""Read the stack's Pulumi config into the components' Args (`StackConfig`), failing cleanly on bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pulumi.runtime.config import CONFIG

from tpuplane.components.errors import InvalidInput
from tpuplane.components.reservation_lookup import external_reservation_problems
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.stack import StackConfig, load_stack_config


def _parse(key: str, value: Any) -> Any:
    """Pulumi hands config to programs as strings; structured `tpuplane:` values arrive as JSON."""
    if key.startswith("tpuplane:") and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:  # not JSON (a plain string), or an integer too long to read: the schema reports it
            return value
    return value


def read_stack_config(project_dir: Path, *, look_up_reservations: bool = True) -> StackConfig:
    """All config of this stack, read (paths in it start at `project_dir`), and the reservations it consumes but
    does not create looked up in Compute Engine (unless `look_up_reservations` is false: a program with no GCP
    provider, the sandbox's). Bad input stops the program before any resource is registered.

    The `ConfigError` rides in an `InvalidInput` (a `pulumi.RunError`), which Pulumi prints without a traceback;
    `tpuplane plan` prints the same message and exits with status 2.
    """
    raw = {key: _parse(key, value) for key, value in sorted(CONFIG.get().items())}
    try:
        cfg = load_stack_config(raw, project_dir=project_dir)
        problems = external_reservation_problems(cfg) if look_up_reservations else []
        if problems:
            raise ConfigError(problems)
    except ConfigError as exc:
        raise InvalidInput("stack config", exc) from exc
    return cfg
