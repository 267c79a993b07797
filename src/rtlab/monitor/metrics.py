"""The monitor's metrics for Prometheus: an HTTP endpoint (`--metrics-port`) or a textfile
for node_exporter's textfile collector (`--metrics-file`), made by `prometheus_client`.

Every metric is cumulative over the whole monitor (its stored rows, so a restarted
monitor goes on counting where it stopped), except the gauges of the last window.
Latencies are in seconds, as Prometheus names them.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from rtlab.errors import OutputError, UserError
from rtlab.monitor._loop import Sink
from rtlab.monitor._record import parse_utc

PREFIX = "rtlab_monitor"


@dataclass
class _Cpu:
    le: list[int]
    samples: int = 0
    sum_ns: int = 0
    misses: int = 0
    overruns: int = 0
    max_ns: int = 0
    last_max_ns: int | None = None
    last_p99_ns: int | None = None


@dataclass(eq=False)  # a collector is registered by identity
class MonitorMetrics(Sink, Collector):
    """The counters of a monitor's rows; a prometheus_client collector of them."""

    mon_id: str
    bounds_ns: list[int]
    deadline: bool
    cpus: dict[str, _Cpu] = field(default_factory=dict)
    intervals: int = 0
    gaps: int = 0
    gap_s: float = 0.0
    symptoms: dict[str, int] = field(default_factory=dict)
    last_end: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, row: dict[str, Any]) -> None:
        with self.lock:
            if row["kind"] == "gap":
                self.gaps += 1
                self.gap_s += float(row.get("seconds") or 0.0)
            elif row["kind"] == "interval":
                self._interval(row)

    def _interval(self, row: dict[str, Any]) -> None:
        self.intervals += 1
        for c in row.get("cpus") or []:
            key = "any" if c.get("cpu") is None else str(c["cpu"])
            cpu = self.cpus.setdefault(key, _Cpu([0] * len(self.bounds_ns)))
            le = c.get("le") or []
            if len(le) == len(cpu.le):
                cpu.le = [a + b for a, b in zip(cpu.le, le, strict=True)]
            cpu.samples += c.get("count") or 0
            cpu.sum_ns += c.get("sum_ns") or 0
            cpu.misses += c.get("misses") or 0
            cpu.overruns += c.get("overruns") or 0
            cpu.max_ns = max(cpu.max_ns, c.get("max_ns") or 0)
            cpu.last_max_ns, cpu.last_p99_ns = c.get("max_ns"), c.get("p99_ns")
        for name, n in ((row.get("kmsg") or {}).get("symptoms") or {}).items():
            self.symptoms[name] = self.symptoms.get(name, 0) + int(n)
        with contextlib.suppress(TypeError, ValueError):
            self.last_end = parse_utc(row["end_utc"])

    def collect(self) -> Iterator[Any]:
        with self.lock:
            yield from self._families()

    def _families(self) -> Iterator[Any]:
        ids = [self.mon_id]
        hist = HistogramMetricFamily(
            f"{PREFIX}_latency_seconds",
            "wake-up latency of the monitor's probe threads",
            labels=["monitor", "cpu"],
        )
        per_cpu = {
            "samples": ("wake-ups measured", lambda c: c.samples),
            "overruns": ("wake-ups later than a whole period", lambda c: c.overruns),
        }
        if self.deadline:
            per_cpu["deadline_misses"] = ("wake-ups later than the deadline", lambda c: c.misses)
        counters = {
            name: CounterMetricFamily(f"{PREFIX}_{name}", text, labels=["monitor", "cpu"])
            for name, (text, _) in per_cpu.items()
        }
        gauges = {
            name: GaugeMetricFamily(f"{PREFIX}_{name}", text, labels=["monitor", "cpu"])
            for name, text in (
                ("max_seconds", "largest latency since the monitor started"),
                ("last_interval_max_seconds", "largest latency of the last window"),
                ("last_interval_p99_seconds", "99th percentile of the last window"),
            )
        }
        for key, c in sorted(self.cpus.items()):
            buckets = [(_le(b), float(n)) for b, n in zip(self.bounds_ns, c.le, strict=True)]
            buckets.append(("+Inf", float(c.samples)))
            hist.add_metric([*ids, key], buckets, c.sum_ns / 1e9)
            for name, (_, get) in per_cpu.items():
                counters[name].add_metric([*ids, key], get(c))
            gauges["max_seconds"].add_metric([*ids, key], c.max_ns / 1e9)
            if c.last_max_ns is not None:
                gauges["last_interval_max_seconds"].add_metric([*ids, key], c.last_max_ns / 1e9)
            if c.last_p99_ns is not None:
                gauges["last_interval_p99_seconds"].add_metric([*ids, key], c.last_p99_ns / 1e9)
        yield hist
        yield from counters.values()
        yield from gauges.values()
        yield _counter("intervals", "windows measured", ids, self.intervals)
        yield _counter("gaps", "unmeasured stretches marked in the rows", ids, self.gaps)
        yield _counter("gap_seconds", "time not measured, in gaps", ids, self.gap_s)
        sym = CounterMetricFamily(
            f"{PREFIX}_kernel_symptoms",
            "kernel-log symptoms while measuring (RT throttling, RCU stall, ...)",
            labels=["monitor", "symptom"],
        )
        for name, n in sorted(self.symptoms.items()):
            sym.add_metric([*ids, name], n)
        yield sym
        if self.last_end is not None:
            g = GaugeMetricFamily(
                f"{PREFIX}_last_interval_end_timestamp_seconds",
                "end of the last window (the target's clock)",
                labels=["monitor"],
            )
            g.add_metric(ids, self.last_end)
            yield g


def _counter(name: str, text: str, ids: list[str], value: float) -> CounterMetricFamily:
    c = CounterMetricFamily(f"{PREFIX}_{name}", text, labels=["monitor"])
    c.add_metric(ids, value)
    return c


def _le(bound_ns: int) -> str:
    return repr(bound_ns / 1e9)


class Publisher(Sink):
    """The metrics served over HTTP or written to a textfile after each row."""

    def __init__(self, metrics: MonitorMetrics, file: Path | None) -> None:
        self.metrics, self.file = metrics, file
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(metrics)
        self.server: Any = None

    def serve(self, addr: str, port: int) -> int:
        """Serve /metrics on ADDR:PORT; the port bound (PORT 0: one the system chose)."""
        try:
            self.server, _ = start_http_server(port, addr, registry=self.registry)
        except OSError as e:
            raise UserError(f"--metrics-port {addr}:{port}: cannot listen ({e.strerror})") from None
        return int(self.server.server_port)

    def add(self, row: dict[str, Any]) -> None:
        self.metrics.add(row)
        self.write()

    def write(self) -> None:
        if self.file is None:
            return
        try:
            write_to_textfile(str(self.file), self.registry)  # a new file renamed over it
        except OSError as e:
            raise OutputError(f"--metrics-file {self.file}: cannot write ({e.strerror})") from None

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def check_metrics_file(path: Path) -> None:
    """Refuse a textfile that cannot be written atomically where it is (exit 2)."""
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"--metrics-file {path}: no such directory {parent}")
    if path.is_dir():
        raise UserError(f"--metrics-file {path}: is a directory")
    if not os.access(parent, os.W_OK):
        raise UserError(f"--metrics-file {path}: directory {parent} is not writable")
