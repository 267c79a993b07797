"""Parse `cyclictest --json=FILE` output into per-thread raw figures.

Every value is type-checked where it is read; numbers must fit int64 here, and the
caller checks the tighter per-field ranges of both formats in one place. Raises
UserError with a one-line reason (without the file name; the caller adds it).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from rtlab._input import MAX_JSON_DEPTH, check_depth
from rtlab.errors import UserError
from rtlab.ingest._limits import INT32_LIMIT, INT64_MAX, MAX_BUCKETS
from rtlab.ingest._text import clean_text

_INT_TEXT = re.compile(r"\s*[-+]?[0-9]{1,30}\s*")
_FLOAT_TEXT = re.compile(
    r"\s*[-+]?(?:(?:[0-9]{1,30}\.?[0-9]{0,30}|\.[0-9]{1,30})(?:[eE][-+]?[0-9]{1,5})?"
    r"|nan|inf(?:inity)?)\s*",
    re.IGNORECASE,
)
# cyclictest prints avg = sum / cycles with "%.2f", which gives "nan" / "-nan" for a
# thread without cycles: not JSON. Repair bare nan/inf tokens after ':', ',' or '['.
_BARE_NONFINITE = re.compile(r"([:,\[]\s*)(-?)(nan|inf(?:inity)?)\b", re.IGNORECASE)
# Members and items besides the histogram buckets: a real file has a dozen per thread.
# Counted (as ',' and ':') before parsing: json.loads spends ~150 bytes on each.
_MAX_VALUES = MAX_BUCKETS + 65536
_MAX_CMDLINE = 65536  # characters; the kernel limits one argument to 128 KiB
_MAX_TEXT = 4096  # characters of any other string kept in the document
_UNAME = ("sysname", "nodename", "release", "version", "machine")


def show(value: Any) -> str:
    """A short, one-line description of a JSON value for an error message."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return f"a {len(str(abs(value)))}-digit integer"
    if isinstance(value, str) and len(value) > 30:
        return repr(value[:30]) + "..."
    return repr(value)


def _repair(m: re.Match[str]) -> str:
    word = m.group(3).lower()
    if word == "nan":
        return m.group(1) + "NaN"
    return m.group(1) + m.group(2) + "Infinity"


def _loads(text: str) -> Any:
    """The JSON of TEXT (bare nan/inf repaired), nested as rtlab._input allows."""
    doc = _parse(text)
    check_depth(doc)
    return doc


def _parse(text: str) -> Any:
    values = max(text.count(","), text.count(":"))
    if values > _MAX_VALUES:
        raise UserError(
            f"about {values} JSON values: more than the {MAX_BUCKETS} histogram buckets accepted"
        )
    try:
        return json.loads(text)
    except RecursionError:
        raise UserError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError as first:
        repaired = _BARE_NONFINITE.sub(_repair, text)
        if repaired != text:
            try:
                return json.loads(repaired)
            except (ValueError, RecursionError):
                pass
        if first.pos >= len(text.rstrip()):
            raise UserError("truncated JSON (ends before the document is closed)") from None
        raise UserError(
            f"invalid JSON at line {first.lineno} column {first.colno}: {first.msg}"
        ) from None
    except ValueError as e:  # an integer beyond Python's digit limit
        raise UserError(f"invalid JSON: {str(e).partition(':')[0]}") from None


def _norm_keys(obj: dict[str, Any]) -> dict[str, Any]:
    """cyclictest writes some keys with a trailing colon ("cmdline:"): strip one."""
    return {(k[:-1] if k.endswith(":") else k): v for k, v in obj.items()}


