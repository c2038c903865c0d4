"""Durations as kubectl reads and prints them: `--timeout 10m`, `--request-timeout 5s`, and the AGE column.

Input follows Go's `time.ParseDuration`, which kubectl uses: a sequence of decimal numbers each with a unit
(`300ms`, `1.5h`, `2h45m`); kubectl also takes a bare number as seconds, and so does tpuplane. Output follows
kubectl's `HumanDuration` (`45s`, `3m20s`, `5h`, `3d`): exact while short, coarser as it grows.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from tpuplane.infra.errors import ConfigError

_UNITS = {"ns": Decimal("1e-9"), "us": Decimal("1e-6"), "µs": Decimal("1e-6"), "ms": Decimal("0.001"),
          "s": Decimal(1), "m": Decimal(60), "h": Decimal(3600)}
_TERM = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
MAX_DURATION_SECONDS = 366 * 24 * 3600  # a year: anything longer is a typo, and floats stay exact below it
_ALLOWED = "a duration such as 30s, 10m, 1h30m or 1.5h (units ns, us, ms, s, m, h; a bare number is seconds)"


def parse_duration(text: str, option: str) -> float:
    """Seconds of a Go-style duration; a ConfigError naming `option` for anything else (negative, empty, a unit
    Go does not know, more than a year)."""
    value = text
    try:
        if re.fullmatch(r"\d+(\.\d*)?|\.\d+", value):
            seconds = Decimal(value)
        else:
            terms = _TERM.findall(value)
            if not terms or "".join(a + u for a, u in terms) != value:
                raise ConfigError.at(option, text, _ALLOWED)
            seconds = sum((Decimal(amount) * _UNITS[unit] for amount, unit in terms), Decimal(0))
    except InvalidOperation:
        raise ConfigError.at(option, text, _ALLOWED) from None
    if seconds > MAX_DURATION_SECONDS:
        raise ConfigError.at(option, text, f"at most a year ({MAX_DURATION_SECONDS}s)")
    return float(seconds)


def human_duration(seconds: float) -> str:
    """kubectl's AGE: `12s`, `3m20s`, `45m`, `5h12m`, `20h`, `3d4h`, `45d`, `2y30d`."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
