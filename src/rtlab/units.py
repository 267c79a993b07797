"""Durations in ns: parse the CLI's text form ("100us", "1.5s") and format for people."""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from rtlab.errors import UserError

__all__ = ["UNITS_NS", "format_ns", "parse_duration_ns"]

#: ns per unit accepted by :func:`parse_duration_ns`.
UNITS_NS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 MICRO SIGN
    "μs": 1_000,  # U+03BC GREEK SMALL LETTER MU
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}

_DURATION = re.compile(r"(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[a-zµμ]*)")


def parse_duration_ns(text: str) -> int:
    """Parse a duration such as ``100us``, ``1ms``, ``1.5s`` or ``0`` into integer ns.

    A unit is required (ns, us, µs, ms, s, m, h) except for a plain ``0``. Negative
    values and values that are not a whole number of ns are rejected with UserError.
    """
    raw = str(text)
    m = _DURATION.fullmatch(raw.strip())
    if m is None:
        raise UserError(f"bad duration {raw!r}: expected a number and a unit, e.g. 100us, 1.5s")
    num, unit = m.group("num"), m.group("unit")
    try:
        value = Decimal(num)
    except InvalidOperation:  # pragma: no cover - the regex only lets decimals through
        raise UserError(f"bad duration {raw!r}: {num!r} is not a number") from None
    if not unit:
        if value == 0:
            return 0
        raise UserError(f"bad duration {raw!r}: a unit is required (ns, us, ms, s, m, h)")
    if unit not in UNITS_NS:
        raise UserError(f"bad duration {raw!r}: unknown unit {unit!r} (ns, us, ms, s, m, h)")
    ns = value * UNITS_NS[unit]
    if ns != ns.to_integral_value():
        raise UserError(f"bad duration {raw!r}: not a whole number of ns")
    return int(ns)


def format_ns(ns: float | None) -> str:
    """Format a duration in ns with 3 significant digits: 950 ns, 12.3 µs, 1.25 ms, 2.00 s.

    Whole numbers of ns below 1 µs are printed as they are (``7 ns``); NaN and None
    give ``n/a``.
    """
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "n/a"
    if math.isinf(ns):
        return "∞" if ns > 0 else "-∞"
    sign = "-" if ns < 0 else ""
    mag = abs(float(ns))
    if mag == 0:
        return "0 ns"
    # round to 3 significant digits first so 999.7 ns becomes "1.00 µs", not "1000 ns"
    mag = float(f"{mag:.3g}")
    for unit, scale in (("ns", 1.0), ("µs", 1e3), ("ms", 1e6)):
        if mag < scale * 1000:
            v = mag / scale
            if unit == "ns" and float(ns).is_integer():
                return f"{sign}{abs(int(ns))} ns"
            return f"{sign}{_sig3(v)} {unit}"
    return f"{sign}{_sig3(mag / 1e9)} s"


def format_ns2(ns2: float | None) -> str:
    """Format a variance in ns² with 3 significant digits, in the unit its root is shown in:
    950 ns², 12.3 µs², 1.25 ms²; NaN and None give ``n/a``."""
    if ns2 is None or (isinstance(ns2, float) and math.isnan(ns2)):
        return "n/a"
    v = float(ns2)
    if math.isinf(v):
        return "∞"
    for unit, scale in (("ns²", 1.0), ("µs²", 1e6), ("ms²", 1e12)):
        if abs(v) < scale * 1e6:
            return f"{_sig3(v / scale)} {unit}"
    return f"{_sig3(v / 1e18)} s²"


def _sig3(v: float) -> str:
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"