def _int(value: Any, what: str, *, nonneg: bool = False) -> int:
    """An integer that fits int64: a JSON integer, an integral float or such a string."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise UserError(f"{what} is not a number: {show(value)}")
    if isinstance(value, str):  # histogram keys; tolerated for the other fields
        text = value
        if _INT_TEXT.fullmatch(text):
            value = int(text)
        elif _FLOAT_TEXT.fullmatch(text):
            value = float(text)
        else:
            raise UserError(f"{what} is not a number: {show(text)}")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise UserError(f"{what} is not an integer: {show(value)}")
        value = int(value)
    if nonneg and value < 0:
        raise UserError(f"{what} is negative: {show(value)}")
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise UserError(f"{what} is out of range: {show(value)}")
    return value


def _mean(value: Any, what: str) -> float | None:
    """avg: a number, or unknown (None) for nan/inf/null/"nan"."""
    if value is None:
        return None
    if isinstance(value, str):
        if not _FLOAT_TEXT.fullmatch(value):
            raise UserError(f"{what} is not a number: {show(value)}")
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{what} is not a number: {show(value)}")
    if isinstance(value, int) and abs(value) > INT64_MAX:
        raise UserError(f"{what} is out of range: {show(value)}")
    return float(value) if math.isfinite(value) else None


def _histogram(value: Any, where: str) -> dict[int, int]:
    if not isinstance(value, dict):
        raise UserError(f"{where}: 'histogram' is not an object")
    hist: dict[int, int] = {}
    for key, count in value.items():
        bucket = _int(key, f"{where}: histogram bucket", nonneg=True)
        hist[bucket] = hist.get(bucket, 0) + _int(
            count, f"{where}: histogram count of bucket {bucket}", nonneg=True
        )
    return hist


def _string(doc: dict[str, Any], key: str, what: str, limit: int = _MAX_TEXT) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise UserError(f"{what} is not a string: {show(value)}")
    if len(value) > limit:
        raise UserError(f"{what} is longer than {limit} characters")
    return clean_text(value)


def _version(doc: dict[str, Any]) -> str | None:
    """rt_test_version: a string; a plain number is taken as its text."""
    value = doc.get("rt_test_version")
    if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < 1e9:
        return str(value)
    if value is None or isinstance(value, str):
        return _string(doc, "rt_test_version", "rt_test_version")
    raise UserError(f"rt_test_version is not a version string: {show(value)}")


def _sysinfo(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UserError(f"sysinfo is not an object: {show(value)}")
    info: dict[str, Any] = {k: _string(value, k, f"sysinfo.{k}") for k in _UNAME}
    rt = value.get("realtime")
    if rt is not None:
        rt = _int(rt, "sysinfo.realtime") if not isinstance(rt, bool) else int(rt)
        if not 0 <= rt < INT32_LIMIT:  # cyclictest prints a flag with %d
            raise UserError(f"sysinfo.realtime is out of range: {rt}")
    info["realtime"] = rt
    return info


def _meta(doc: dict[str, Any]) -> dict[str, Any]:
    code = doc.get("return_code")
    if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
        raise UserError(f"return_code is not an integer: {show(code)}")
    return {
        "cmdline": _string(doc, "cmdline", "cmdline", _MAX_CMDLINE),
        "rt_test_version": _version(doc),
        "start_time": _string(doc, "start_time", "start_time"),
        "end_time": _string(doc, "end_time", "end_time"),
        "return_code": code,
        "sysinfo": _sysinfo(doc.get("sysinfo")),
    }


def _unit(doc: dict[str, Any]) -> int:
    """ns per unit from resolution_in_ns (cyclictest writes 0 or 1; -N gives 1)."""
    res = doc.get("resolution_in_ns")
    if res is None or res is False or (type(res) in (int, float) and res == 0):
        return 1000
    if res is True or (type(res) in (int, float) and res == 1):
        return 1
    raise UserError(f"resolution_in_ns is not 0 or 1: {show(res)}")


def _thread(key: str, value: Any) -> dict[str, Any]:
    index = _int(key, "thread key", nonneg=True)
    where = f"thread {index}"
    if not isinstance(value, dict):
        raise UserError(f"{where} is not an object")
    t = _norm_keys(value)
    if "cycles" not in t:
        raise UserError(f"{where}: no 'cycles'")
    count = _int(t["cycles"], f"{where}: cycles", nonneg=True)
    cpu = t.get("cpu")
    cpu = _int(cpu, f"{where}: cpu") if cpu is not None else None
    hist = _histogram(t["histogram"], where) if t.get("histogram") is not None else None
    lo = hi = mean = None
    if count:
        for k in ("min", "max"):
            if k not in t:
                raise UserError(f"{where}: no '{k}'")
        lo = _int(t["min"], f"{where}: min")
        hi = _int(t["max"], f"{where}: max")
        if lo > hi:
            raise UserError(f"{where}: min {lo} is larger than max {hi}")
        mean = _mean(t.get("avg"), f"{where}: avg")
    overflow = 0
    if hist is not None:
        binned = sum(hist.values())
        if binned > count:
            raise UserError(f"{where}: histogram holds {binned} samples but cycles is {count}")
        overflow = count - binned
    return {
        "index": index,
        "cpu": cpu if cpu is None or cpu >= 0 else None,
        "count": count,
        "min": lo,
        "max": hi,
        "mean": mean,
        "hist": hist,
        "overflow": overflow,
    }


def parse_json(text: str) -> dict[str, Any]:
    """Return {"meta": {...}, "unit_ns": 1|1000, "threads": [raw thread, ...]}.

    A raw thread has index, cpu, count, min, max, mean (in the file's unit; min/max/mean
    None without cycles), hist ({bucket: count}, possibly empty, or None when absent) and
    overflow (cycles minus the histogram's sum). meta holds cmdline, rt_test_version,
    start_time, end_time (str or None), return_code (int or None) and sysinfo (None or
    the uname strings and realtime).
    """
    doc = _loads(text)
    if not isinstance(doc, dict):
        raise UserError("JSON document is not an object")
    doc = _norm_keys(doc)
    threads = doc.get("thread")
    if not isinstance(threads, dict):
        raise UserError("no 'thread' object (not a cyclictest --json file?)")
    unit_ns = _unit(doc)
    raw = sorted((_thread(k, v) for k, v in threads.items()), key=lambda r: r["index"])
    if len({r["index"] for r in raw}) != len(raw):
        raise UserError("duplicate thread numbers")
    n = doc.get("num_threads")
    if n is not None:
        n = _int(n, "num_threads")
        if n != len(raw):
            raise UserError(f"num_threads is {n} but 'thread' has {len(raw)} entries")
    return {"meta": _meta(doc), "unit_ns": unit_ns, "threads": raw}
