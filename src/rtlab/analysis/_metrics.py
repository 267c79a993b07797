"""The one vocabulary of statistics: every table, CSV file, comparison and threshold names
its columns from METRICS."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rtlab.errors import UserError
from rtlab.units import format_ns, format_ns2


@dataclass(frozen=True)
class Metric:
    key: str  # CaseStats field; the JSON and CSV column
    label: str  # table header
    unit: str  # "ns", "ns2" (a variance), "count" or "flag"
    doc: str  # how it is computed
    aliases: tuple[str, ...] = ()

    @property
    def duration(self) -> bool:
        return self.unit == "ns"

    def text(self, value: object) -> str:
        """VALUE as a table shows it ("-" when missing)."""
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return "-"
        if self.unit == "ns":
            return format_ns(float(value))  # type: ignore[arg-type]
        if self.unit == "ns2":
            return format_ns2(float(value))  # type: ignore[arg-type]
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    @property
    def names(self) -> tuple[str, ...]:
        """Every spelling accepted on the command line."""
        return tuple(dict.fromkeys((self.key, self.label, *self.aliases)))


_TABLE = (
    Metric("count", "samples", "count", "latencies measured"),
    Metric("min", "min", "ns", "smallest latency"),
    Metric("mean", "avg", "ns", "arithmetic mean", ("avg",)),
    Metric("q1", "q1", "ns", "first quartile (nearest rank)", ("p25",)),
    Metric("median", "median", "ns", "50th percentile (nearest rank)", ("p50",)),
    Metric("q3", "q3", "ns", "third quartile (nearest rank)", ("p75",)),
    Metric("p90", "p90", "ns", "90th percentile (nearest rank)"),
    Metric("p95", "p95", "ns", "95th percentile (nearest rank)"),
    Metric("p99", "p99", "ns", "99th percentile (nearest rank)"),
    Metric("p999", "p99.9", "ns", "99.9th percentile (nearest rank)"),
    Metric("p9999", "p99.99", "ns", "99.99th percentile (nearest rank)"),
    Metric("max", "max", "ns", "largest latency"),
    Metric("jitter", "jitter", "ns", "max - min, as in the published tables"),
    Metric("stddev", "stddev", "ns", "sample standard deviation (n - 1)"),
    Metric("variance", "variance", "ns2", "sample variance (n - 1), in ns²", ("var",)),
    Metric("iqr", "iqr", "ns", "q3 - q1"),
    Metric("whisker_low", "whisker low", "ns", "lowest sample within 1.5 IQR below q1"),
    Metric("whisker_high", "whisker high", "ns", "highest sample within 1.5 IQR above q3"),
    Metric("outliers", "outliers", "count", "samples beyond the whiskers"),
    Metric("overruns", "overruns", "count", "activations missed entirely (periods skipped)"),
    Metric("deadline_misses", "misses", "count", "samples above the deadline"),
    Metric("exact", "exact", "flag", "computed from every sample (else from histograms)"),
)
METRICS: dict[str, Metric] = {m.key: m for m in _TABLE}
_BY_NAME: dict[str, Metric] = {n: m for m in _TABLE for n in m.names}

#: Columns of the statistics tables in the terminal and the report.
TABLE_METRICS = ("min", "mean", "median", "p95", "p99", "p999", "max", "jitter", "stddev")
TABLE_COUNTS = ("overruns", "deadline_misses")
#: Every statistic, in the order of CSV and JSON exports.
EXPORT_METRICS = tuple(m.key for m in _TABLE)
#: Statistics compared as ratios (latencies only).
RATIO_KEYS = (
    "min",
    "mean",
    "median",
    "p90",
    "p95",
    "p99",
    "p999",
    "p9999",
    "max",
    "jitter",
    "stddev",
    "variance",
)
#: Metrics a comparison counts wins on, and the report's comparison columns.
WIN_METRICS = ("mean", "median", "p99", "p999", "max")


def metric(name: str) -> Metric:
    """A metric by key, label or alias ("p99.9", "p999", "avg", "p50", ...)."""
    found = _BY_NAME.get(name.strip().lower())
    if found is None:
        known = ", ".join(m.label for m in _TABLE if m.duration)
        raise UserError(f"unknown metric '{name.strip()}' (known: {known})")
    return found


def metrics(names: str | tuple[str, ...] | list[str]) -> list[Metric]:
    """Metrics from a comma-separated text or a sequence of names."""
    parts = names.split(",") if isinstance(names, str) else list(names)
    return [metric(n) for n in parts if n.strip()]
