"""Import cyclictest (rt-tests) output as rtlab result documents (the current schema).

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
* start_utc/end_utc: null when the JSON start_time/end_time is absent or not a date
  format we know (e.g. a localized day name); a date that parses but does not exist or
  lies outside the years 1-9999 (UTC) is an error.

Hostile input (the bounds are in `_limits`): only a regular file of at most 256 MiB is
read (a FIFO, device or directory is refused before it is opened, and the file is
opened non-blocking in case one was swapped in). Bytes that are not UTF-8 are replaced
(U+FFFD), and so are lone surrogates from JSON escapes ('?'). Wrong types anywhere are
errors naming the field, and so are values outside these ranges (real runs are far
inside them; they keep every later computation within int64 and exact in float64):
thread numbers and histogram buckets below 2^31 (C ints in cyclictest), CPUs below 8192;
latencies (min, max, avg) of magnitude below 2^62 ns; at most 2^53 samples and 2^22
non-empty histogram buckets over all threads; avg, when known, within [min, max].
Options in the cmdline that are no C int give null params, as unparsable ones do.
"""

from __future__ import annotations

import email.utils
import re
import shlex
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from rtlab.errors import UserError
from rtlab.ingest._cyclictest_hist import looks_like_histogram, parse_histogram
from rtlab.ingest._cyclictest_json import parse_json
from rtlab.ingest._limits import (
    INT32_LIMIT,
    MAX_BUCKETS,
    MAX_LATENCY_NS,
    MAX_SAMPLES,
)
from rtlab.ingest._percentiles import percentiles
from rtlab.ingest._text import clean_text, named, read_text
from rtlab.probe import RESULT_SCHEMA
from rtlab.system._cpus import MAX_CPUS

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
    """Read one cyclictest --json file or text histogram as a current-schema result document.

    nsecs: for a text histogram, True when cyclictest ran with -N (values in ns); the
    default reads it as µs. Ignored for JSON, which records its resolution.
    Raises UserError (one line naming the file) for anything that is not readable.
    """
    path = Path(path)
    with named(path):
        return _read(path, read_text(path), nsecs)


def _read(path: Path, text: str, nsecs: bool | None) -> dict[str, Any]:
    if not text or text.isspace():
        raise UserError("empty file")
    if re.match(r"\s*\{", text):
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
    for r in raws:
        _check_ranges(r, unit)
    total = sum(r["count"] for r in raws)
    if not total:
        raise UserError("no samples (every thread has zero cycles)")
    if total > MAX_SAMPLES:
        raise UserError(f"{total} samples over all threads: more than 2^53")
    buckets = sum(len(r["hist"] or ()) for r in raws)
    if buckets > MAX_BUCKETS:
        raise UserError(f"{buckets} histogram buckets over all threads: more than {MAX_BUCKETS}")

    argv = _argv(meta.get("cmdline"))
    opts = _options(argv) if argv else None
    hist_requested = fmt == "cyclictest-histogram" or bool(opts and {"h", "H"} & opts.keys())
    threads = []
    for r in raws:
        if r["hist"] == {} and not hist_requested:
            r["hist"] = None
        threads.append(_thread(r, unit))
    imported: dict[str, Any] = {"source": clean_text(str(path)), "format": fmt, "unit_ns": unit}
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
        "schema": RESULT_SCHEMA,
        "tool": "cyclictest",
        "version": version,
        "meter": "wakeup",
        "complete": code is None or code == 0,
        "argv": argv,
        "start_utc": _utc(meta.get("start_time"), "start_time"),
        "end_utc": _utc(meta.get("end_time"), "end_time"),
        "host": _host(meta.get("sysinfo")),
        "params": _params(opts, len(raws)),
        "threads": threads,
        "import": imported,
    }


