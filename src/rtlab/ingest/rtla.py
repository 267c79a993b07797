"""Import rtla (tools/tracing/rtla) output as rtlab result documents (the current schema).

`read_rtla(path)` reads what `rtla timerlat hist`, `rtla timerlat top`, `rtla osnoise hist`,
`rtla osnoise top` and `rtla hwnoise` print, as captured from their standard output. The
kind comes from the content: the "# RTLA timerlat|osnoise histogram" header, the
"IRQ Timer Latency (us)" header of timerlat top, the "duration: ... | time is in us" header
of osnoise top. The time unit comes from the header too (µs, or ns with -n).

Decisions (docs/result-format.md, "Imported rtla output"):

* One document per file, one thread entry per CPU that rtla printed, in CPU order.
* timerlat -> meter "wakeup". The thread latency is the figure comparable to cyclictest
  and the probe's wakeup meter: the entry's latency fields describe it. Each entry keeps
  all of rtla's figures under "timerlat": {"irq", "thread", "user"}, each
  {count, min_ns, mean_ns, max_ns, histogram} or null (--no-irq, --no-thread, no -u).
  With --no-thread the latency fields describe the IRQ latency ("import.figure": "irq").
* osnoise -> meter "noise", one entry per CPU. hist: the latency fields describe the
  noise samples (osnoise:sample_threshold durations). top: rtla prints no distribution,
  only totals: count and min are null, max_ns is "Max Single", noise_ns / measured_ns /
  noise_pct / noise_ns_per_s come from Noise and Runtime, and "osnoise" keeps the rest.
* A value v in µs means a latency in [v·1000, v·1000+999] ns (rtla truncates): min_ns and
  max_ns are v·1000, mean_ns is avg·unit (timerlat prints avg truncated to a whole unit,
  so up to one unit low). A histogram row with index v and bucket width w (see
  _rtla_hist) covers [v, v+w) units; timerlat buckets are clamped to the figure's
  [min, max] as the samples are, osnoise ones are not (rtla's osnoise min/max are bucket
  floors). stddev is unknown (null).
* percentiles_ns: nearest rank from the histogram, as the cyclictest import.
* complete is false and stop_reason "threshold" when rtla says "... hit stop tracing";
  the auto-analysis that follows, the missed-events count and the saved trace's name are
  kept in "import". explain is null and spikes empty: rtla's analysis is not the probe's.
* Bounds as for cyclictest (_limits): CPU numbers and buckets below 2^31, latencies
  below 2^62 ns, at most 2^53 samples and 2^22 non-empty buckets over all CPUs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rtlab.errors import UserError
from rtlab.ingest._limits import MAX_LATENCY_NS, MAX_SAMPLES
from rtlab.ingest._percentiles import percentiles
from rtlab.ingest._rtla_common import Figure, Parsed
from rtlab.ingest._rtla_hist import HEAD, parse_hist
from rtlab.ingest._rtla_top import OSNOISE_HEAD, TIMERLAT_HEAD, parse_top
from rtlab.ingest._text import clean_text, named, newlines, read_text
from rtlab.probe import RESULT_SCHEMA

# Terminal control of a captured tty session: colours, and the screen clear of top
_SGR = re.compile(r"\x1b\[[0-9;]{0,32}m")
_CLEAR = "\x1bc"
_AA = re.compile(r"## CPU [0-9]{1,10} hit stop tracing, analyzing it ##")


def read_rtla(path: Path) -> dict[str, Any]:
    """Read one rtla timerlat/osnoise hist or top output as a current-schema result document.

    Raises UserError (one line naming the file) for anything that is not readable.
    """
    path = Path(path)
    with named(path):
        return _document(path, _parse(read_text(path)))


def _parse(text: str) -> Parsed:
    if not text or text.isspace():
        raise UserError("empty file")
    text = newlines(text)
    if "\x1b" in text:
        text = _SGR.sub("", text.replace(_CLEAR, "\n"))
    if _has_line(text, "# RTLA ", HEAD):
        return parse_hist(text)
    if _has_line(text, "IRQ Timer Latency (", TIMERLAT_HEAD):
        return parse_top(text, "timerlat")
    if _has_line(text, "time is in us", OSNOISE_HEAD):
        return parse_top(text, "osnoise")
    if _has_line(text, "hit stop tracing, analyzing it", _AA):
        raise UserError(
            "no statistics, only a timerlat auto-analysis (rtla timerlat top --aa-only?)"
        )
    raise UserError(
        "unknown format: not the output of rtla timerlat/osnoise hist or top "
        "(no '# RTLA ... histogram' line or top header; --no-header output cannot be read)"
    )


def _has_line(text: str, literal: str, pattern: re.Pattern[str]) -> bool:
    """Whether a line holding LITERAL matches PATTERN (spaces around it aside); each line
    is looked at once, so this is linear in the text."""
    start = 0
    while (at := text.find(literal, start)) >= 0:
        begin = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        if pattern.fullmatch(text[begin:end].strip()):
            return True
        start = end
    return False


def _ns(value: int | float | None, unit: int, where: str) -> int | None:
    if value is None:
        return None
    if not value * unit < MAX_LATENCY_NS:
        raise UserError(f"{where}: {value} is out of range (below 2^62 ns)")
    return int(value) * unit


def _buckets(f: Figure, p: Parsed, clamp: bool) -> list[list[int]]:
    """[lower, upper, count] in ns for each non-empty row, checked against min/max.

    clamp (timerlat): every sample lies in [min, max + 1 unit), and so do the buckets.
    Otherwise (osnoise) min and max are bucket floors: each row lies between them.
    """
    unit, width = p.unit_ns, p.bucket_width
    out = []
    for v, c in sorted((f.hist or {}).items()):
        lo, hi = v * unit, (v + (width or 1)) * unit - 1
        if f.min is not None and f.max is not None:
            if clamp:
                lo, top = max(lo, f.min * unit), f.max * unit + unit - 1
                hi = top if width is None else min(hi, top)
            elif not f.min <= v <= f.max:
                lo = hi + 1
        if lo > hi:
            raise UserError(f"bucket {v} lies outside min {f.min} .. max {f.max}")
        out.append([lo, hi, c])
    return out


def _stats(f: Figure | None, p: Parsed, where: str) -> dict[str, Any] | None:
    """A figure in ns: count, min_ns, mean_ns, max_ns (and cur_ns, histogram, overflow)."""
    if f is None:
        return None
    unit = p.unit_ns
    if f.count and f.count > MAX_SAMPLES:
        raise UserError(f"{where}: count {f.count} is out of range (at most 2^53)")
    if f.hist is not None and not p.summary and f.count:  # --no-summary: from the rows
        if f.over:
            raise UserError(
                f"{where}: samples above the histogram's range and no summary: max unknown"
            )
        rows = sorted(f.hist)  # osnoise: bucket floors, as rtla's own min/max
        last = rows[-1] + (p.bucket_width or 1) - 1 if p.tool == "timerlat" else rows[-1]
        f.min, f.max = rows[0], last
    if f.count and f.min is not None and f.max is not None:
        if f.min > f.max:
            raise UserError(f"{where}: min {f.min} is larger than max {f.max}")
        if f.mean is not None and not f.min <= f.mean <= f.max:
            raise UserError(f"{where}: avg {f.mean} is outside min {f.min} .. max {f.max}")
    has = f.count is None or f.count > 0  # None: rtla printed no count (osnoise top)
    out: dict[str, Any] = {
        "count": f.count,
        "min_ns": _ns(f.min, unit, where) if has else None,
        "mean_ns": None,
        "max_ns": _ns(f.max, unit, where) if has else None,
    }
    if has and f.mean is not None:
        _ns(f.mean, unit, where)  # the range check
        out["mean_ns"] = round(f.mean * unit, 3)
    if f.cur is not None and has:
        out["cur_ns"] = _ns(f.cur, unit, where)
    if f.hist is not None:
        try:
            buckets = _buckets(f, p, clamp=p.tool == "timerlat")
        except UserError as e:
            raise UserError(f"{where}: {e}") from None
        out["histogram"] = {"unit": "ns", "overflow": f.over, "buckets": buckets}
        out["percentiles_ns"] = percentiles(buckets, f.count or 0, out["min_ns"], out["max_ns"])
    return out


def _thread(index: int, cpu: int, main: dict[str, Any] | None) -> dict[str, Any]:
    main = main or {"count": 0, "min_ns": None, "mean_ns": None, "max_ns": None}
    return {
        "index": index,
        "cpu": cpu,
        "tid": None,
        "period_ns": None,
        "policy": None,
        "count": main["count"],
        "min_ns": main["min_ns"],
        "max_ns": main["max_ns"],
        "mean_ns": main["mean_ns"],
        "stddev_ns": None,
        "percentiles_ns": main.get("percentiles_ns"),
        "overruns": 0,
        "raw_lost": 0,
        "histogram": main.get("histogram"),
        "worst": [],
        "series": None,
    }


def _timerlat_threads(p: Parsed) -> tuple[list[dict[str, Any]], str]:
    figure = "thread" if "thread" in p.kinds else "irq"
    threads = []
    for i, cpu in enumerate(p.cpus):
        figs = {
            k: _stats(p.figures.get((cpu, k)), p, f"CPU {cpu} {k}")
            for k in ("irq", "thread", "user")
        }
        t = _thread(i, cpu, figs[figure])
        t["timerlat"] = figs
        threads.append(t)
    return threads, figure


def _osnoise_threads(p: Parsed) -> list[dict[str, Any]]:
    threads = []
    for i, cpu in enumerate(p.cpus):
        where = f"CPU {cpu}"
        t = _thread(i, cpu, _stats(p.figures[cpu, "noise"], p, where))
        row = p.noise.get(cpu)
        if row is None:  # hist: no totals
            t.update(noise_ns=None, measured_ns=None, noise_pct=None, noise_ns_per_s=None)
        else:
            noise = _ns(row["noise"], 1000, where) or 0
            runtime = _ns(row["runtime"], 1000, where) or 0
            t.update(
                noise_ns=noise,
                measured_ns=runtime,
                noise_pct=round(noise * 100 / runtime, 6) if runtime else None,
                noise_ns_per_s=round(noise * 1e9 / runtime, 3) if runtime else None,
            )
            t["osnoise"] = {
                "periods": row["periods"],
                "max_noise_ns": _ns(row["max_noise"], 1000, where),
                "interference": row["interference"],
            }
        threads.append(t)
    return threads


def _document(path: Path, p: Parsed) -> dict[str, Any]:
    imported: dict[str, Any] = {
        "source": clean_text(str(path)),
        "format": f"rtla-{p.tool}-{p.mode}",
        "unit_ns": p.unit_ns,
        "duration_ns": p.duration_ns,
    }
    if p.tool == "timerlat":
        threads, imported["figure"] = _timerlat_threads(p)
        meter = "wakeup"
    else:
        threads = _osnoise_threads(p)
        meter = "noise"
    if p.mode == "hist":
        imported["bucket_size"] = p.bucket_width
        imported["summary"] = p.summary
    else:
        imported["screens"] = p.screens
    imported.update(p.tail)
    total = sum(t["count"] or 0 for t in threads)
    if total > MAX_SAMPLES:
        raise UserError(f"{total} samples over all CPUs: more than 2^53")
    if p.tool == "timerlat" and not total:
        raise UserError(f"no samples (no CPU has a {imported['figure']} latency sample)")
    stopped = bool(p.tail.get("stopped"))
    return {
        "schema": RESULT_SCHEMA,
        "tool": "rtla",
        "version": None,
        "meter": meter,
        "complete": not stopped,
        "stop_reason": "threshold" if stopped else "unknown",
        "argv": [],
        "start_utc": None,
        "end_utc": None,
        "elapsed_ns": p.duration_ns,
        "host": None,
        "params": {
            "interval_ns": None,
            "clock": None,
            "loops": None,
            "duration_ns": None,
            "policy": None,
            "cpus": None,
            "threads": len(threads),
            "mlock": None,
            "loads": [],
        },
        "threads": threads,
        "explain": None,
        "spikes": [],
        "import": imported,
    }
