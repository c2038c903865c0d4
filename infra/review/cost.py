"""Estimated monthly TPU cost of a fleet and of a change to it, at list price.

A reviewer weighs "adds 64 v6e chips" better as "adds ~$38k a month". The estimate is chips x hours a month
x a per-chip-hour rate for the chip's generation and capacity mode, from a dated price table (`prices.yaml`
beside this module), which a stack may override with its own file. Every rendering says it is an estimate
and names the table's date and source: prices change, discounts are negotiated, pools autoscale.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictStr, ValidationError

from tpuplane.infra.args import Source, validation_problems
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.fleet.catalog import GENERATIONS
from tpuplane.infra.redaction import redact_text
from tpuplane.infra.yaml_input import read_yaml_file
from tpuplane.infra.review.summary import CAPACITY_MODES, FleetSummary, PoolGroup, range_text

DEFAULT_PRICES = Path(__file__).with_name("prices.yaml")
_GENERATION_NAMES = tuple(g.generation for g in GENERATIONS)


def _number(value: object) -> object:
    """A number as YAML writes one: never `true` or `'2.70'`, and finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("a number")
    if not math.isfinite(value):
        raise ValueError("a finite number")
    return value


Number = Annotated[float, BeforeValidator(_number)]
# The dearest sane list price of a chip-hour, with room to spare (today's are a few dollars): a larger rate is a
# typo or an attack, whose total would print as `$inf/month` (1e308 x chips x hours overflows).
MAX_CHIP_HOUR = 1e6


