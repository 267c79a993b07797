"""The report's "Why the worst samples were late" section, from stored experiments whose
documents carry the probe's explanation (fixtures of tests/test_explain_cli.py)."""

from __future__ import annotations

import copy
import json

from rtlab.records import CaseRecord, new_manifest
from rtlab.report import write_report
from rtlab.report._spikes import MAX_FIGURES_PER_CASE, TITLE
from rtlab.store import Store

from .test_explain_cli import (
    EXPLAIN,
    KERNEL_STACK,
    KWORKER_VERDICT,
    NO_STACK,
    SPIKES,
    SPIN2_VERDICT,
    SPIN_VERDICT,
    probe_doc,
    store_explained,
)
from .test_report import inline_svgs, read_csv


def _section(html: str, anchor: str) -> str:
    start = html.index(f'<section id="{anchor}">')
    return html[start : html.index("</section>", start)]


def _svg_texts(html: str) -> list[str]:
    return [e.text or "" for svg in inline_svgs(html) for e in svg.iter()]


def test_section_with_ranked_causes_spikes_and_one_timeline_per_spike(tmp_path):
    results = tmp_path / "results"
    exp = store_explained(results)
    rec = Store(results).open(exp)
    report = write_report([rec], tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert f'<a href="#spikes">{TITLE}</a>' in html
    sec = _section(html, "spikes")
    figures = [f"fig-spike-0-0-{n}" for n in (1, 2, 3)]
    assert [a for a in figures if f'<figure id="{a}"' in sec] == figures
    assert sec.count("<figure ") == len(SPIKES)
    assert sec.index("table-causes") < sec.index("<figure ")  # the ranking comes first
    texts = _svg_texts(sec)
    for lane in (
        "thread spin (PID 4242)",
        "irq 24 nvme0q3",
        "softirq TIMER",
        "idle",
        "unexplained",
        "measuring thread (PID 999)",
        "irq local_timer",
        "thread kworker/3:1 (PID 77)",
    ):
        assert lane in texts, lane
    assert "deadline 100 µs" in texts and "wake-up 520 µs" in texts
    for verdict in (SPIN_VERDICT, KWORKER_VERDICT, SPIN2_VERDICT):
        assert verdict in texts  # each figure's title, drawn as text
    # the audit finding that matches each cause, in the table and the text alternative
    assert "irq.affinity FAIL (No interrupt is routed to a real-time CPU)" in sec
    assert "workqueue.cpumask WARN (Unbound workqueues avoid the real-time CPUs)" in sec
    assert "Related audit findings: tasks.user WARN" in sec
    assert "tracefs is not mounted" in sec  # the case whose explanation is unavailable
    assert report.figures == 1 + 3 * 2 + len(SPIKES)  # box; hist, exceedance, time ×2 series


def test_causes_and_spikes_csv(tmp_path):
    results = tmp_path / "results"
    exp = store_explained(results)
    write_report([Store(results).open(exp)], tmp_path / "r.html")
    causes = read_csv(tmp_path / "r.causes.csv")
    assert [(r["rank"], r["kind"], r["name"], r["total_ns"]) for r in causes] == [
        ("1", "thread", "spin", "512000"),
        ("2", "thread", "kworker/3:1", "250000"),
        ("3", "irq", "nvme0q3", "90000"),
        ("4", "unexplained", "not idle", "78000"),
        ("5", "softirq", "TIMER", "20000"),
        ("6", "irq", "local_timer", "10000"),
        ("7", "unexplained", "idle", "10000"),
    ]
    assert causes[2]["irq"] == "24" and causes[5]["vector"] == "local_timer"
    assert causes[0]["pids"] == "4242 4243" and causes[0]["policies"] == "fifo:50"
    assert causes[2]["audit"].split()[0] == "irq.affinity:FAIL"
    assert causes[1]["audit"].split()[0] == "workqueue.cpumask:WARN"
    assert "kernel.preempt:FAIL" in causes[3]["audit"].split()
    assert "timer.mode:WARN" in causes[4]["audit"].split()
    assert causes[6]["audit"] == "cpu.idle_latency:FAIL"
    assert causes[1]["works"] == "vmstat_update"
    spikes = read_csv(tmp_path / "r.spikes.csv")
    assert [s["verdict"] for s in spikes] == [SPIN_VERDICT, KWORKER_VERDICT, SPIN2_VERDICT]
    assert [s["latency_ns"] for s in spikes] == ["520000", "300000", "150000"]
    assert spikes[2]["events_lost"] == "True"
    assert spikes[0]["cause_stack"].split(";") == KERNEL_STACK
    assert spikes[0]["cause_stack_unavailable"] == ""
    assert spikes[1]["cause_stack"] == "" and spikes[1]["cause_stack_unavailable"] == NO_STACK


def test_the_spikes_table_names_the_stopped_kernel_code(tmp_path):
    results = tmp_path / "results"
    exp = store_explained(results)
    write_report([Store(results).open(exp)], tmp_path / "r.html")
    sec = _section((tmp_path / "r.html").read_text(), "spikes")
    assert "kernel stack of the main cause" in sec
    assert "read_zero+0x72/0xd0 ← vfs_read+0xbb/0x360 ← ksys_read+0x66/0xe0" in sec
    assert f"no stack: {NO_STACK}" in sec and "user space" in sec


def test_at_most_five_timelines_per_case(tmp_path):
    many = []
    for i in range(MAX_FIGURES_PER_CASE + 3):
        s = copy.deepcopy(SPIKES[1])
        s["cycle"] = i
        many.append(s)
    results = tmp_path / "results"
    cases = [CaseRecord(0, "s", "c0", {"x": 0}, status="pending")]
    m = new_manifest(name="many", description="", source="test", series=[], cases=cases)
    Store(results).create(m, "", {}, documents={0: probe_doc(EXPLAIN, many)}, exp_id="many")
    write_report([Store(results).open("many")], tmp_path / "r.html")
    sec = _section((tmp_path / "r.html").read_text(), "spikes")
    assert sec.count("<figure ") == MAX_FIGURES_PER_CASE
    assert len(read_csv(tmp_path / "r.spikes.csv")) == len(many)
    assert "audit finding" in sec and "irq.affinity" not in sec  # no audit stored


def test_no_section_without_spikes(tmp_path):
    results = tmp_path / "results"
    docs = [probe_doc(), probe_doc({**EXPLAIN, "marked": 0}, [])]
    cases = [CaseRecord(i, "s", f"c{i}", {"x": i}, status="pending") for i in range(2)]
    m = new_manifest(name="calm", description="", source="test", series=[], cases=cases)
    Store(results).create(m, "", {}, documents=dict(enumerate(docs)), exp_id="calm")
    report = write_report([Store(results).open("calm")], tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert 'id="spikes"' not in html and TITLE not in html
    assert not (tmp_path / "r.causes.csv").exists()
    assert report.csv and all("causes" not in p.name for p in report.csv)


def test_two_experiments_name_the_setup(tmp_path):
    results = tmp_path / "results"
    a = store_explained(results, "exp-a")
    b = store_explained(results, "exp-b", audit=False)
    system = results / b / "system.json"
    system.write_text(json.dumps({"hostname": "other-box"}))
    store = Store(results)
    write_report([store.open(a), store.open(b)], tmp_path / "r.html")
    sec = _section((tmp_path / "r.html").read_text(), "spikes")
    assert sec.count("<figure ") == 2 * len(SPIKES)
    assert '<figure id="fig-spike-1-0-1"' in sec
    rows = read_csv(tmp_path / "r.causes.csv")
    assert {r["experiment"] for r in rows} == {a, b}
    assert all(r["audit"] == "" for r in rows if r["experiment"] == b)


def test_names_from_the_trace_are_escaped(rtlab, tmp_path):
    script = "<script>alert(1)</script>"
    spike = copy.deepcopy(SPIKES[1])
    spike["causes"][0]["name"] = script + "\x1b[31m"
    spike["timeline"][1]["name"] = script + "\x1b[31m"
    spike["verdict"] = f"thread `{script}\x1b[31m` ran 250 µs"
    results = tmp_path / "results"
    cases = [CaseRecord(0, "s", "c0", {"x": 0}, status="pending")]
    m = new_manifest(name="hostile", description="", source="test", series=[], cases=cases)
    Store(results).create(m, "", {}, documents={0: probe_doc(EXPLAIN, [spike])}, exp_id="h")
    write_report([Store(results).open("h")], tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert script not in html and "\x1b" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert any(script in t for t in _svg_texts(html))  # drawn as text in the figure
    rc, out, err = rtlab("explain", "h", "--results", str(results))
    assert rc == 0, err
    assert "\x1b" not in out and "\\x1b[31m" in out and script in out
