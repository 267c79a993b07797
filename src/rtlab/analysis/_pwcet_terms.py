"""Operational terms of pWCET: probabilities from times between exceedances and back,
activation rates, and the texts that say them (``once per 11.6 days at 1 kHz``)."""

from __future__ import annotations

import math
import re

from rtlab.errors import UserError
from rtlab.units import UNITS_NS

_YEAR = 365.25 * 86400
_PERIOD_UNITS = {**{k: v / 1e9 for k, v in UNITS_NS.items()}, "min": 60.0, "d": 86400.0,
                 "w": 7 * 86400.0, "y": _YEAR}  # fmt: skip
_NUM = r"(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?"
_RATE = re.compile(rf"\s*{_NUM}\s*(hz|khz|mhz)?\s*", re.IGNORECASE)
_PERIOD = re.compile(rf"\s*{_NUM}\s*([a-zµμ]+)\s*")
#: Activation rate that turns probabilities into time when none is given.
DEFAULT_RATE_HZ = 1000.0


def _num(m: re.Match) -> float:
    return float(m.group(1)) * 10.0 ** int(m.group(2) or 0)


def parse_rate(text: str) -> float:
    """Activations per second from ``1kHz``, ``500 Hz``, ``2000`` or a period ``1ms``."""
    m = _RATE.fullmatch(str(text))
    if m is not None:
        hz = _num(m) * {"hz": 1, "khz": 1e3, "mhz": 1e6}[(m.group(3) or "hz").lower()]
    else:
        m = _PERIOD.fullmatch(str(text))
        unit = m.group(3) if m else ""
        if m is None or unit not in UNITS_NS:
            raise UserError(f"bad rate {text!r}: expected e.g. 1kHz, 500Hz or a period 1ms")
        period = _num(m) * UNITS_NS[unit] / 1e9
        hz = 1.0 / period if period > 0 else 0.0
    if not 0 < hz < 1e10:
        raise UserError(f"bad rate {text!r}: must be above 0")
    return hz


def parse_probability(text: str, rate_hz: float = DEFAULT_RATE_HZ) -> float:
    """A per-activation probability from ``1e-9`` or from a mean time between exceedances
    (``10y``, ``1000h``, ``3d``, ``30min``) at RATE_HZ activations per second."""
    raw = str(text).strip()
    try:
        p = float(raw)
    except ValueError:
        p = math.nan
    if math.isnan(p):
        m = _PERIOD.fullmatch(raw)
        if m is None or m.group(3) not in _PERIOD_UNITS:
            raise UserError(
                f"bad probability {text!r}: expected e.g. 1e-9, or a time between "
                "exceedances such as 10y, 1000h, 3d"
            )
        seconds = _num(m) * _PERIOD_UNITS[m.group(3)]
        if not seconds > 0:
            raise UserError(f"bad probability {text!r}: the time must be above 0")
        p = 1.0 / (seconds * rate_hz)
    if not 0 < p < 1:
        raise UserError(f"bad probability {text!r}: must be between 0 and 1")
    return p


def period_text(seconds: float) -> str:
    """3 significant digits in the largest fitting unit: 950 ms, 12.0 s, 3.20 hours, 31.7 years."""
    if not math.isfinite(seconds):
        return "never"
    for unit, size in (("years", _YEAR), ("days", 86400.0), ("hours", 3600.0),
                       ("minutes", 60.0), ("s", 1.0)):  # fmt: skip
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds * 1e3:.3g} ms"


def rate_text(rate_hz: float) -> str:
    for unit, size in (("MHz", 1e6), ("kHz", 1e3)):
        if rate_hz >= size:
            return f"{rate_hz / size:g} {unit}"
    return f"{rate_hz:g} Hz"


def once_per(p: float, rate_hz: float = DEFAULT_RATE_HZ) -> str:
    """``once per 11.6 days at 1 kHz`` for per-activation probability P."""
    if p <= 0:
        return f"never at {rate_text(rate_hz)}"
    return f"once per {period_text(1.0 / (p * rate_hz))} at {rate_text(rate_hz)}"


def advice_text(advice: str | None, activations: int | None, rate_hz: float) -> str | None:
    """The advice of a refusal, with the run it asks for as a time at RATE_HZ."""
    if advice is None:
        return None
    if activations is None:
        return advice
    return f"{advice} ({period_text(activations / rate_hz)} at {rate_text(rate_hz)})"


def p_text(p: float) -> str:
    """1e-09 -> "1e-9", 2.5e-12 -> "2.5e-12", 0.01 -> "0.01"."""
    if p >= 1e-3:
        return f"{p:.3g}"
    mant, exp = f"{p:.2e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}e{int(exp)}"
