"""What `rtlab show` and `rtlab report` say of a monitor: the maximum per window over time
(the long-term plot of the OSADL QA farm), the distribution of the window maxima, the
gaps, and the worst windows with their explained samples and the kernel log around them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rtlab.monitor._record import MonitorRecord, parse_utc
from rtlab.units import format_ns

#: Worst windows shown, and the windows either side of each whose kernel log is shown.
WORST_SHOWN = 5
AROUND = 1
#: Bins of the distribution of window maxima: 1-2-5 steps from 1 µs to 1 s.
MAXIMA_BINS_NS: tuple[int, ...] = tuple(
    m * 10**e for e in range(3, 10) for m in (1, 2, 5) if m * 10**e <= 1_000_000_000
)


@dataclass
class MonitorView:
    rec: MonitorRecord
    rows: list[dict[str, Any]]

    @property
    def intervals(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["kind"] == "interval"]

    @property
    def gaps(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["kind"] == "gap"]

    def cpus(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.intervals:
            for c in r.get("cpus") or []:
                seen[_cpu_key(c)] = None
        return list(seen)

    def maxima(self) -> list[dict[str, Any]]:
        """One entry per window: its times and each CPU's maximum (ns)."""
        return [
            {
                "seq": r.get("seq"),
                "start_utc": r.get("start_utc"),
                "end_utc": r.get("end_utc"),
                "max_ns": {_cpu_key(c): c.get("max_ns") for c in r.get("cpus") or []},
            }
            for r in self.intervals
        ]

    def per_cpu(self) -> list[dict[str, Any]]:
        out = []
        for key in self.cpus():
            cs = [(r, c) for r in self.intervals for c in r.get("cpus") or [] if _cpu_key(c) == key]
            maxima = np.array([c.get("max_ns") or 0 for _, c in cs if c.get("count")], np.int64)
            worst_r, worst_c = max(cs, key=lambda rc: rc[1].get("max_ns") or 0)
            misses = [c.get("misses") for _, c in cs if c.get("misses") is not None]
            out.append(
                {
                    "cpu": key,
                    "intervals": len(cs),
                    "samples": int(sum(c.get("count") or 0 for _, c in cs)),
                    "max_ns": worst_c.get("max_ns"),
                    "worst_seq": worst_r.get("seq"),
                    "worst_utc": worst_r.get("start_utc"),
                    "median_interval_max_ns": _pct(maxima, 50),
                    "p99_interval_max_ns": _pct(maxima, 99),
                    "worst_p99_ns": max((c.get("p99_ns") or 0 for _, c in cs), default=None),
                    "misses": int(sum(misses)) if misses else None,
                    "overruns": int(sum(c.get("overruns") or 0 for _, c in cs)),
                }
            )
        return out

    def cpu_table(self) -> tuple[list[str], list[list[Any]]]:
        """per_cpu() as a table: (headers, rows of text)."""
        headers = ["CPU", "windows", "samples", "max", "worst window", "median window max",
                   "p99 window max", "misses", "overruns"]  # fmt: skip
        rows = [
            [c["cpu"], c["intervals"], c["samples"], format_ns(c["max_ns"]),
             f"#{c['worst_seq']} {c['worst_utc']}", format_ns(c["median_interval_max_ns"]),
             format_ns(c["p99_interval_max_ns"]), "-" if c["misses"] is None else c["misses"],
             c["overruns"]]
            for c in self.per_cpu()
        ]  # fmt: skip
        return headers, rows

    def distribution(self) -> dict[str, Any]:
        """Counts of window maxima per bin, per CPU: `counts[cpu][i]` those in
        (le_ns[i-1], le_ns[i]] (from 0 for the first), the last count those above the last."""
        edges = np.array([0, *MAXIMA_BINS_NS], np.int64)
        out: dict[str, list[int]] = {}
        for key in self.cpus():
            m = [
                c.get("max_ns") or 0
                for r in self.intervals
                for c in r.get("cpus") or []
                if _cpu_key(c) == key and c.get("count")
            ]
            at = np.searchsorted(edges, np.asarray(m, np.int64), side="left")
            counts = np.bincount(np.minimum(at, len(edges)), minlength=len(edges) + 1)
            out[key] = [int(x) for x in counts[1:]]  # bin i: (edges[i-1], edges[i]]; last: above
        return {"le_ns": list(MAXIMA_BINS_NS), "counts": out}

    def coverage(self) -> dict[str, Any]:
        """The span from the first window's start to the last one's end, the time measured
        in it and the share, and the time in gaps."""
        iv = [r for r in self.intervals if r.get("start_utc") and r.get("end_utc")]
        if not iv:
            return {"first_utc": None, "last_utc": None, "span_s": 0.0, "measured_s": 0.0}
        first, last = iv[0]["start_utc"], iv[-1]["end_utc"]
        span = parse_utc(last) - parse_utc(first)
        measured = sum((r.get("elapsed_ns") or 0) / 1e9 for r in iv)
        return {
            "first_utc": first,
            "last_utc": last,
            "span_s": round(span, 3),
            "measured_s": round(measured, 3),
            "measured_share": round(measured / span, 4) if span > 0 else None,
            "gap_s": round(sum(float(g.get("seconds") or 0) for g in self.gaps), 3),
        }

    def symptoms(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.intervals:
            for name, n in ((r.get("kmsg") or {}).get("symptoms") or {}).items():
                out[name] = out.get(name, 0) + int(n)
        return out

    def worst(self, n: int = WORST_SHOWN) -> list[dict[str, Any]]:
        """The N windows with the largest maximum (any CPU), worst first, each with its
        explained samples and the kernel messages of it and the windows around it."""
        iv = self.intervals
        order = sorted(range(len(iv)), key=lambda i: -_row_max(iv[i]))[:n]
        out = []
        for i in order:
            r = iv[i]
            around = iv[max(0, i - AROUND) : i + AROUND + 1]
            out.append(
                {
                    "seq": r.get("seq"),
                    "start_utc": r.get("start_utc"),
                    "end_utc": r.get("end_utc"),
                    "max_ns": _row_max(r),
                    "cpus": [
                        {k: c.get(k) for k in ("cpu", "max_ns", "p99_ns", "count", "misses")}
                        for c in r.get("cpus") or []
                    ],
                    "spikes": r.get("spikes") or [],
                    "explain": r.get("explain"),
                    "messages": [
                        {"seq": a.get("seq"), **m}
                        for a in around
                        for m in (a.get("kmsg") or {}).get("messages") or []
                    ],
                }
            )
        return out

    def to_json(self) -> dict[str, Any]:
        m = self.rec.manifest
        return {
            "id": self.rec.id,
            "kind": "monitor",
            "name": m.name,
            "created_utc": m.created_utc,
            "end_utc": m.end_utc,
            "target": None if m.target is None else m.target.get("name"),
            "settings": {k: v for k, v in vars(m.settings).items() if k != "le_ns"},
            "kernel": self.rec.system().get("kernel_release"),
            "intervals": len(self.intervals),
            "coverage": self.coverage(),
            "cpus": self.per_cpu(),
            "maxima": self.maxima(),
            "distribution": self.distribution(),
            "gaps": [
                {k: g.get(k) for k in ("start_utc", "end_utc", "seconds", "reason")}
                for g in self.gaps
            ],
            "starts": [r for r in self.rows if r["kind"] == "start"],
            "symptoms": self.symptoms(),
            "worst": self.worst(),
        }


def _cpu_key(c: dict[str, Any]) -> str:
    return "any" if c.get("cpu") is None else str(c["cpu"])


def _row_max(r: dict[str, Any]) -> int:
    return max((c.get("max_ns") or 0 for c in r.get("cpus") or []), default=0)


def _pct(values: np.ndarray, q: float) -> int | None:
    if not len(values):
        return None
    return int(np.percentile(values, q, method="inverted_cdf"))


def over_time(view: MonitorView, rows_max: int = 24) -> list[dict[str, Any]]:
    """The window maxima folded into at most ROWS_MAX consecutive groups of windows (each
    group's largest maximum per CPU): the long-term plot as a table."""
    iv = view.intervals
    if not iv:
        return []
    per = -(-len(iv) // rows_max)
    out = []
    for i in range(0, len(iv), per):
        group = iv[i : i + per]
        mx: dict[str, int] = {}
        for r in group:
            for c in r.get("cpus") or []:
                k = _cpu_key(c)
                mx[k] = max(mx.get(k, 0), c.get("max_ns") or 0)
        out.append(
            {
                "from_utc": group[0].get("start_utc"),
                "to_utc": group[-1].get("end_utc"),
                "intervals": len(group),
                "max_ns": mx,
            }
        )
    return out
