"""Comparing experiments case by case: which cases match, their ratios, a rank test, the
CI thresholds they exceed and the wins per metric. `rtlab compare` and the report's
comparison both come from `compare_sides`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from rtlab.analysis._below import Share
from rtlab.analysis._compare import RankTest, Threshold, rank_test, ratio_table
from rtlab.analysis._pwcet import Estimate, TailFit, refused_fit
from rtlab.analysis._stats import CaseStats

#: Significance level of the rank test.
ALPHA = 0.01


class CaseLike(Protocol):
    series: str
    name: str


@dataclass
class Side:
    """One experiment of a comparison, as the analysis sees it."""

    id: str
    setup: str  # what tells this experiment apart from the others
    cases: Sequence[Any]  # finished cases (CaseLike), in the experiment's order
    stats: Callable[[Any], CaseStats]
    samples: Callable[[Any], Any]  # raw samples of a case, or None
    tail: Callable[[Any], TailFit] | None = None  # the case's extreme-value fit (pWCET)
    below: Callable[[Any, int], Share] | None = None  # share of a case's samples <= bound
    _cache: dict[int, Any] = field(default_factory=dict, repr=False)
    _tails: dict[int, TailFit] = field(default_factory=dict, repr=False)

    def cached_samples(self, case: Any) -> Any:
        key = id(case)
        if key not in self._cache:
            self._cache[key] = self.samples(case)
        return self._cache[key]

    def cached_tail(self, case: Any) -> TailFit:
        key = id(case)
        if key not in self._tails:
            self._tails[key] = (
                self.tail(case) if self.tail is not None else refused_fit("no samples given")
            )
        return self._tails[key]


@dataclass
class ComparisonRow:
    series: str
    case: str
    label: str
    baseline: str
    other: str
    baseline_setup: str
    other_setup: str
    baseline_stats: CaseStats
    other_stats: CaseStats
    ratios: dict[str, float]
    rank_test: RankTest | None
    pwcet: dict[float, tuple[Estimate, Estimate]] = field(default_factory=dict)  # p: (A, B)
    shares: dict[int, tuple[Share, Share]] = field(default_factory=dict)  # bound: (A, B)

    @property
    def significant(self) -> bool | None:
        return None if self.rank_test is None else self.rank_test.pvalue < ALPHA

    def to_dict(self) -> dict[str, Any]:
        return {
            **{k: getattr(self, k) for k in ("series", "case", "label", "baseline", "other")},
            "baseline_setup": self.baseline_setup,
            "other_setup": self.other_setup,
            "baseline_stats": self.baseline_stats.to_dict(),
            "other_stats": self.other_stats.to_dict(),
            "ratios": self.ratios,
            "rank_test": None if self.rank_test is None else asdict(self.rank_test),
            "significant": self.significant,
            "pwcet": [
                {"p": p, "baseline": a.to_dict(), "other": b.to_dict()}
                for p, (a, b) in self.pwcet.items()
            ],
            "below": [
                {"bound_ns": bound, "baseline": a.to_dict(), "other": b.to_dict()}
                for bound, (a, b) in self.shares.items()
            ],
        }


@dataclass
class Comparison:
    sides: list[Side]
    matched: list[tuple[str, str, list[Any]]]  # (series, case name, the case of each side)
    rows: list[ComparisonRow]  # one per matched case and side after the first
    failures: list[str]  # thresholds exceeded, one line each

    def wins(self, key: str) -> dict[str, tuple[list[int], int]]:
        """Per series: how often each side has the lowest KEY, and the cases compared."""
        out: dict[str, tuple[list[int], int]] = {}
        for series, _, cases in self.matched:
            tally, n = out.get(series, ([0] * len(self.sides), 0))
            vals = [float(getattr(s.stats(c), key)) for s, c in zip(self.sides, cases, strict=True)]
            if not any(math.isnan(v) for v in vals) and len(set(vals)) > 1:
                tally[vals.index(min(vals))] += 1
            out[series] = (tally, n + 1)
        return out


def match_cases(sides: Sequence[Side]) -> list[tuple[str, str, list[Any]]]:
    """Cases finished in every experiment, matched by series and case name, in the
    baseline's order."""
    lookup = [{(c.series, c.name): c for c in s.cases} for s in sides[1:]]
    out = []
    for c in sides[0].cases:
        others = [m.get((c.series, c.name)) for m in lookup]
        if all(o is not None for o in others):
            out.append((c.series, c.name, [c, *others]))
    return out


def compare_sides(
    sides: Sequence[Side],
    thresholds: Sequence[Threshold] = (),
    *,
    rank: bool = True,
    pwcet: Sequence[float] = (),
    below: Sequence[int] = (),
) -> Comparison:
    """Every side after the first against the first (the baseline); with the pWCET at each
    probability of PWCET and of the pwcet thresholds (one tail fit per case), and the share
    of samples at or below each bound of BELOW (when the sides can tell it)."""
    sides = list(sides)
    ps = sorted({*pwcet, *(t.p for t in thresholds if t.p is not None)})
    base = sides[0]
    matched = match_cases(sides)
    rows, failures = [], []
    for series, name, cases in matched:
        a = base.stats(cases[0])
        sa = base.cached_samples(cases[0]) if rank else None
        for side, other in zip(sides[1:], cases[1:], strict=True):
            b = side.stats(other)
            sb = side.cached_samples(other) if sa is not None else None
            rows.append(
                ComparisonRow(
                    series=series,
                    case=name,
                    label=getattr(cases[0], "label", name),
                    baseline=base.id,
                    other=side.id,
                    baseline_setup=base.setup,
                    other_setup=side.setup,
                    baseline_stats=a,
                    other_stats=b,
                    ratios=ratio_table(a, b),
                    rank_test=rank_test(sa, sb) if sa is not None and sb is not None else None,
                    pwcet={
                        p: (
                            base.cached_tail(cases[0]).estimate(p),
                            side.cached_tail(other).estimate(p),
                        )
                        for p in ps
                    },
                    shares={
                        bound: (base.below(cases[0], bound), side.below(other, bound))
                        for bound in below
                        if base.below is not None and side.below is not None
                    },
                )
            )
            for t in thresholds:
                if t.p is not None:
                    exceeded, text = t.check_pwcet(*rows[-1].pwcet[t.p])
                elif t.bound_ns is not None:
                    share = side.below(other, t.bound_ns) if side.below is not None else None
                    exceeded, text = t.check_below(share)
                else:
                    exceeded, text = t.check(a, b)
                if exceeded:
                    failures.append(f"{series} / {name}: {side.setup}: {text}")
    return Comparison(sides, matched, rows, failures)
