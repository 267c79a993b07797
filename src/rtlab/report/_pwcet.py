"""pWCET in the report: P(latency > deadline) per activation for the verdict, and the fitted
tail with its band for the exceedance plot (docs/pwcet.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rtlab.analysis import TailFit, advice_text, once_per, p_text
from rtlab.analysis._pwcet_fit import GPDModel
from rtlab.units import format_ns

#: Where the fitted tail of the exceedance plot ends when no probability was asked for.
DEFAULT_P = 1e-9
#: The verdict row's pWCET fields (also CSV columns), None when not computed.
FIELDS = ("p_exceed", "p_exceed_lo", "p_exceed_hi", "p_exceed_case", "p_exceed_method",
          "p_exceed_refused", "p_exceed_advice", "p_exceed_advice_activations")  # fmt: skip


def series_exceedance(cases: list, deadline_ns: int) -> dict[str, Any]:
    """The verdict row's fields for one series: the case whose P(latency > deadline) has the
    highest upper end, or the first refusal (then no bound holds for the series)."""
    out: dict[str, Any] = dict.fromkeys(FIELDS)
    found = [(c, c.tail.exceedance(deadline_ns)) for c in cases if c.tail is not None]
    if not found:
        return out
    refused = [(c, e) for c, e in found if e.refused is not None]
    if refused:
        c, e = refused[0]
        out["p_exceed_case"] = c.case.name
        out["p_exceed_refused"] = e.refused
        out["p_exceed_advice"] = e.advice
        out["p_exceed_advice_activations"] = e.advice_activations
        return out
    c, e = max(found, key=lambda ce: ce[1].hi)
    out.update(
        p_exceed=e.prob,
        p_exceed_lo=e.lo,
        p_exceed_hi=e.hi,
        p_exceed_case=c.case.name,
        p_exceed_method=e.method,
    )
    return out


def _short(reason: str) -> str:
    """The conclusion of a refusal, without its measurements."""
    return reason.split(" (")[0]


def cell(v: dict[str, Any], rate_hz: float) -> str:
    if v.get("p_exceed_refused"):
        return f"no estimate ({v['p_exceed_case']}): {_short(v['p_exceed_refused'])}"
    if v.get("p_exceed_hi") is None:
        return "-"
    return (
        f"≤ {p_text(v['p_exceed_hi'])} (estimate {p_text(v['p_exceed'])}; "
        f"{once_per(v['p_exceed_hi'], rate_hz)} at worst)"
    )


def headline(v: dict[str, Any], rate_hz: float, confidence: float = 0.9) -> str | None:
    """One sentence for the verdict: measured misses, then the bound or why there is none."""
    dl = v.get("deadline_ns")
    if dl is None or (v.get("p_exceed_hi") is None and not v.get("p_exceed_refused")):
        return None
    misses = v.get("misses") or 0
    head = f"{v['series']}: {misses} measured miss{'es' if misses != 1 else ''}; "
    what = f"P(latency > {format_ns(dl)}) per activation"
    if v.get("p_exceed_refused"):
        text = head + f"no bound on {what}: {v['p_exceed_case']}: {v['p_exceed_refused']}."
        helps = advice_text(v.get("p_exceed_advice"), v.get("p_exceed_advice_activations"),
                            rate_hz)  # fmt: skip
        return text if helps is None else f"{text} What would help: {helps}."
    hi, lo, est = v["p_exceed_hi"], v["p_exceed_lo"], v["p_exceed"]
    return (
        head + f"{what} ≤ {p_text(hi)} ({confidence:.0%} interval {p_text(lo)}–{p_text(hi)}, "
        f"estimate {p_text(est)}, {v['p_exceed_case']}, {v['p_exceed_method']}), i.e. no more "
        f"often than {once_per(hi, rate_hz)}."
    )


@dataclass
class FittedCurve:
    """A fitted tail for a plot: latency X (ns) exceeded with probability P, the interval
    [LO, HI] (ns) at the probabilities BAND_P, and the estimate at the last probability."""

    p: np.ndarray
    x: np.ndarray
    band_p: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    value_ns: float
    value_lo_ns: float
    value_hi_ns: float
    method: str


def fitted_curve(tail: TailFit | None, p_end: float, points: int = 5) -> FittedCurve | None:
    """The fitted tail (x ns at probability y) from where it starts down to P_END, and its
    band (profile-likelihood interval at POINTS probabilities), or None when refused."""
    if tail is None:
        return None
    end = tail.estimate(p_end)
    if end.refused is not None:
        return None
    f = next(f for f in tail.fits if f.method == end.method)
    model, method = f.model, end.method
    if model is None or method is None:  # an estimate has both
        return None
    # peaks over threshold: from the threshold's exceedance probability
    start = model.zeta if isinstance(model, GPDModel) else min(10.0 / tail.n, 0.1)
    if not p_end < start:
        return None
    ys = np.geomspace(start * 0.999, p_end, 40)
    x = np.asarray(model.isf(ys), dtype=float)
    band_p = np.geomspace(start * 0.9, p_end, points)
    ests = [tail.estimate(float(p)) for p in band_p]
    keep = [i for i, e in enumerate(ests) if e.refused is None]
    if not keep:
        return None
    return FittedCurve(
        p=ys,
        x=x,
        band_p=band_p[keep],
        lo=np.array([ests[i].lo_ns for i in keep], dtype=float),
        hi=np.array([ests[i].hi_ns for i in keep], dtype=float),
        value_ns=float(end.value_ns or math.nan),
        value_lo_ns=float(end.lo_ns or math.nan),
        value_hi_ns=float(end.hi_ns or math.nan),
        method=method,
    )
