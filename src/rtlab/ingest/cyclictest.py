"""Import cyclictest (rt-tests) output as rtlab result documents (schema 1).

`read_cyclictest(path)` accepts either format cyclictest writes at the end of a run:

* `--json=FILE`: detected by a leading '{'. Its numbers are µs unless
  `resolution_in_ns` is 1 (run with -N), then ns.
* the text histogram of `-h N` / `-H N` (stdout capture or `--histfile=FILE`): detected by
  its "# Histogram" line. The file does not record its unit: it is read as µs unless
  `nsecs=True` says the run used -N (buckets, min, max and avg are then ns).

Decisions (see docs/result-format.md for the target layout):

* A µs value v means a latency in [v·1000, v·1000+999] ns (cyclictest truncates to µs):
  min_ns/max_ns are v·1000, a µs bucket becomes [v·1000, v·1000+999]; with ns resolution
  a bucket is [v, v]. mean_ns is avg·unit; the text format prints avg truncated to a whole
  unit, so its mean is up to one unit low. stddev_ns is unknown (null).
* percentiles_ns: nearest rank over all samples (overflowed ones included) from the
  histogram, the bucket's midpoint clamped to [min_ns, max_ns]; a rank that falls among
  the overflowed samples (beyond -h's range) reports max_ns, as the probe does. Null
  without a histogram; a dict of nulls for a thread without samples.
* JSON histogram: overflow = cycles − Σ counts. cyclictest 2.x writes `"histogram": {}`
  even without -h: an empty histogram is taken as "no histogram" (null) unless the
  cmdline shows -h/-H/--histogram/--histofall (then every sample overflowed).
* A thread with zero cycles is kept with count 0 and null statistics (cyclictest prints
  min 1000000 and avg "-nan" for it); a file where no thread has a sample is an error
  ("no samples"). A nan/inf/null avg with cycles > 0 gives mean_ns null, not an error.
* complete: JSON return_code == 0 (true when absent); a text histogram that parses
  completely (its summary lines are present) is complete.
* params come from the JSON cmdline with cyclictest's defaults (interval 1000 µs,
  distance 500 µs, 0 with -h); without a cmdline they are null. policy: -p N > 0 gives
  "fifo:N" ("rr:N" with --policy=rr; cyclictest forces FIFO for other policies with a
  priority), no -p gives "other:0"/"batch:0"/"idle"; --policy=fifo|rr without -p is null
  (the priority cyclictest then picks is version dependent).
* The text format's overflow cycle numbers are kept in import.threads[i].
"""

from __future__ import annotations

import email.utils
import math
import re
import shlex
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from rtlab.errors import UserError
from rtlab.ingest._cyclictest_hist import looks_like_histogram, parse_histogram
from rtlab.ingest._cyclictest_json import parse_json

PERCENTILES = ("50", "90", "99", "99.9", "99.99")

# getopt of cyclictest 2.x: options taking an argument (required / optional).
# fmt: off
_SHORT_ARG = set("AbcdDFhHilop")
_SHORT_OPT_ARG = set("at")
_LONG_ARG = {"aligned", "breaktrace", "clock", "distance", "duration", "fifo", "histogram",
             "histofall", "histfile", "interval", "json", "latency", "loops", "mainaffinity",
             "oscope", "priority", "policy", "spike", "spike-nodes"}
_LONG_OPT_ARG = {"affinity", "threads", "secaligned"}
_LONG_TO_SHORT = {"interval": "i", "loops": "l", "priority": "p", "distance": "d",
                  "duration": "D", "histogram": "h", "histofall": "H", "affinity": "a",
                  "threads": "t", "clock": "c", "mlockall": "m", "nsecs": "N", "quiet": "q"}
# fmt: on