class PriceFile(BaseModel):
    """A price file as written: every key optional (a file overrides the shipped table key by key), strictly
    typed, no other key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    date: StrictStr | None = None
    source: StrictStr | None = None
    currency: StrictStr | None = Field(None, pattern=r"^[A-Z]{3}$")
    hours_per_month: Annotated[Number, Field(gt=0, le=744)] | None = None
    chip_hour: dict[StrictStr, dict[StrictStr, Annotated[Number, Field(ge=0, le=MAX_CHIP_HOUR)]]] = {}


_PRICE_HINT = f"see {DEFAULT_PRICES.name} in tpuplane.infra.review: chip_hour: {{v6e: {{spot: 0.81}}}}"


def _read_price_file(doc: object, origin: str) -> PriceFile:
    """`doc` read as a price file; one ConfigError names every bad key, including generations the catalog does
    not know and capacity modes a pool cannot have (a typo would price nothing, silently)."""
    source = Source.args(f"{origin}:", PriceFile)  # the file's own spelling: snake_case keys
    if not isinstance(doc, Mapping):
        raise ConfigError.at(origin, type(doc).__name__, "a mapping with date, source and chip_hour", _PRICE_HINT)
    try:
        prices = PriceFile.model_validate(doc)
    except ValidationError as exc:
        raise ConfigError([Problem(p.path, p.given, p.allowed, p.hint or _PRICE_HINT)
                           for p in validation_problems(exc, source)]) from None
    problems = []
    for generation, modes in prices.chip_hour.items():
        if generation not in _GENERATION_NAMES:
            problems.append(Problem(source.path("chip_hour", generation), generation,
                                    f"a TPU generation: one of {', '.join(_GENERATION_NAMES)}", _PRICE_HINT))
        problems += [Problem(source.path("chip_hour", generation, mode), mode,
                             f"a capacity mode: one of {', '.join(CAPACITY_MODES)}", _PRICE_HINT)
                     for mode in modes if mode not in CAPACITY_MODES]
    if problems:
        raise ConfigError(problems)
    return prices


@dataclass(frozen=True)
class PriceTable:
    date: str
    source: str
    currency: str
    hours_per_month: float
    chip_hour: Mapping[str, Mapping[str, float]]  # generation -> capacity mode -> rate

    def rate(self, generation: str, mode: str) -> float | None:
        return self.chip_hour.get(generation, {}).get(mode)

    @property
    def note(self) -> str:
        """The line every cost rendering carries."""
        return (f"Estimated at list prices of {self.date} ({self.source}), {self.hours_per_month:g} h/month; "
                "not a quote.")


def load_prices(override: Path | None = None) -> PriceTable:
    """The shipped table, with `override`'s date, source and rates merged over it. A source URL's credentials
    never reach a report."""
    base = _read_price_file(yaml.safe_load(DEFAULT_PRICES.read_text()), str(DEFAULT_PRICES))
    rates = {g: dict(m) for g, m in base.chip_hour.items()}
    if override is not None:
        # strict and bounded like every input file: no repeated keys, no .inf/.nan rates
        origin = f"--prices {override}"
        extra = _read_price_file(read_yaml_file(override, origin, "YAML price table"), origin)
        for generation, modes in extra.chip_hour.items():
            rates.setdefault(generation, {}).update({mode: float(rate) for mode, rate in modes.items()})
        base = base.model_copy(update=extra.model_dump(exclude_none=True, exclude={"chip_hour"}))
    return PriceTable(base.date or "?", redact_text(base.source or "?"), base.currency or "USD",
                      float(base.hours_per_month or 730), rates)


@dataclass(frozen=True)
class CostLine:
    """Chips of one generation on one capacity mode, and what they cost a month (None: no price known): at most,
    with every group at its maximum, and (`min_*`) with the groups that scale at their minimum. A line of a change
    holds the differences: what the change adds (+) or removes (-) at the maximum and at the minimum."""

    generation: str
    capacity: str
    chips: int
    chip_hours: float
    monthly: float | None
    min_chips: int
    min_chip_hours: float
    monthly_min: float | None

    @property
    def scales(self) -> bool:
        return self.min_chips != self.chips

    @property
    def chips_text(self) -> str:
        return range_text(self.min_chips, self.chips)

    @property
    def chip_hours_text(self) -> str:
        return range_text(self.min_chip_hours, self.chip_hours, ",.0f")


def fleet_cost(summary: FleetSummary, prices: PriceTable) -> tuple[CostLine, ...]:
    minimum = summary.chips_by_mode(minimum=True)
    return tuple(_line(generation, mode, minimum[generation, mode], chips, prices)
                 for (generation, mode), chips in summary.chips_by_mode().items())


def cost_delta(base: FleetSummary, head: FleetSummary, prices: PriceTable) -> tuple[CostLine, ...]:
    """Per generation and capacity mode, the chips (and money) `head` adds (+) or removes (-) from `base`, at the
    groups' maximum and at their minimum: a group that starts to scale from zero keeps its maximum and lowers its
    floor."""
    before, after = base.chips_by_mode(), head.chips_by_mode()
    before_min, after_min = base.chips_by_mode(minimum=True), head.chips_by_mode(minimum=True)
    lines = []
    for key in sorted(set(before) | set(after)):
        high = after.get(key, 0) - before.get(key, 0)
        low = after_min.get(key, 0) - before_min.get(key, 0)
        if high or low:
            lines.append(_line(*key, low, high, prices))
    return tuple(lines)


def _line(generation: str, mode: str, min_chips: int, chips: int, prices: PriceTable) -> CostLine:
    """The one computation of chip-hours and money: chips x hours a month x the rate."""
    rate = prices.rate(generation, mode)

    def monthly(hours: float) -> float | None:
        return None if rate is None else round(hours * rate, 2)

    hours, min_hours = chips * prices.hours_per_month, min_chips * prices.hours_per_month
    return CostLine(generation, mode, chips, hours, monthly(hours), min_chips, min_hours, monthly(min_hours))


def total(lines: tuple[CostLine, ...], *, minimum: bool = False) -> float:
    """The month's estimate at the groups' maximum, or with `minimum` at their minimum."""
    return round(sum((line.monthly_min if minimum else line.monthly) or 0.0 for line in lines), 2)


def totals_text(lines: tuple[CostLine, ...]) -> tuple[str, str]:
    """The chips and chip-hours a month of `lines` together, as ranges when some of them scale."""
    return (range_text(sum(line.min_chips for line in lines), sum(line.chips for line in lines)),
            range_text(sum(line.min_chip_hours for line in lines), sum(line.chip_hours for line in lines), ",.0f"))


def money_range(low: float | None, high: float | None, currency: str = "USD") -> str:
    """`$0 – $38,016` for what scales, `$38,016` for what does not."""
    if low is None or low == high:
        return money(high, currency)
    return f"{money(low, currency)} – {money(high, currency)}"


def change_text(low: float | None, high: float | None, render: Callable[[float | None], str]) -> str:
    """A change at the groups' minimum and maximum: `+64`, or `min -48 / max +0` when they differ (a group that
    starts to scale from zero lowers its floor, not its ceiling)."""
    return render(high) if low == high else f"min {render(low)} / max {render(high)}"


def unpriced_note(lines: tuple[CostLine, ...]) -> str:
    """What `total` could not count, "" when every chip has a price: `not counting 64 tpu7x on-demand chips (no
    price)`."""
    counts = [(max(abs(line.chips), abs(line.min_chips)), line) for line in lines if line.monthly is None]
    unpriced = [f"{n} {line.generation} {line.capacity} chip{'' if n == 1 else 's'}" for n, line in counts]
    return f"not counting {', '.join(unpriced)} (no price)" if unpriced else ""


def money(value: float | None, currency: str = "USD", signed: bool = False) -> str:
    """`$38,016` (whole units: an estimate has no cents); `no price` when the table has no rate."""
    if value is None:
        return "no price"
    sign = ("+" if value > 0 else "-" if value < 0 else "") if signed else ("-" if value < 0 else "")
    symbol = "$" if currency == "USD" else f"{currency} "
    return f"{sign}{symbol}{abs(value):,.0f}"


def group_cost(group: PoolGroup, prices: PriceTable) -> str:
    """A pool group's monthly estimate, a range from its minimum to its maximum when it scales."""
    line = _line(group.generation, group.capacity, group.min_chips, group.chips, prices)
    return money_range(line.monthly_min, line.monthly, prices.currency)
