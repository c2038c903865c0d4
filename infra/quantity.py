"""Kubernetes quantities in the form the API server stores them, so what tpuplane applies is what it reads back.

The API server (and every webhook that decodes an object into Go types, as Kueue's and JobSet's do) rewrites a
quantity into its canonical form: `655360Mi` becomes `640Gi`, `1000m` becomes `1`, `2000` becomes `2k`. A manifest
that says otherwise is changed on every apply, and Pulumi's next preview shows an update that never settles. The
rules are those of `k8s.io/apimachinery/pkg/api/resource.Quantity.String`:

- the suffix family stays the one given: binary (Ki, Mi, Gi, ...) or decimal (m, k, M, G, ...; none);
- a binary amount that is not whole, or is under 1024 in size, is written in decimal instead;
- the amount is written with the largest suffix of its family that keeps it whole (decimal: steps of 10^3).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Union

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal("1e3"),
            "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"),
            "E": Decimal("1e18")}
_DECIMAL_OUT = ("E", "P", "T", "G", "M", "k", "", "m", "u", "n")  # largest first

Amount = Union[int, str]


def _parse(quantity: Amount) -> tuple[Decimal, bool]:
    """(value, binary?) of an int or a quantity string with an optional suffix."""
    if isinstance(quantity, int):
        return Decimal(quantity), False
    for suffix, factor in _BINARY.items():
        if quantity.endswith(suffix):
            return Decimal(quantity[:-len(suffix)]) * factor, True
    for suffix in sorted(_DECIMAL, key=len, reverse=True):
        if suffix and quantity.endswith(suffix):
            return Decimal(quantity[:-len(suffix)]) * _DECIMAL[suffix], False
    return Decimal(quantity), False


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
