"""Read the stack's Pulumi config into the typed `StackConfig`, failing cleanly on bad input."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Mapping

import pulumi
from pulumi.runtime.config import CONFIG

from tpuplane.components.reservation_lookup import external_reservation_problems
from tpuplane.infra.config import StackConfig, load_stack_config
from tpuplane.infra.errors import ConfigError


def _parse(key: str, value: Any) -> Any:
    """Pulumi hands config to programs as strings; structured `tpuplane:` values arrive as JSON."""
    if key.startswith("tpuplane:") and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:  # not JSON (a plain string), or an integer too long to read: the schema reports it
            return value
    return value


def stop_on_config_error(check: Callable[[], object], config_paths: Mapping[str, str] = {}) -> None:
    """Run a check of the stack program; a ConfigError stops the program the way bad config does (see below).
    `config_paths` renames a component's Args paths to the user's config paths (`pw-sidecar.jaxVersion` ->
    `tpuplane:pathways.jaxVersion`), so the error names what the user wrote."""
    try:
        check()
    except ConfigError as exc:
        problems = [dataclasses.replace(p, path=config_paths.get(p.path, p.path)) for p in exc.problems]
        error = ConfigError(problems)
        raise pulumi.RunError(f"invalid stack config:\n{error}") from error


def read_stack_config() -> StackConfig:
    """All config of this stack, validated, and the reservations it consumes but does not create looked up.
    Bad input stops the program before any resource is registered.

    The `ConfigError` rides as the cause of a `pulumi.RunError`, which Pulumi prints without a traceback;
    `tpuplane plan` prints the same message and exits with status 2.
    """
    raw = {key: _parse(key, value) for key, value in sorted(CONFIG.get().items())}
    try:
        cfg = load_stack_config(raw)
        problems = external_reservation_problems(cfg)
        if problems:
            raise ConfigError(problems)
    except ConfigError as exc:
        raise pulumi.RunError(f"invalid stack config:\n{exc}") from exc
    return cfg
