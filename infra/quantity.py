"""Kubernetes quantities in the form the API server stores them, so what tpuplane applies is what it reads back.

The API server (and every webhook that decodes an object into Go types, as Kueue's and JobSet's do) rewrites a
quantity into its canonical form: `655360Mi` becomes `640Gi`, `1000m` becomes `1`, `2000` becomes `2k`. A manifest
that says otherwise is changed on every apply, and Pulumi's next preview shows an update that never settles. The
rules are those of `k8s.io/apimachinery/pkg/api/resource.Quantity.String`:

- the suffix family stays the one given: binary (Ki, Mi, Gi, ...) or decimal (m, k, M, G, ...; none);
- a binary amount that is not whole, or is under 1024 in size, is written in decimal instead;
- the amount is written with the largest suffix of its family that keeps it whole (decimal: steps of 10^3).

`parse_quantity` is the one reader of a quantity anywhere in tpuplane: a manifest's requests and limits, a queue's
quota, a storage size, a live object's status. It takes the API server's grammar and refuses what Kubernetes
cannot hold (2^63 or more in base units: `1e999999999` is text, not work), so no sum of quantities overflows.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Union

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal("1e3"),
            "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"),
            "E": Decimal("1e18")}
_DECIMAL_OUT = ("E", "P", "T", "G", "M", "k", "", "m", "u", "n")  # largest first

Amount = Union[int, str]

QUANTITY_ALLOWED = "a Kubernetes quantity such as 4, 500m or 16Gi, below 2^63 (8Ei)"
LIMIT = Decimal(2**63)  # Kubernetes holds a quantity's value in an int64
_NANO = Decimal("1e-9")
# k8s.io/apimachinery's grammar: a signed number, then a binary suffix, a decimal suffix or a decimal exponent
_GRAMMAR = re.compile(r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                      r"(?:(?P<binary>[KMGTPE]i)|(?P<decimal>[numkMGTPE])|[eE](?P<exponent>[+-]?[0-9]+))?")


def _parse(quantity: object) -> tuple[Decimal, bool]:
    """(value in base units, binary?) of a quantity: text, or a number as YAML and JSON write one."""
    if isinstance(quantity, bool) or not isinstance(quantity, (int, float, str)):
        raise ValueError(f"not a quantity: {type(quantity).__name__}")
    match = _GRAMMAR.fullmatch(str(quantity))
    if match is None:
        raise ValueError("not a quantity")
    number = Decimal(match["number"])
    exponent = int(Decimal(match["exponent"] or 0))  # Decimal: an exponent of any length, never str-to-int limits
    factor = Decimal(_BINARY[match["binary"]]) if match["binary"] else _DECIMAL[match["decimal"] or ""]
    size = number.adjusted() + exponent + factor.adjusted()  # the power of ten of the value
    if not number:
        return Decimal(0), bool(match["binary"])
    if size >= 20:  # 10^20 is above 2^63, whatever the digits
        raise ValueError("2^63 or more")
    value = number.scaleb(exponent) * factor if size > -20 else number.scaleb(-20)  # sizes Decimal computes exactly
    if abs(value) >= LIMIT:
        raise ValueError("2^63 or more")
    if value and abs(value) < _NANO:  # the API server rounds a non-zero amount up to the smallest it holds
        value = _NANO.copy_sign(value)
    return value, bool(match["binary"])


def parse_quantity(quantity: object) -> Decimal:
    """A quantity's value in base units (cores, bytes, chips); ValueError when it is not one Kubernetes holds."""
    return _parse(quantity)[0]


def whole_amount(quantity: object) -> int | None:
    """A count (chips, pods) in any form the API server takes or writes it (8000 is stored as `8k`); None when it
    is not a quantity, or not a whole one of at least 0."""
    try:
        value = parse_quantity(quantity)
    except ValueError:
        return None
    return int(value) if value >= 0 and value == value.to_integral_value() else None


def canonical_quantity(quantity: Amount) -> str:
    """The canonical text of a quantity (an int counts as a plain decimal amount)."""
    value, binary = _parse(quantity)
    if value == 0:
        return "0"
    if binary and value == value.to_integral_value() and abs(value) >= 1024:
        whole = int(value)
        for suffix, factor in reversed(_BINARY.items()):
            if whole % factor == 0:
                return f"{whole // factor}{suffix}"
    for suffix in _DECIMAL_OUT:
        scaled = value / _DECIMAL[suffix]
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    return f"{int((value / _DECIMAL['n']).to_integral_value(rounding='ROUND_CEILING'))}n"  # Go rounds up to nano
