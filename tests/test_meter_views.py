"""Each meter's own table in show, compare and the report, from documents with the
meters' fields (docs/meter-*.md)."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import pytest

from rtlab.analysis import VIEWS, meter_rows
from rtlab.ingest import read_cyclictest
from rtlab.records import CaseRecord, SeriesRecord, new_manifest
from rtlab.store import Store

BASE = read_cyclictest(Path(__file__).parent / "fixtures" / "cyclictest" / "real-h60.json")


def _doc(meter: str, **fields) -> dict:
    doc = copy.deepcopy(BASE)
    doc["meter"] = meter
    doc["tool"] = "rtlab-probe"
    for t in doc["threads"]:
        t.update(fields.get("thread", {}))
    doc["params"].update(fields.get("params", {}))
    doc.update(fields.get("top", {}))
    return doc


def periodic(mechanism: str, cpu_ns: float, drift: int) -> dict:
    return _doc(
        "periodic",
        thread={"mechanism": mechanism, "cpu_ns_per_activation": cpu_ns, "drift_ns": drift},
        params={"mechanism": mechanism, "interval_ns": 1_000_000},
    )


def response(transport: str, lost: int, rate: float | None) -> dict:
    top = {} if rate is None else {"max_rate_per_s": rate}
    return _doc("response", thread={"transport": transport, "lost": lost}, top=top)


def noise(pct: float, throttled: dict | None) -> dict:
    return _doc(
        "noise",
        thread={"noise_pct": pct, "noise_ns_per_s": pct * 1e7, "throttled": throttled},
    )


def _store(results: Path, exp_id: str, docs: list[tuple[str, str, dict]]) -> str:
    cases = [
        CaseRecord(i, series, name, {"x": name}, status="pending")
        for i, (series, name, _) in enumerate(docs)
    ]
    series = [SeriesRecord(s, "", ["x"]) for s in dict.fromkeys(d[0] for d in docs)]
    m = new_manifest(name=exp_id, description="", source="test", series=series, cases=cases)
    Store(results).create(m, "", {}, documents={i: d for i, (_, _, d) in enumerate(docs)},
                          exp_id=exp_id)  # fmt: skip
    return exp_id


DOCS = [
    ("mechanisms", "nanosleep-abs", periodic("nanosleep-abs", 2_000.0, 0)),
    ("mechanisms", "busy-poll", periodic("busy-poll", 990_000.0, 0)),
    ("mechanisms", "nanosleep-rel", periodic("nanosleep-rel", 2_500.0, 180_000)),
    ("transports", "pipe", response("pipe", 3, 12_345.0)),
    ("transports", "futex", response("futex", 0, None)),
    ("noise", "fifo", noise(5.0, {"count": 2, "total_ns": 100_000_000})),
    ("noise", "other", noise(0.01, None)),
]


def test_rows_of_each_view():
    view, (row,) = meter_rows(DOCS[2][2])
    assert view is VIEWS["periodic"] and row["mechanism"] == "nanosleep-rel"
    assert row["drift_ns"] == 180_000 and row["cpu_ns_per_activation"] == 2_500.0
    assert row["cpu_pct"] == pytest.approx(0.25)  # 2.5 µs of each 1 ms interval
    view, (row,) = meter_rows(DOCS[3][2])
    lost = 3 * len(BASE["threads"])  # summed over the handler threads
    assert (row["transport"], row["lost"], row["max_rate_per_s"]) == ("pipe", lost, 12_345.0)
    view, rows = meter_rows(DOCS[5][2])
    assert view.key == "cpu" and len(rows) == len(BASE["threads"])
    assert rows[0]["throttled"] == 2 and rows[0]["throttled_ns"] == 100_000_000
    assert meter_rows(BASE) is None  # wakeup: the statistics say it all


def test_show_compare_and_report_print_each_meters_table(rtlab, tmp_path):
    results = tmp_path / "results"
    a = _store(results, "a", DOCS)
    b = _store(results, "b", DOCS)
    rc, out, err = rtlab("show", a, "--results", str(results))
    assert rc == 0, err
    for title in ("Periodic mechanisms", "Event response", "OS noise"):
        assert title in out
    assert "busy-poll" in out and "180" in out and "12,345" in out and "5 %" in out
    assert "CPU %" in out and "99 %" in out  # busy-poll: 990 µs of each 1 ms
    rc, out, _ = rtlab("show", a, "--results", str(results), "--json")
    meters = json.loads(out)["meters"]
    assert [r["mechanism"] for r in meters["periodic"]] == [
        "nanosleep-abs",
        "busy-poll",
        "nanosleep-rel",
    ]
    assert all(r["median"] <= r["max"] for r in meters["periodic"] + meters["response"])
    assert {r["case"] for r in meters["noise"]} == {"fifo", "other"}

    rc, out, err = rtlab("compare", a, b, "--results", str(results))
    assert rc == 0, err
    # The table is wide: long headers wrap, the CPU share's does not.
    assert "Periodic mechanisms" in out and "CPU % A" in out
    rc, out, _ = rtlab("compare", a, b, "--results", str(results), "--json")
    pairs = json.loads(out)["meters"]["response"]
    assert [p["baseline_row"]["transport"] for p in pairs] == ["pipe", "futex"]

    rc, out, err = rtlab("report", a, b, "--results", str(results), "-o", str(tmp_path / "r.html"))
    assert rc == 0, err
    html = (tmp_path / "r.html").read_text()
    assert "What each meter answers" in html and "How much of my CPU" in html
    with open(tmp_path / "r.meter-periodic.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["mechanism"] for r in rows} == {"nanosleep-abs", "busy-poll", "nanosleep-rel"}


@pytest.mark.parametrize("meter", sorted(VIEWS))
def test_views_survive_missing_fields(meter):
    doc = _doc(meter)
    view, rows = meter_rows(doc)
    assert rows or view.key  # a view of rows per key (CPU, size) may have none
    assert all(c.format(r.get(c.key)) for r in rows for c in view.columns)
