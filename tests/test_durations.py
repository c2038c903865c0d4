"""Specification of durations as kubectl reads (`--timeout 10m`) and prints them (AGE)."""

from __future__ import annotations

import pytest

from tpuplane.infra.durations import human_duration, parse_duration
from tpuplane.infra.errors import ConfigError


@pytest.mark.parametrize("text, seconds", [("30s", 30), ("10m", 600), ("1h30m", 5400), ("1.5h", 5400),
                                           ("300ms", 0.3), ("2h45m10s", 9910), ("5", 5), ("0", 0), (".5s", 0.5)])
def test_parse_duration_reads_go_durations_and_bare_seconds(text, seconds):
    assert parse_duration(text, "--timeout") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "-5s", "5x", "1.5.2s", "m", "5 s", "1d", "ten", "9" * 400 + "h", "1e3s",
                                  "nan", "inf", "5s\n"])
def test_parse_duration_refuses_anything_else_naming_the_option(text):
    with pytest.raises(ConfigError) as error:
        parse_duration(text, "--timeout")

    assert str(error.value).startswith("--timeout: got")


def test_parse_duration_refuses_more_than_a_year():
    with pytest.raises(ConfigError, match="at most a year"):
        parse_duration("9000h", "--timeout")


@pytest.mark.parametrize("seconds, shown", [(0, "0s"), (59, "59s"), (119, "119s"), (200, "3m20s"), (600, "10m"),
                                            (7200, "120m"), (3 * 3600 + 60, "3h1m"), (20 * 3600, "20h"),
                                            (3 * 86400 + 4 * 3600, "3d4h"), (45 * 86400, "45d"),
                                            (800 * 86400, "2y70d"), (-5, "0s")])
def test_human_duration_like_kubectls_age(seconds, shown):
    assert human_duration(seconds) == shown
