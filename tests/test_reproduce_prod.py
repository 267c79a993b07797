"""The layouts docs/reproduce.md promises for throughput (Odde C.6-C.9: a row per
workload with its figure, user and system time) and production conditions (C.48-C.49: a
row per case with the CPU time split and the load average). Rows, columns, statistic
names; never numbers."""

from __future__ import annotations

import copy
import csv
import json
import shlex
import sys
from pathlib import Path

from rtlab.analysis import PRODUCTION_HEADERS
from rtlab.analysis._production import CATEGORIES
from rtlab.ingest import read_cyclictest
from rtlab.records import CaseRecord, SeriesRecord, new_manifest
from rtlab.store import Store

WORKLOADS = [
    f"compute={shlex.quote(sys.executable)} -c 'sum(range(10**6))'",
    "syscalls=dd if=/dev/zero of=/dev/null bs=512 count=20000",
]


def _bench(rtlab, results: Path, *args: str) -> str:
    cmd = ["bench", "throughput", "--repeat", "2", "--json", "--results", str(results)]
    for w in WORKLOADS:
        cmd += ["--workload", w]
    rc, out, err = rtlab(*cmd, *args)
    assert rc == 0, err
    return json.loads(out)["id"]


def test_throughput_per_workload_with_user_and_system_time(rtlab, tmp_path):
    a, b = _bench(rtlab, tmp_path), _bench(rtlab, tmp_path)
    rc, out, _ = rtlab("show", a, "--results", str(tmp_path), "--json")
    rows = json.loads(out)["meters"]["throughput"]
    assert [r["workload"] for r in rows] == ["compute", "syscalls"]
    for r in rows:
        assert {"mean", "ci_low", "ci_high", "stddev", "runs", "user_s", "system_s"} <= set(r)
        assert set(r["times"]) == {"wall_s", "user_s", "system_s"}
        for t in r["times"].values():
            assert {"values", "mean", "ci_low", "ci_high"} <= set(t)
    rc, out, _ = rtlab("show", a, "--results", str(tmp_path))
    head = next(line for line in out.splitlines() if "workload" in line)
    for col in ("workload", "mean", "95 % CI low", "95 % CI high", "user s", "system s"):
        assert col in head
    rc, out, _ = rtlab("compare", a, b, "--results", str(tmp_path), "--json")
    assert rc == 0
    pairs = json.loads(out)["meters"]["throughput"]
    assert len(pairs) == 2
    for p in pairs:
        assert {"change_pct", "user_s_change_pct", "system_s_change_pct"} <= set(p["change"])


BASE = read_cyclictest(Path(__file__).parent / "fixtures" / "cyclictest" / "real-h60.json")


def _case_doc(cpu: int, busy_ticks: int) -> dict:
    doc = copy.deepcopy(BASE)
    for t in doc["threads"]:
        t["cpu"] = cpu
    split = {c: 0 for c in ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")}
    one = dict(split, user=busy_ticks * 10**7, idle=(100 - busy_ticks) * 10**7)
    load = {"avg_1min": 1.5, "avg_5min": 1.0, "avg_15min": 0.5, "runnable": 2, "threads": 99}
    doc["activity"] = {
        "source": "/proc/stat",
        "interval_ns": 10**9,
        "cpu_busy_pct": {"0": 1.0, "1": float(busy_ticks)},
        "cpu_busy_pct_all": 1.0,
        "ctxt_per_s": 1.0,
        "intr_per_s": 1.0,
        "softirq_per_s": 1.0,
        "tick_ns": 10**7,
        "cpu_time_ns": {
            "0": dict(split, idle=10**9),
            "1": one,
            "all": {c: one[c] + (10**9 if c == "idle" else 0) for c in split},
        },
        "loadavg": {"start": load, "end": load},
    }
    return doc


def _store(results: Path) -> str:
    docs = [("idle", "load=none", _case_doc(1, 1)), ("loaded", "load=spin", _case_doc(1, 99))]
    cases = [CaseRecord(i, s, n, {"load": n}, status="pending") for i, (s, n, _) in enumerate(docs)]
    series = [SeriesRecord(s, "", ["load"]) for s, _, _ in docs]
    m = new_manifest(name="prod", description="", source="test", series=series, cases=cases)
    Store(results).create(m, "", {}, documents={i: d for i, (_, _, d) in enumerate(docs)},
                          exp_id="prod")  # fmt: skip
    return "prod"


def test_production_conditions_per_case(rtlab, tmp_path):
    exp = _store(tmp_path)
    rc, out, err = rtlab("show", exp, "--results", str(tmp_path), "--json")
    assert rc in (0, 6), err
    prod = json.loads(out)["production"]
    assert [(p["series"], p["case"]) for p in prod] == [
        ("idle", "load=none"),
        ("loaded", "load=spin"),
    ]
    for p in prod:
        assert p["measured_cpus"] == ["1"]
        assert set(p["measured"]["pct"]) == set(CATEGORIES)
        assert set(p["per_cpu"]) == {"0", "1"} and "busy_pct" in p["all"]
        assert {"avg_1min", "avg_5min", "avg_15min"} <= set(p["loadavg_end"])
    rc, out, _ = rtlab("show", exp, "--results", str(tmp_path))
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("production conditions"))
    head = lines[at + 2]
    assert all(h.split()[0] in head for h in PRODUCTION_HEADERS)
    body = "\n".join(lines[at + 4 : at + 6])
    assert "load=none" in body and "load=spin" in body


def test_production_conditions_in_the_report(rtlab, tmp_path):
    exp = _store(tmp_path)
    html = tmp_path / "r.html"
    rc, _, err = rtlab("report", exp, "--results", str(tmp_path), "-o", str(html))
    assert rc in (0, 6), err
    text = html.read_text()
    assert "Production conditions" in text and "load 1/5/15" in text
    with open(tmp_path / "r.production.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["case"], r["cpu"]) for r in rows] == [
        (case, cpu) for case in ("load=none", "load=spin") for cpu in ("0", "1", "all")
    ]
    assert {f"{c}_ns" for c in CATEGORIES} | {"busy_pct", "load_1min", "measured"} <= set(rows[0])
    assert [r["measured"] for r in rows[:3]] == ["False", "True", "False"]


def test_the_production_example_is_a_valid_experiment(rtlab, tmp_path):
    example = Path(__file__).parents[1] / "examples" / "production.toml"
    rc, out, err = rtlab("run", str(example), "--check", "--results", str(tmp_path), "--json")
    assert rc == 0, err
    cases = json.loads(out)["cases"]
    assert [c["name"] for c in cases] == [
        "load=none", "load=spin:50%", "load=hackbench:2", "load=io:/var/tmp"
    ]  # fmt: skip
