"""rtlab explain and the ranking under it, on stored experiments whose documents carry the
probe's explanation (docs/result-format.md: "explain" and "spikes")."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rtlab.analysis import (
    UNEXPLAINED,
    cause_stack,
    rank_causes,
    related_checks,
    related_findings,
    segments,
    stopped_text,
)
from rtlab.analysis._spikes import MAX_FRAME_CHARS, MAX_STACK_FRAMES
from rtlab.ingest import read_cyclictest
from rtlab.probe import RESULT_SCHEMA, migrate
from rtlab.records import CaseRecord, SeriesRecord, new_manifest
from rtlab.store import Store, write_json_atomic
from rtlab.system import SysRoot, read_facts, run_audit
from rtlab.system._audit import Context, audit_document
from rtlab.system._checks import CHECKS

FIXTURES = Path(__file__).parent / "fixtures"
BASE = read_cyclictest(FIXTURES / "cyclictest" / "real-h60.json")
DEADLINE_NS = 100_000

SPIN_VERDICT = "thread `spin` (PID 4242, fifo 50) ran 412 µs"
KWORKER_VERDICT = (
    "thread `kworker/3:1` (PID 77, other nice 0) ran 250 µs running work vmstat_update"
)
SPIN2_VERDICT = "thread `spin` (PID 4243, fifo 50) ran 100 µs"


def _thread(name: str, pid: int, ns: int, policy: str = "fifo", prio: int | None = 50,
            **extra) -> dict:  # fmt: skip
    return {"kind": "thread", "name": name, "ns": ns, "pid": pid, "policy": policy,
            "priority": prio, **extra}  # fmt: skip


def _seg(start: int, end: int, kind: str, name: str, **extra) -> dict:
    return {"start_ns": start, "end_ns": end, "kind": kind, "name": name, **extra}


def _spike(latency: int, cycle: int, causes: list[dict], timeline: list[dict], verdict: str,
           **extra) -> dict:  # fmt: skip
    unexplained = latency - sum(c["ns"] for c in causes)
    assert unexplained >= 0
    spike = {
        "thread": 0, "cpu": 3, "cycle": cycle, "latency_ns": latency, "t_ns": cycle * 1_000_000,
        "causes": sorted(causes, key=lambda c: -c["ns"]), "unexplained_ns": unexplained,
        "verdict": verdict, "woken_ns": None, "switched_in_ns": None,
        "events_lost": False, "window_truncated": False, "timeline": timeline,
    }  # fmt: skip
    spike.update(extra)
    return spike


IRQ24 = {"kind": "irq", "name": "nvme0q3", "ns": 0, "irq": 24}
#: The timer interrupt's own frames (x86-64, 6.18), then what it stopped.
IRQ_FRAMES = [
    "__hrtimer_run_queues+0x1f5/0x250", "hrtimer_interrupt+0xf8/0x240",
    "__sysvec_apic_timer_interrupt+0x54/0x110", "sysvec_apic_timer_interrupt+0x60/0x80",
    "asm_sysvec_apic_timer_interrupt+0x16/0x20",
]  # fmt: skip
KERNEL_STACK = [*IRQ_FRAMES, "read_zero+0x72/0xd0", "vfs_read+0xbb/0x360",
                "ksys_read+0x66/0xe0", "do_syscall_64+0x71/0x280"]  # fmt: skip
NO_STACK = "no timer interrupt stopped the main cause in the window"
STACK_KEYS = ("cause_stack", "cause_stack_at_ns", "cause_stack_truncated",
              "cause_stack_unavailable")  # fmt: skip


def _stack(frames: list[str] | None, at_ns: int | None = None, why: str | None = None) -> dict:
    return dict(zip(STACK_KEYS, (frames, at_ns, False, why), strict=True))


SPIKES = [
    _spike(  # as the probe writes it: segments end to end, unexplained time inside them
        520_000, 1234,
        [_thread("spin", 4242, 412_000), {**IRQ24, "ns": 60_000},
         {"kind": "softirq", "name": "TIMER", "ns": 20_000}],
        [_seg(-40_000, -5_000, "self", "measuring thread", pid=999),
         _seg(-5_000, 10_000, "idle", "swapper/3"),
         _seg(10_000, 70_000, "irq", "nvme0q3", irq=24),
         _seg(70_000, 90_000, "softirq", "TIMER"),
         _seg(90_000, 502_000, "thread", "spin", pid=4242),
         _seg(502_000, 520_000, "self", "measuring thread", pid=999)],
        SPIN_VERDICT, woken_ns=90_000, switched_in_ns=502_000, unexplained_idle_ns=10_000,
        **_stack(KERNEL_STACK, 90_000),
    ),
    _spike(  # a gap no segment covers
        300_000, 77,
        [_thread("kworker/3:1", 77, 250_000, "other", 0, work="vmstat_update"),
         {**IRQ24, "ns": 30_000}],
        [_seg(0, 30_000, "irq", "nvme0q3", irq=24),
         _seg(50_000, 300_000, "thread", "kworker/3:1", pid=77)],
        KWORKER_VERDICT, unexplained_idle_ns=0, **_stack(None, why=NO_STACK),
    ),
    _spike(
        150_000, 9,
        [_thread("spin", 4243, 100_000),
         {"kind": "irq", "name": "local_timer", "vector": "local_timer", "ns": 10_000}],
        [_seg(-20_000, -2_000, "self", "measuring thread", pid=999),
         _seg(0, 10_000, "irq", "local_timer"),
         _seg(10_000, 110_000, "thread", "spin", pid=4243)],
        SPIN2_VERDICT, events_lost=True, unexplained_idle_ns=0, **_stack(IRQ_FRAMES, 10_000),
    ),
]  # fmt: skip
EXPLAIN = {
    "status": "ok", "reason": None, "threshold_ns": DEADLINE_NS, "max_spikes": 10,
    "lookback_ns": 50_000, "instance": "rtlab-1234", "trace_clock": "mono",
    "events": ["sched:sched_switch", "sched:sched_wakeup", "irq:irq_handler_entry"],
    "missing_events": [], "cpus": [3], "marked": 7, "lost_events": 2,
}  # fmt: skip


def probe_doc(explain: dict | None = None, spikes: list | None = None) -> dict:
    """A probe document (the shape of a real one) with or without the explanation."""
    doc = copy.deepcopy(BASE)
    doc.pop("import", None)
    doc.update(schema=RESULT_SCHEMA, tool="rtlab-probe", meter="wakeup")
    if explain is not None:
        doc.update(explain=copy.deepcopy(explain), spikes=copy.deepcopy(spikes or []))
    return doc


def desktop_audit() -> dict:
    """The real audit of the desktop fixture tree with CPU 3 as the real-time CPU."""
    facts = read_facts(SysRoot(FIXTURES / "systems" / "desktop"), rt_cpus=[3])
    return audit_document(facts, run_audit(facts, Context(deadline_ns=DEADLINE_NS)))


def store_explained(results: Path, exp_id: str = "explained", audit: bool = True) -> str:
    """Cases: 0 explained (3 spikes), 1 run without --explain, 2 explanation unavailable,
    3 a schema-3 style document with no explain keys at all."""
    schema3 = probe_doc()
    for key in ("explain", "spikes"):
        schema3.pop(key, None)
    docs = [
        ("preemption", "forkcopy=4", probe_doc(EXPLAIN, SPIKES)),
        ("preemption", "forkcopy=8", probe_doc()),
        ("isolated", "forkcopy=4", probe_doc(
            {**EXPLAIN, "status": "unavailable", "reason": "tracefs is not mounted",
             "marked": 0}, [])),
        ("isolated", "forkcopy=8", schema3),
    ]  # fmt: skip
    cases = [
        CaseRecord(i, series, name, {"forkcopy": int(name.split("=")[1])}, status="pending")
        for i, (series, name, _) in enumerate(docs)
    ]
    series = [SeriesRecord(s, "", ["forkcopy"]) for s in dict.fromkeys(d[0] for d in docs)]
    m = new_manifest(name="spiky", description="", source="test", series=series, cases=cases)
    m.deadline_ns = DEADLINE_NS
    rec = Store(results).create(m, "", {"hostname": "box"},
                                documents={i: d for i, (_, _, d) in enumerate(docs)},
                                exp_id=exp_id)  # fmt: skip
    if audit:
        write_json_atomic(rec.path / "audit.json", desktop_audit())
    return exp_id


# -- the ranking --------------------------------------------------------------------------


def test_causes_ranked_by_total_time_over_all_spikes():
    ranked = rank_causes(SPIKES)
    got = [(c.kind, c.name, c.irq, c.vector, c.total_ns, c.spikes) for c in ranked]
    assert got == [
        ("thread", "spin", None, None, 512_000, 2),
        ("thread", "kworker/3:1", None, None, 250_000, 1),
        ("irq", "nvme0q3", 24, None, 90_000, 2),
        (UNEXPLAINED, "not idle", None, None, 78_000, 3),
        ("softirq", "TIMER", None, None, 20_000, 1),
        ("irq", "local_timer", None, "local_timer", 10_000, 1),  # ties: by kind, then name
        (UNEXPLAINED, "idle", None, None, 10_000, 1),
    ]
    latency = sum(s["latency_ns"] for s in SPIKES)
    assert sum(c.total_ns for c in ranked) == latency  # causes + unexplained = latency
    assert ranked[0].share == pytest.approx(512_000 / latency)
    assert sum(c.share for c in ranked) == pytest.approx(1.0)
    assert ranked[0].pids == (4242, 4243) and ranked[0].policies == ("fifo 50",)
    assert ranked[1].policies == ("other nice 0",) and ranked[1].works == ("vmstat_update",)
    assert [c.what for c in ranked[2:]] == [
        "irq 24 nvme0q3", "unexplained (CPU not idle)", "softirq TIMER", "irq local_timer",
        "unexplained (CPU idle)",
    ]  # fmt: skip
    assert rank_causes([]) == []


def test_unexplained_time_in_one_row_without_the_idle_split():
    old = [{k: v for k, v in s.items() if k != "unexplained_idle_ns"} for s in SPIKES]
    rows = [c for c in rank_causes(old) if c.kind == UNEXPLAINED]
    assert [(c.name, c.total_ns, c.spikes, c.what) for c in rows] == [
        ("", 88_000, 3, "unexplained")
    ]


def test_unexplained_lane_is_what_the_probe_counted():
    for spike in SPIKES:
        lane = [s for s in segments(spike) if s["kind"] == UNEXPLAINED]
        assert sum(s["end_ns"] - s["start_ns"] for s in lane) == spike["unexplained_ns"]
        assert all(0 <= s["start_ns"] < s["end_ns"] <= spike["latency_ns"] for s in lane)
    lane = [(s["start_ns"], s["end_ns"]) for s in segments(SPIKES[0]) if s["kind"] == UNEXPLAINED]
    assert lane == [(0, 10_000), (502_000, 520_000)]  # idle after the activation; self, woken
    lane = [(s["start_ns"], s["end_ns"]) for s in segments(SPIKES[1]) if s["kind"] == UNEXPLAINED]
    assert lane == [(30_000, 50_000)]  # a gap
    segs = segments(SPIKES[0])
    assert [s["start_ns"] for s in segs] == sorted(s["start_ns"] for s in segs)
    # another thread before the measuring thread was woken: the timer was late, not it
    early = {**SPIKES[1], "woken_ns": 100_000}
    lane = [(s["start_ns"], s["end_ns"]) for s in segments(early) if s["kind"] == UNEXPLAINED]
    assert lane == [(30_000, 100_000)]


def test_related_checks_are_real_audit_check_ids():
    ids = {c.id for c in CHECKS}
    causes = [c for s in SPIKES for c in s["causes"]] + [
        {"kind": UNEXPLAINED},
        {"kind": UNEXPLAINED, "name": "idle"},
        {"kind": UNEXPLAINED, "name": "not idle"},
        {"kind": "timer", "name": "tick_sched_timer"},
        {"kind": "timer", "name": "watchdog_timer_fn"},
        {"kind": "thread", "name": "kworker/3:1", "work": "wb_workfn"},
        {"kind": "irq", "name": "IPI reschedule", "vector": "IPI reschedule"},
        {"kind": "other", "name": "measuring thread itself"},
        {"kind": "timer", "name": "hrtimer_wakeup"},
        {"kind": "softirq", "name": "RCU"},
        {"kind": "softirq", "name": "NET_RX"},
        {"kind": "thread", "name": "ksoftirqd/3"},
        {"kind": "thread", "name": "rcuc/3"},
        {"kind": "thread", "name": "irq/24-nvme0q3"},
    ]
    for c in causes:
        assert set(related_checks(c)) <= ids, c
    assert related_checks({"kind": "irq", "name": "nvme0q3", "irq": 24})[0] == "irq.affinity"
    assert related_checks({"kind": "thread", "name": "kworker/u8:2"})[0] == "workqueue.cpumask"
    assert "boot.nohz_full" in related_checks({"kind": "softirq", "name": "TIMER"})
    assert "boot.nohz_full" in related_checks({"kind": "timer", "name": "tick_sched_timer"})
    assert related_checks({"kind": "other", "name": "x"}) == ()
    assert related_checks({"kind": "timer", "name": "hrtimer_wakeup"}) == ()


def test_related_findings_come_from_the_audit_by_check_id():
    findings = desktop_audit()["findings"]
    irq = related_findings({"kind": "irq", "name": "nvme0q3", "irq": 24}, findings)
    assert irq[0]["id"] == "irq.affinity" and irq[0]["status"] == "FAIL"
    kworker = related_findings({"kind": "thread", "name": "kworker/3:1"}, findings)
    assert kworker[0]["id"] == "workqueue.cpumask"
    gap = [f["id"] for f in related_findings({"kind": UNEXPLAINED}, findings)]
    assert "kernel.preempt" in gap and "cpu.idle_latency" in gap
    idle = [f["id"] for f in related_findings({"kind": UNEXPLAINED, "name": "idle"}, findings)]
    assert idle == ["cpu.idle_latency"]  # boot.cstate_limit is not a WARN or FAIL there
    busy = [f["id"] for f in related_findings({"kind": UNEXPLAINED, "name": "not idle"},
                                              findings)]  # fmt: skip
    assert busy[0] == "kernel.preempt" and "cpu.idle_latency" not in busy
    vmstat = {"kind": "thread", "name": "kworker/3:1", "work": "vmstat_update"}
    assert related_checks(vmstat)[0] == "vm.stat_interval"
    ok = [dict(f, status="OK") for f in findings]
    assert related_findings({"kind": "irq", "name": "x", "irq": 1}, ok) == []


# -- rtlab explain --------------------------------------------------------------------------


def test_json_has_every_case_with_its_explanation_spikes_and_summary(rtlab, tmp_path):
    results = tmp_path / "results"
    exp = store_explained(results)
    rc, out, err = rtlab("explain", exp, "--results", str(results), "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["id"] == exp
    assert [c["case"]["index"] for c in data["cases"]] == [0, 1, 2, 3]
    first = data["cases"][0]
    assert set(first) == {"case", "explain", "spikes", "summary"}
    assert first["case"] == {"index": 0, "series": "preemption", "name": "forkcopy=4",
                             "label": "4", "meter": "wakeup"}  # fmt: skip
    assert first["explain"]["status"] == "ok" and first["explain"]["threshold_ns"] == DEADLINE_NS
    assert [s["verdict"] for s in first["spikes"]] == [SPIN_VERDICT, KWORKER_VERDICT, SPIN2_VERDICT]
    summary = first["summary"]
    assert [(r["kind"], r["name"], r["total_ns"], r["spikes"]) for r in summary][:4] == [
        ("thread", "spin", 512_000, 2),
        ("thread", "kworker/3:1", 250_000, 1),
        ("irq", "nvme0q3", 90_000, 2),
        (UNEXPLAINED, "not idle", 78_000, 3),
    ]
    assert set(summary[0]) >= {"kind", "name", "total_ns", "share", "spikes", "pids", "audit"}
    assert summary[1]["works"] == ["vmstat_update"]
    # vmstat work: vm.stat_interval first, but it is only INFO there
    assert summary[1]["audit"][0]["id"] == "workqueue.cpumask"
    assert summary[0]["pids"] == [4242, 4243]
    assert summary[2]["audit"][0] == {
        "id": "irq.affinity", "status": "FAIL",
        "title": "No interrupt is routed to a real-time CPU",
    }  # fmt: skip
    for i in (1, 3):  # run without --explain; a document with no explain keys at all
        assert data["cases"][i]["explain"] is None
        assert data["cases"][i]["spikes"] == [] and data["cases"][i]["summary"] == []
    assert data["cases"][2]["explain"]["status"] == "unavailable"


def test_text_has_the_ranking_the_verdicts_and_the_timelines(rtlab, tmp_path):
    results = tmp_path / "results"
    exp = store_explained(results)
    rc, out, err = rtlab("explain", exp, "0", "--results", str(results))
    assert rc == 0, err
    for verdict in (SPIN_VERDICT, KWORKER_VERDICT, SPIN2_VERDICT):
        assert verdict in out
    lines = out.splitlines()
    ranked = [next(i for i, x in enumerate(lines) if what in x and "%" in x)
              for what in ("thread spin", "thread kworker/3:1", "irq 24 nvme0q3")]  # fmt: skip
    assert ranked == sorted(ranked)
    assert "irq.affinity FAIL" in out and "workqueue.cpumask WARN" in out
    assert "spike 1 of 3" in out and "spike 3 of 3" in out
    assert "unexplained (CPU not idle)" in out and "unexplained (CPU idle)" in out
    assert "measuring thread (PID 999)" in out and "│ idle " in out
    assert "work vmstat_update" in out
    assert "unexplained 28.0 µs (10.0 µs of it with the CPU idle)" in out
    assert "deadline 100 µs" in out
    assert "trace events were lost" in out
    assert "forkcopy=8" not in out  # only the case asked for
    at = lines.index(next(x for x in lines if "kernel stack of the main cause" in x))
    assert "timer interrupt, 90.0 µs after the activation" in lines[at]
    assert [x.strip() for x in lines[at + 1 : at + 5]] == KERNEL_STACK[5:]
    assert f"kernel stack of the main cause: no stack: {NO_STACK}" in out
    assert "kernel stack of the main cause: user space" in out
    assert "asm_sysvec" not in out  # the interrupt's own frames: in --json only


def test_cause_stack_split_at_the_interrupt_entry_and_bounded():
    st = cause_stack(SPIKES[0])
    assert st.frames == tuple(KERNEL_STACK) and st.stopped == tuple(KERNEL_STACK[5:])
    assert not st.user and st.at_ns == 90_000 and st.unavailable is None
    assert stopped_text(st) == "read_zero+0x72/0xd0 ← vfs_read+0xbb/0x360 ← ksys_read+0x66/0xe0 ← …"
    user = cause_stack(SPIKES[2])
    assert user.user and user.stopped == () and stopped_text(user).startswith("user space")
    none = cause_stack(SPIKES[1])
    assert none.frames == () and none.unavailable == NO_STACK
    assert stopped_text(none) == f"no stack: {NO_STACK}"
    assert cause_stack({"verdict": "x"}) is None  # a document older than the stacks
    odd = cause_stack({"cause_stack": ["f" * 500, 3, None] + ["g+0x1/0x2"] * 100})
    assert len(odd.frames) == MAX_STACK_FRAMES - 2 and odd.truncated
    assert len(odd.frames[0]) == MAX_FRAME_CHARS and odd.stopped == odd.frames
    assert cause_stack({"cause_stack": []}).unavailable == "the stack had no frame"


def test_a_schema_6_document_migrates_without_stacks():
    doc = probe_doc(EXPLAIN, [{k: v for k, v in SPIKES[0].items() if k not in STACK_KEYS}])
    doc["schema"] = 6
    new = migrate(doc, "old.json")
    assert new["schema"] == RESULT_SCHEMA == 8
    assert new["explain"]["stacks"]["recorded"] is False
    spike = new["spikes"][0]
    assert spike["cause_stack"] is None and spike["cause_stack_unavailable"]
    assert cause_stack(spike).unavailable == spike["cause_stack_unavailable"]
    assert migrate(probe_doc(EXPLAIN, SPIKES), "new.json")["spikes"][0]["cause_stack"] == (
        KERNEL_STACK
    )


def test_case_selected_by_number_name_series_and_value(rtlab, tmp_path):
    results = tmp_path / "results"
    exp = store_explained(results)

    def indexes(*case: str) -> list[int]:
        rc, out, err = rtlab("explain", exp, *case, "--results", str(results), "--json")
        assert rc == 0, err
        return [c["case"]["index"] for c in json.loads(out)["cases"]]

    assert indexes("0") == [0]
    assert indexes("preemption/forkcopy=4") == [0]
    assert indexes("preemption / forkcopy=4") == [0]
    assert indexes("2") == [2]


def test_cases_without_an_explanation(rtlab, tmp_path):
    results = tmp_path / "results"
    exp = store_explained(results)
    rc, out, err = rtlab("explain", exp, "1", "--results", str(results))
    assert rc == 2 and out == ""
    assert err.count("\n") == 1
    assert "case 1: preemption / forkcopy=8 was run without --explain" in err
    assert "rerun with `rtlab run test --explain 100us`" in err  # the experiment's source
    rc, out, err = rtlab("explain", exp, "3", "--results", str(results), "--json")
    assert rc == 2 and out == "" and "without --explain" in err
    rc, out, err = rtlab("explain", exp, "2", "--results", str(results))
    assert rc == 0, err
    assert "explanation unavailable: tracefs is not mounted" in out
    rc, out, err = rtlab("explain", exp, "--results", str(results))  # all cases
    assert rc == 0, err
    assert "case 1: preemption / forkcopy=8: run without --explain" in out
    assert SPIN_VERDICT in out


def test_an_experiment_with_no_explanation_at_all(rtlab, tmp_path):
    results = tmp_path / "results"
    docs = [probe_doc(), probe_doc()]
    cases = [CaseRecord(i, "s", f"c{i}", {"x": i}, status="pending") for i in range(2)]
    m = new_manifest(name="plain", description="", source="test", series=[], cases=cases)
    Store(results).create(m, "", {}, documents=dict(enumerate(docs)), exp_id="plain")
    rc, out, err = rtlab("explain", "plain", "--results", str(results))
    assert rc == 2 and out == ""
    assert err == (
        "rtlab: plain: no case was run with --explain; rerun with `rtlab run test --explain "
        "100us`\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], 'no experiment "nope"'),
        (["explained", "9"], "no case number 9 (0..3)"),
        (["explained", "forkcopy=4"], "is ambiguous: 0 (preemption / forkcopy=4), 2 ("),
        (["explained", "nothing"], "no case 'nothing'"),
    ],
)
def test_bad_ids_and_cases_exit_2_with_one_line(rtlab, tmp_path, args, message):
    results = tmp_path / "results"
    store_explained(results)
    rc, out, err = rtlab("explain", *args, "--results", str(results))
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and message in err, err


def test_pending_case_is_refused(rtlab, tmp_path):
    results = tmp_path / "results"
    exp = store_explained(results)
    manifest = json.loads((results / exp / "experiment.json").read_text())
    manifest["cases"][0].update(status="pending", document=None)
    (results / exp / "experiment.json").write_text(json.dumps(manifest))
    rc, _, err = rtlab("explain", exp, "0", "--results", str(results))
    assert rc == 2 and "case 0 (preemption / forkcopy=4) has not run" in err


def test_without_a_stored_audit_the_causes_have_no_finding(rtlab, tmp_path):
    results = tmp_path / "results"
    exp = store_explained(results, audit=False)
    rc, out, err = rtlab("explain", exp, "0", "--results", str(results), "--json")
    assert rc == 0, err
    assert all(r["audit"] == [] for r in json.loads(out)["cases"][0]["summary"])


def test_odd_values_in_the_explain_object_do_not_break_the_output(rtlab, tmp_path):
    results = tmp_path / "results"
    odd = {**EXPLAIN, "threshold_ns": "100us", "cpus": 3, "events": None, "marked": None}
    spike = {**SPIKES[0], "woken_ns": "soon", "t_ns": None}
    cases = [CaseRecord(0, "s", "c0", {"x": 0}, status="pending")]
    m = new_manifest(name="odd", description="", source="test", series=[], cases=cases)
    Store(results).create(m, "", {}, documents={0: probe_doc(odd, [spike])}, exp_id="odd")
    rc, out, err = rtlab("explain", "odd", "--results", str(results))
    assert rc == 0, err
    assert "of ? sample(s) over ?" in out and "woken after ?" in out and SPIN_VERDICT in out