def read_cyclictest(path: Path, *, nsecs: bool | None = None) -> dict[str, Any]:
    """Read one cyclictest --json file or text histogram as a schema-1 result document.

    nsecs: for a text histogram, True when cyclictest ran with -N (values in ns); the
    default reads it as µs. Ignored for JSON, which records its resolution.
    Raises UserError (one line naming the file) for anything that is not readable.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        return _read(path, data.decode("utf-8", errors="replace"), nsecs)
    except UserError as e:
        msg = " ".join(str(e).split())
        raise UserError(f"{path}: {msg}") from None


def _read(path: Path, text: str, nsecs: bool | None) -> dict[str, Any]:
    if not text.strip():
        raise UserError("empty file")
    if text.lstrip().startswith("{"):
        parsed = parse_json(text)
        fmt, unit, meta = "cyclictest-json", parsed["unit_ns"], parsed["meta"]
    elif looks_like_histogram(text):
        parsed = parse_histogram(text)
        fmt, unit, meta = "cyclictest-histogram", 1 if nsecs else 1000, {}
    else:
        raise UserError(
            "unknown format: neither cyclictest JSON ('{') nor a text histogram "
            "('# Histogram' line)"
        )
    raws = parsed["threads"]
    if not any(r["count"] for r in raws):
        raise UserError("no samples (every thread has zero cycles)")

    argv = _argv(meta.get("cmdline"))
    opts = _options(argv) if argv else None
    hist_requested = fmt == "cyclictest-histogram" or bool(opts and {"h", "H"} & opts.keys())
    threads = []
    for r in raws:
        if r["hist"] == {} and not hist_requested:
            r["hist"] = None
        threads.append(_thread(r, unit))
    imported: dict[str, Any] = {"source": str(path), "format": fmt, "unit_ns": unit}
    if fmt == "cyclictest-histogram":
        imported["threads"] = [
            {
                "index": r["index"],
                "overflow_cycles": r["overflow_cycles"],
                "overflow_cycles_omitted": r["overflow_cycles_omitted"],
            }
            for r in raws
        ]
    code = meta.get("return_code")
    version = meta.get("rt_test_version")
    return {
        "schema": 1,
        "tool": "cyclictest",
        "version": None if version is None else str(version),
        "meter": "wakeup",
        "complete": code is None or code == 0,
        "argv": argv,
        "start_utc": _utc(meta.get("start_time")),
        "end_utc": _utc(meta.get("end_time")),
        "host": _host(meta.get("sysinfo")),
        "params": _params(opts, len(raws)),
        "threads": threads,
        "import": imported,
    }


def _thread(r: dict[str, Any], unit: int) -> dict[str, Any]:
    count, hist = r["count"], r["hist"]
    lo = None if r["min"] is None else r["min"] * unit
    hi = None if r["max"] is None else r["max"] * unit
    mean = None if r["mean"] is None else round(r["mean"] * unit, 3)
    histogram = None
    percentiles: dict[str, int | None] | None = None
    if hist is not None:
        buckets = [[b * unit, b * unit + unit - 1, c] for b, c in sorted(hist.items()) if c]
        histogram = {"unit": "ns", "overflow": r["overflow"], "buckets": buckets}
        percentiles = {
            p: _percentile(buckets, count, Fraction(p) / 100, lo, hi) for p in PERCENTILES
        }
    return {
        "index": r["index"],
        "cpu": r["cpu"],
        "tid": None,
        "period_ns": None,
        "policy": None,
        "count": count,
        "min_ns": lo,
        "max_ns": hi,
        "mean_ns": mean,
        "stddev_ns": None,
        "percentiles_ns": percentiles,
        "overruns": 0,
        "lost": 0,
        "histogram": histogram,
        "worst": [],
        "series": None,
    }


def _percentile(
    buckets: list[list[int]], total: int, q: Fraction, lo: int | None, hi: int | None
) -> int | None:
    """Nearest rank: the smallest bucket with at least ceil(q·total) samples at or below."""
    if not total or lo is None or hi is None:
        return None
    rank = min(max(math.ceil(q * total), 1), total)
    seen = 0
    for b_lo, b_hi, c in buckets:
        seen += c
        if seen >= rank:
            return min(max(b_lo + (b_hi - b_lo) // 2, lo), hi)
    return hi  # among the overflowed samples, above every bucket


def _argv(cmdline: Any) -> list[str]:
    if not isinstance(cmdline, str) or not cmdline.strip():
        return []
    try:
        return shlex.split(cmdline)
    except ValueError:  # unbalanced quotes: cyclictest joins argv with spaces, unquoted
        return cmdline.split()


def _options(argv: list[str]) -> dict[str, str | None]:
    """cyclictest options by short letter (long names without one keep their name)."""
    opts: dict[str, str | None] = {}
    i = 1
    while i < len(argv):
        tok = argv[i]
        i += 1
        if tok.startswith("--") and len(tok) > 2:
            name, eq, val = tok[2:].partition("=")
            value: str | None = val if eq else None
            nxt = argv[i] if i < len(argv) else ""
            if (
                not eq
                and nxt
                and (name in _LONG_ARG or (name in _LONG_OPT_ARG and nxt[0].isdigit()))
            ):
                value = argv[i]
                i += 1
            opts[_LONG_TO_SHORT.get(name, name)] = value
        elif tok.startswith("-") and len(tok) > 1:
            for j, c in enumerate(tok[1:], start=1):
                if c in _SHORT_ARG or c in _SHORT_OPT_ARG:
                    value = tok[j + 1 :] or None
                    if (
                        value is None
                        and i < len(argv)
                        and (c in _SHORT_ARG or argv[i][:1].isdigit())
                    ):
                        value = argv[i]
                        i += 1
                    opts[c] = value
                    break
                opts[c] = None
    return opts


def _int_opt(opts: dict[str, str | None], key: str, default: int | None) -> int | None:
    if key not in opts:
        return default
    try:
        return int(opts[key] or "")
    except ValueError:
        return None


def _duration_ns(text: str | None) -> int | None:
    m = re.fullmatch(r"(\d+)([smhd]?)", (text or "").strip().lower())
    if not m:
        return None
    mult = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    return int(m.group(1)) * mult * 1_000_000_000 or None


def _policy(opts: dict[str, str | None]) -> str | None:
    name = (opts.get("policy") or "other").lower()
    name = "other" if name == "normal" else name
    prio = _int_opt(opts, "p", 0)
    if prio is None or name not in ("other", "batch", "idle", "fifo", "rr"):
        return None
    if prio > 0:
        return f"{'rr' if name == 'rr' else 'fifo'}:{prio}"
    if name in ("fifo", "rr"):
        return None
    return "idle" if name == "idle" else f"{name}:0"


def _params(opts: dict[str, str | None] | None, nthreads: int) -> dict[str, Any]:
    if opts is None:
        return {
            "interval_ns": None,
            "distance_ns": None,
            "clock": None,
            "loops": None,
            "duration_ns": None,
            "policy": None,
            "cpus": None,
            "threads": nthreads,
            "mlock": None,
            "loads": [],
        }
    hist = bool({"h", "H"} & opts.keys())
    interval = _int_opt(opts, "i", 1000)
    distance = 0 if hist else _int_opt(opts, "d", 500)
    loops = _int_opt(opts, "l", 0)
    clock = {"0": "CLOCK_MONOTONIC", "1": "CLOCK_REALTIME"}.get(opts.get("c") or "0")
    return {
        "interval_ns": None if interval is None else interval * 1000,
        "distance_ns": None if distance is None else distance * 1000,
        "clock": clock,
        "loops": loops or None,
        "duration_ns": _duration_ns(opts.get("D")),
        "policy": _policy(opts),
        "cpus": opts.get("a"),
        "threads": nthreads,
        "mlock": "m" in opts,
        "loads": [],
    }


def _host(sysinfo: Any) -> dict[str, Any] | None:
    if not isinstance(sysinfo, dict):
        return None
    uname = {k: sysinfo.get(k) for k in ("sysname", "nodename", "release", "version", "machine")}
    rt = sysinfo.get("realtime")
    return {
        "uname": uname,
        "realtime": int(rt) if isinstance(rt, int | bool) else None,
        "cpus_online": None,
        "cpus_configured": None,
    }


def _utc(text: Any) -> str | None:
    """cyclictest's "Sun, 22 Nov 2026 01:00:56 +0000" (or ISO-8601) as ISO-8601 UTC."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        try:
            when = datetime.fromisoformat(text.strip())
        except ValueError:
            return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