def _check_ranges(r: dict[str, Any], unit: int) -> None:
    """The per-field ranges of the module docstring, for a raw thread of either format."""
    where = f"thread {r['index']}"
    if r["index"] >= INT32_LIMIT:
        raise UserError(f"{where}: thread number is out of range (at most 2^31 - 1)")
    if r["cpu"] is not None and not 0 <= r["cpu"] < MAX_CPUS:
        raise UserError(f"{where}: cpu {r['cpu']} is out of range")
    if r["count"] > MAX_SAMPLES:
        raise UserError(f"{where}: cycles {r['count']} is out of range (at most 2^53)")
    for key, name in (("min", "min"), ("max", "max"), ("mean", "avg")):
        v = r[key]
        if v is not None and not abs(v) * unit < MAX_LATENCY_NS:
            raise UserError(f"{where}: {name} {v} is out of range (below 2^62 ns)")
    if r["mean"] is not None and not r["min"] <= r["mean"] <= r["max"]:
        raise UserError(f"{where}: avg {r['mean']} is outside min {r['min']} .. max {r['max']}")
    if r["hist"] and max(r["hist"]) >= INT32_LIMIT:
        raise UserError(
            f"{where}: histogram bucket {max(r['hist'])} is out of range (at most 2^31 - 1)"
        )


def _thread(r: dict[str, Any], unit: int) -> dict[str, Any]:
    count, hist = r["count"], r["hist"]
    lo = None if r["min"] is None else r["min"] * unit
    hi = None if r["max"] is None else r["max"] * unit
    mean = None if r["mean"] is None else round(r["mean"] * unit, 3)
    histogram = None
    pcts: dict[str, int | None] | None = None
    if hist is not None:
        buckets = [[b * unit, b * unit + unit - 1, c] for b, c in sorted(hist.items()) if c]
        histogram = {"unit": "ns", "overflow": r["overflow"], "buckets": buckets}
        pcts = percentiles(buckets, count, lo, hi)
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
        "percentiles_ns": pcts,
        "overruns": 0,
        "raw_lost": 0,
        "histogram": histogram,
        "worst": [],
        "series": None,
    }


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
    """The option's integer value; None when it is not a C int (cyclictest's type)."""
    if key not in opts:
        return default
    text = (opts[key] or "").strip()
    if not re.fullmatch(r"[-+]?[0-9]{1,12}", text):
        return None
    value = int(text)
    return value if -INT32_LIMIT <= value < INT32_LIMIT else None


def _duration_ns(text: str | None) -> int | None:
    m = re.fullmatch(r"([0-9]{1,12})([smhd]?)", (text or "").strip().lower())
    if not m:
        return None
    seconds = int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    return seconds * 1_000_000_000 if 0 < seconds < INT32_LIMIT else None


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


def _host(sysinfo: dict[str, Any] | None) -> dict[str, Any] | None:
    if sysinfo is None:
        return None
    return {
        "uname": {k: sysinfo[k] for k in ("sysname", "nodename", "release", "version", "machine")},
        "realtime": sysinfo["realtime"],
        "cpus_online": None,
        "cpus_configured": None,
    }


def _utc(text: str | None, field: str) -> str | None:
    """cyclictest's "Sun, 22 Nov 2026 01:00:56 +0000" (or ISO-8601) as ISO-8601 UTC.

    None when absent or in no format we know; UserError when it parses but is no date
    of the years 1-9999 (UTC).
    """
    if text is None or not text.strip():
        return None
    try:
        when = _parse_date(text.strip())
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        when = when.astimezone(UTC)
    except (ValueError, OverflowError):
        raise UserError(f"{field} is not a valid date: {text.strip()[:40]!r}") from None
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _parse_date(text: str) -> datetime | None:
    """The date of an RFC 2822 or ISO-8601 text, None when it is neither; ValueError or
    OverflowError when its fields are out of range."""
    try:
        parts = email.utils.parsedate_tz(text)
    except (TypeError, ValueError, IndexError):
        parts = None
    if parts is not None:
        y, mo, d, h, mi, sec, *_, offset = parts
        tz = None if offset is None else timezone(timedelta(seconds=offset))
        return datetime(y, mo, d, h, mi, sec, tzinfo=tz)
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9:.,+\-Z]*)?", text):
        return None
    return datetime.fromisoformat(text)
