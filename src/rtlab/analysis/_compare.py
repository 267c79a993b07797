"""Comparing two cases: ratios, a rank test and CI thresholds (``--fail-if``)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from rtlab.analysis._metrics import RATIO_KEYS, metric
from rtlab.analysis._stats import CaseStats
from rtlab.errors import UserError
from rtlab.units import format_ns, parse_duration_ns

if TYPE_CHECKING:
    from rtlab.analysis._below import Share
    from rtlab.analysis._pwcet import Estimate


def _ratio(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == 0:
        return 1.0 if b == 0 else math.nan
    return b / a


def ratio_table(a: CaseStats, b: CaseStats) -> dict[str, float]:
    """b / a for each of `RATIO_KEYS`; NaN when a is 0 (1.0 when both are) or missing."""
    return {k: _ratio(float(getattr(a, k)), float(getattr(b, k))) for k in RATIO_KEYS}


@dataclass(frozen=True)
class RankTest:
    """Two-sided Mann-Whitney U test of B against A.

    ``effect_size`` is the probability of superiority P(B > A) + 0.5 P(B = A): 0.5
    means no tendency, above 0.5 that B's latencies tend to be larger.
    """

    statistic: float  # U of B
    pvalue: float
    effect_size: float
    n_a: int  # samples used (after subsampling)
    n_b: int
    subsampled: bool  # True when a side had more than max_n samples
    total_a: int = 0  # samples offered
    total_b: int = 0


def _subsample(
    x: np.ndarray | Sequence[np.ndarray], max_n: int, rng: np.random.Generator
) -> tuple[np.ndarray, int, bool]:
    arrays = [x] if isinstance(x, np.ndarray) else [np.asarray(a) for a in x]
    arrays = [a.reshape(-1) for a in arrays]
    total = sum(a.size for a in arrays)
    if total <= max_n:
        data = np.concatenate(arrays) if arrays else np.empty(0, np.int64)
        return data.astype(np.int64, copy=False), total, False
    pick = np.sort(rng.choice(total, size=max_n, replace=False, shuffle=False))
    offsets = np.cumsum([0] + [a.size for a in arrays])
    which = np.searchsorted(offsets, pick, side="right") - 1
    out = np.empty(max_n, dtype=np.int64)
    for i, a in enumerate(arrays):
        sel = which == i
        out[sel] = a[pick[sel] - offsets[i]]
    return out, total, True


def rank_test(
    a_samples: np.ndarray | Sequence[np.ndarray],
    b_samples: np.ndarray | Sequence[np.ndarray],
    max_n: int = 200_000,
    seed: int = 0,
) -> RankTest:
    """Mann-Whitney U (two-sided) of B against A, on heavy-tailed data without a t-test.

    A side with more than ``max_n`` samples is subsampled uniformly without
    replacement with a fixed seed (``subsampled`` says so), so the result is repeatable.
    """
    rng = np.random.default_rng(seed)
    a, total_a, sub_a = _subsample(a_samples, max_n, rng)
    b, total_b, sub_b = _subsample(b_samples, max_n, rng)
    if a.size == 0 or b.size == 0:
        raise UserError("rank test needs samples on both sides")
    from scipy.stats import mannwhitneyu  # slow to import: only when testing

    res = mannwhitneyu(b, a, alternative="two-sided")
    u = float(res.statistic)
    return RankTest(
        statistic=u,
        pvalue=float(res.pvalue),
        effect_size=u / (float(a.size) * float(b.size)),
        n_a=int(a.size),
        n_b=int(b.size),
        subsampled=sub_a or sub_b,
        total_a=total_a,
        total_b=total_b,
    )


_FAIL_IF = re.compile(
    r"\s*(?:pwcet\s*\(\s*(?P<p>[^()]*?)\s*\)|(?P<metric>[a-z][a-z0-9.]*))\s*>\s*"
    r"(?:(?P<ratio>\d+(?:\.\d*)?|\.\d+)\s*x|\+\s*(?P<pct>\d+(?:\.\d*)?|\.\d+)\s*%"
    r"|\+\s*(?P<inc>[^\s+].*?)|(?P<abs>[0-9.][^\s]*?))\s*",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Threshold:
    """A CI threshold on B's metric: at most A's times a ratio, A's plus an increase, or
    (kind "absolute", A unused) a fixed limit. Metric "pwcet" (``p`` set) is the latency
    exceeded with probability p per activation: see `check_pwcet`."""

    expr: str
    metric: str  # CaseStats field, or "pwcet"
    kind: Literal["ratio", "increase", "absolute"]
    value: float  # ratio (kind "ratio"), else ns (ns² for a variance), a share for "below"
    p: float | None = None  # the pWCET probability (metric "pwcet")
    bound_ns: int | None = None  # metric "below": fail when B's share at or below is < value

    def limit(self, a: CaseStats) -> float:
        if self.kind == "absolute":
            return self.value
        base = float(getattr(a, self.metric))
        return base * self.value if self.kind == "ratio" else base + self.value

    def _text(self, v: float) -> str:
        return metric(self.metric).text(v)

    def check(self, a: CaseStats, b: CaseStats) -> tuple[bool, str]:
        """(exceeded, one-line description). A missing value (no samples) counts as exceeded."""
        va, vb = float(getattr(a, self.metric)), float(getattr(b, self.metric))
        show = self._text  # a variance in ns²
        name = self.expr.strip()
        if math.isnan(vb) or (math.isnan(va) and self.kind != "absolute"):
            return True, f"{name}: cannot compare, a side has no {self.metric} (exceeded)"
        limit = self.limit(a)
        exceeded = vb > limit
        verdict = "exceeded" if exceeded else "ok"
        if self.kind == "absolute":
            return exceeded, f"{name}: {show(vb)} (limit {show(limit)}): {verdict}"
        if self.kind == "ratio":
            r = _ratio(va, vb)
            change = "n/a" if math.isnan(r) else f"{r:.3g}x"
            bound = f"{self.value:g}x"
        else:
            change = ("+" if vb >= va else "-") + show(abs(vb - va))
            bound = "+" + show(self.value)
        return exceeded, (
            f"{name}: {show(va)} -> {show(vb)} ({change}, limit {bound} = {show(limit)}): {verdict}"
        )

    def check_below(self, b: Share | None) -> tuple[bool, str]:
        """(exceeded, one line) for metric "below": B's share of samples at or below the
        bound against the least share allowed; from histograms, the lowest share the data
        allow is judged. No samples or no answer counts as exceeded."""
        name = self.expr.strip()
        if b is None or not b.count or math.isnan(b.value):
            return True, f"{name}: cannot judge, no share of samples known (exceeded)"
        low = b.range[0]
        exceeded = low < self.value
        shown = f"{b.value:.6g}" if b.exact else f"{b.value:.6g} (at least {low:.6g})"
        return exceeded, (
            f"{name}: {shown} of {b.count:,} samples at or below {format_ns(b.bound_ns)} "
            f"(least allowed {self.value:.6g}): {'exceeded' if exceeded else 'ok'}"
        )

    def check_pwcet(self, a: Estimate, b: Estimate) -> tuple[bool, str]:
        """(exceeded, one line) for metric "pwcet": a fixed limit is compared with the upper
        end of B's interval (what can be claimed at its confidence), a ratio or increase
        with the estimates. A refusal counts as exceeded: nothing can be claimed."""
        name = self.expr.strip()
        for side, e in (("B", b), ("A", a)):
            if e.refused is not None and (side == "B" or self.kind != "absolute"):
                return True, f"{name}: no estimate for {side}: {e.refused} (exceeded)"
        assert b.value_ns is not None and b.hi_ns is not None
        shown = f"{format_ns(b.value_ns)} [{format_ns(b.lo_ns)}, {format_ns(b.hi_ns)}]"
        if self.kind == "absolute":
            exceeded = b.hi_ns > self.value
            return exceeded, (
                f"{name}: {shown} (upper end against the limit {format_ns(self.value)}): "
                f"{'exceeded' if exceeded else 'ok'}"
            )
        va, vb = float(a.value_ns or 0.0), float(b.value_ns)
        limit = va * self.value if self.kind == "ratio" else va + self.value
        exceeded = vb > limit
        return exceeded, (
            f"{name}: {format_ns(va)} -> {shown} (limit {format_ns(limit)}): "
            f"{'exceeded' if exceeded else 'ok'}"
        )


def parse_fail_if(expr: str, rate_hz: float | None = None) -> Threshold:
    """Parse ``p99>1.2x``, ``max>1.5x``, ``mean>+20us``, ``p99.9>+10%`` into a Threshold.

    Metrics: min, mean|avg, median|p50, p90, p95, p99, p99.9, p99.99, max, jitter, stddev,
    variance (its fixed limits and increases in squared units: ``variance>25us^2``), and
    ``pwcet(P)``: the latency exceeded with probability P per activation (``1e-9``, or a
    time between exceedances such as ``10y`` at RATE_HZ, default 1 kHz).
    Limits: a ratio ``Nx`` (N > 0), a relative increase ``+N%``, an absolute increase
    ``+DURATION`` (ns, us, µs, ms, s, m, h) or a fixed limit ``DURATION`` (``max>100us``:
    B's max above 100 µs, whatever A's). ``below:B<SHARE`` fails when less than SHARE
    (``0.999`` or ``99.9%``) of B's samples are at or below the bound B
    (``below:100us<0.999``). Bad expressions raise UserError.
    """
    text = str(expr)
    if text.strip().lower().startswith("below"):
        return _parse_below(text)
    m = _FAIL_IF.fullmatch(text)
    if m is None:
        raise UserError(
            f"bad --fail-if {text!r}: expected METRIC>RATIOx or METRIC>+DURATION, e.g. p99>1.2x"
        )
    p = None
    if m.group("p") is not None:
        from rtlab.analysis._pwcet_terms import DEFAULT_RATE_HZ, parse_probability

        try:
            p = parse_probability(m.group("p"), rate_hz or DEFAULT_RATE_HZ)
        except UserError as e:
            raise UserError(f"bad --fail-if {text!r}: {e}") from None
        key = "pwcet"
    else:
        try:
            found = metric(m.group("metric"))
        except UserError as e:
            raise UserError(f"bad --fail-if {text!r}: {e}") from None
        if found.unit not in ("ns", "ns2"):
            raise UserError(f"bad --fail-if {text!r}: {found.label} is not a latency")
        key = found.key
        if found.unit == "ns2" and m.group("ratio") is None and m.group("pct") is None:
            kind2: Literal["increase", "absolute"] = "increase" if m.group("inc") else "absolute"
            return Threshold(text, key, kind2, _squared_ns(m.group("inc") or m.group("abs"), text))
    if m.group("ratio") is not None:
        value = float(m.group("ratio"))
        if not value > 0:
            raise UserError(f"bad --fail-if {text!r}: the ratio must be above 0")
        return Threshold(text, key, "ratio", value, p)
    if m.group("pct") is not None:
        return Threshold(text, key, "ratio", 1.0 + float(m.group("pct")) / 100.0, p)
    kind: Literal["increase", "absolute"] = "increase" if m.group("inc") else "absolute"
    try:
        ns = parse_duration_ns(m.group("inc") or m.group("abs"))
    except UserError as e:
        raise UserError(f"bad --fail-if {text!r}: {e}") from None
    return Threshold(text, key, kind, float(ns), p)


_SQUARED = re.compile(r"\s*(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[a-zµ]+)\s*(?:\^\s*2|²)\s*")
_BELOW = re.compile(
    r"\s*below\s*:\s*(?P<bound>[^<\s]+)\s*<\s*(?P<share>\d+(?:\.\d*)?|\.\d+)\s*(?P<pct>%)?\s*",
    re.IGNORECASE,
)


def _squared_ns(limit: str, text: str) -> float:
    """ "25us^2" or "25µs²" (a variance) in ns²."""
    m = _SQUARED.fullmatch(limit)
    if m is None:
        raise UserError(
            f"bad --fail-if {text!r}: a variance's limit is a squared duration, e.g. 25us^2"
        )
    try:
        scale = parse_duration_ns("1" + m.group("unit"))
    except UserError as e:
        raise UserError(f"bad --fail-if {text!r}: {e}") from None
    return float(m.group("num")) * float(scale) ** 2


def _parse_below(text: str) -> Threshold:
    m = _BELOW.fullmatch(text)
    if m is None:
        raise UserError(
            f"bad --fail-if {text!r}: expected below:BOUND<SHARE, e.g. below:100us<0.999"
        )
    try:
        bound = parse_duration_ns(m.group("bound"))
    except UserError as e:
        raise UserError(f"bad --fail-if {text!r}: {e}") from None
    share = float(m.group("share")) / (100.0 if m.group("pct") else 1.0)
    if not 0 < share <= 1:
        raise UserError(f"bad --fail-if {text!r}: the share must be in (0, 1] or (0, 100]%")
    return Threshold(text, "below", "absolute", share, bound_ns=int(bound))
