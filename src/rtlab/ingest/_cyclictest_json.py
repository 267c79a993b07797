"""Parse `cyclictest --json=FILE` output into per-thread raw figures.

Raises UserError with a one-line reason (without the file name; the caller adds it).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from rtlab.errors import UserError

_INT_TEXT = re.compile(r"\s*[-+]?[0-9]{1,30}\s*")
# cyclictest prints avg = sum / cycles with "%.2f", which gives "nan" / "-nan" for a
# thread without cycles: not JSON. Repair bare nan/inf tokens after ':', ',' or '['.
_BARE_NONFINITE = re.compile(r"([:,\[]\s*)(-?)(nan|inf(?:inity)?)\b", re.IGNORECASE)


def _repair(m: re.Match[str]) -> str:
    word = m.group(3).lower()
    if word == "nan":
        return m.group(1) + "NaN"
    return m.group(1) + m.group(2) + "Infinity"


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise UserError("JSON nested too deeply") from None
    except json.JSONDecodeError as first:
        repaired = _BARE_NONFINITE.sub(_repair, text)
        if repaired != text:
            try:
                return json.loads(repaired)
            except (json.JSONDecodeError, RecursionError):
                pass
        if first.pos >= len(text.rstrip()):
            raise UserError("truncated JSON (ends before the document is closed)") from None
        raise UserError(
            f"invalid JSON at line {first.lineno} column {first.colno}: {first.msg}"
        ) from None
    except ValueError as e:  # e.g. an integer beyond Python's digit limit
        raise UserError(f"invalid JSON: {e}") from None


def _norm_keys(obj: dict[str, Any]) -> dict[str, Any]:
    """cyclictest writes some keys with a trailing colon ("cmdline:"): strip one."""
    return {(k[:-1] if k.endswith(":") else k): v for k, v in obj.items()}


def _int(value: Any, what: str, *, nonneg: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise UserError(f"{what} is not a number: {value!r}")
    if isinstance(value, str):  # histogram keys; tolerated for the other fields
        text = value
        try:
            value = int(text) if _INT_TEXT.fullmatch(text) else float(text)
        except ValueError:
            raise UserError(f"{what} is not a number: {text[:20]!r}") from None
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise UserError(f"{what} is not an integer: {value!r}")
        value = int(value)
    if nonneg and value < 0:
        raise UserError(f"{what} is negative: {value}")
    return value


def _mean(value: Any, what: str) -> float | None:
    """avg: a number, or unknown (None) for nan/inf/null/"nan"."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise UserError(f"{what} is not a number: {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{what} is not a number: {value!r}")
    return float(value) if math.isfinite(value) else None


def _histogram(value: Any, where: str) -> dict[int, int]:
    if not isinstance(value, dict):
        raise UserError(f"{where}: 'histogram' is not an object")
    hist: dict[int, int] = {}
    for key, count in value.items():
        bucket = _int(key, f"{where}: histogram bucket", nonneg=True)
        hist[bucket] = hist.get(bucket, 0) + _int(
            count, f"{where}: histogram count of bucket {key}", nonneg=True
        )
    return hist


def parse_json(text: str) -> dict[str, Any]:
    """Return {"meta": {...}, "unit_ns": 1|1000, "threads": [raw thread, ...]}.

    A raw thread has index, cpu, count, min, max, mean (in the file's unit; min/max/mean
    None without cycles), hist ({bucket: count}, possibly empty, or None when absent) and
    overflow (cycles minus the histogram's sum).
    """
    doc = _loads(text)
    if not isinstance(doc, dict):
        raise UserError("JSON document is not an object")
    doc = _norm_keys(doc)
    threads = doc.get("thread")
    if not isinstance(threads, dict):
        raise UserError("no 'thread' object (not a cyclictest --json file?)")
    res = doc.get("resolution_in_ns", 0)
    unit_ns = 1 if res is True or (isinstance(res, int | float) and res == 1) else 1000
    raw: list[dict[str, Any]] = []
    for key, value in threads.items():
        index = _int(key, "thread key", nonneg=True)
        where = f"thread {key}"
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
        raw.append(
            {
                "index": index,
                "cpu": cpu if cpu is None or cpu >= 0 else None,
                "count": count,
                "min": lo,
                "max": hi,
                "mean": mean,
                "hist": hist,
                "overflow": overflow,
            }
        )
    raw.sort(key=lambda r: r["index"])
    if len({r["index"] for r in raw}) != len(raw):
        raise UserError("duplicate thread numbers")
    n = doc.get("num_threads")
    if isinstance(n, int) and not isinstance(n, bool) and n != len(raw):
        raise UserError(f"num_threads is {n} but 'thread' has {len(raw)} entries")
    meta = {
        k: doc.get(k)
        for k in ("cmdline", "rt_test_version", "start_time", "end_time", "return_code", "sysinfo")
    }
    return {"meta": meta, "unit_ns": unit_ns, "threads": raw}
