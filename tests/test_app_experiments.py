"""Experiments of the user's own program: `app = "CMD ARGS"` (started for each case by the
probe) and `attach = "NAME"` (a process already running), measured by the sched meter,
with the application audit made while a local case runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rtlab._appaudit import started_pids
from rtlab.analysis import meter_rows
from rtlab.errors import UserError
from rtlab.experiment import expand, parse
from rtlab.probe import load_catalog
from rtlab.probecall import probe_argv
from rtlab.system import LIVE_ROOT, SysRoot
from rtlab.targets._local import LocalTarget

from .probe.conftest import is_root

CATALOG = load_catalog(Path(__file__).parent / "fixtures" / "probe-list.json")
PERIODIC = Path(__file__).parent / "probe" / "progs" / "periodic.c"


def cases(body: str) -> list:
    exp = parse(body, "x.toml", CATALOG)
    return expand(exp, root=LIVE_ROOT).cases


def test_app_case_starts_the_command_under_its_policy_and_cpus():
    [c] = cases(
        '[[series]]\nname = "s"\napp = "./loop --config \'a b.toml\'"\nduration = "2s"\n'
        'policy = "fifo:80"\ncpus = "0"\napp_threads = "ctrl"\n'
    )
    argv = probe_argv(c.call)
    assert argv[0] == "sched" and "--policy" not in argv and "--cpus" not in argv
    assert argv[argv.index("--comm") + 1] == "ctrl"
    cut = argv.index("--")
    assert argv[cut + 1 :] == [
        *("chrt", "-f", "80", "taskset", "-c", "0"),
        *("./loop", "--config", "a b.toml"),
    ]
    assert c.params["cpus_resolved"] == "0"


def test_attach_case_selects_the_process_by_name_and_all_threads_by_default():
    [c] = cases('[[series]]\nname = "s"\nattach = "ctrlloop"\nduration = "1s"\n')
    argv = probe_argv(c.call)
    assert argv[:3] == ["sched", "--process", "ctrlloop"] and "--" not in argv
    assert "--comm" not in argv and "--threads" not in argv  # every thread found


def test_app_cases_sweep_like_any_series():
    cs = cases(
        '[[series]]\nname = "s"\napp = "prog"\nduration = "1s"\ncpus = "last"\n'
        "isolate_loads = true\n"
        'sweep = { policy = ["other:-5", "rr:10"], load = ["none", "spin:50%"] }\n'
    )
    assert len(cs) == 4
    words = [probe_argv(c.call) for c in cs]
    assert words[0][words[0].index("--") + 1 :][:6] == ["chrt", "-o", "0", "nice", "-n", "-5"]
    assert words[2][words[2].index("--") + 1 :][:3] == ["chrt", "-r", "10"]
    assert any(w.startswith("spin:50%@") for w in words[1])  # kept off the program's CPU


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('app = "   "', "key 'app': must name a command"),
        ('app = "a \\"b"', "key 'app': not a command line"),
        ('app = "x"\nattach = "y"', "'app' and 'attach' exclude each other"),
        ('attach = "/usr/bin/x"', "key 'attach': a process name"),
        ('app = "x"\nmeter = "wakeup"', "key 'meter': an app case is measured by the sched meter"),
        ('app = "x"\ninterval = "1ms"', "key 'interval': not an option of meter 'sched'"),
        ('app = "x"\npolicy = "fifo:0"', "key 'policy': 'fifo:0': priority must be 1..99"),
        ('app = "x"\npolicy = "deadline:1ms/2ms/3ms"', "key 'policy': an app case starts"),
        ('attach = "x"\ncpus = "0"', "key 'cpus': an attached process keeps its own"),
        ('app_threads = "x"', "key 'app_threads': needs 'app' or 'attach'"),
        ('app = "x"\napp_threads = ""', "'app_threads' must not be empty"),
    ],
)
def test_bad_application_keys_are_one_line(body, message):
    with pytest.raises(UserError, match=None) as e:
        cases(f'[[series]]\nname = "s"\nduration = "1s"\n{body}\n')
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_case_without_duration_is_refused():
    with pytest.raises(UserError, match="key 'duration': an app case runs for a 'duration'"):
        cases('[[series]]\nname = "s"\napp = "x"\n')


def test_the_audit_reads_this_machine_live():
    t = LocalTarget()
    assert t.processes_now() is LIVE_ROOT
    proot = t.process_root([os.getpid()])
    assert proot.live and proot.top is LIVE_ROOT


def test_started_program_is_the_probes_child_in_its_group(tmp_path):
    """In a fake /proc: rtlab (100) -> probe (200, its own group) -> program (300, same
    group) and a load (400, a group of its own); a zombie (500) is no program, nor the
    child of another group leader that rtlab started (800)."""

    def proc(pid, ppid, pgrp, state="S", comm="x y"):
        d = tmp_path / "proc" / str(pid)
        d.mkdir(parents=True)
        (d / "stat").write_text(f"{pid} ({comm}) {state} {ppid} {pgrp} {pgrp} 0 -1 0\n")

    proc(100, 1, 100)
    proc(200, 100, 200, comm="rtlab-probe")
    proc(300, 200, 200)
    proc(400, 200, 400)
    proc(500, 200, 200, "Z")
    proc(600, 50, 600)  # a group leader that is no probe, and its child
    proc(700, 600, 600)
    proc(800, 100, 800, comm="vng")  # rtlab's other child leading a group (a VM), its child
    proc(900, 800, 800, comm="qemu-system-x86")
    assert started_pids(SysRoot(tmp_path), 100) == [300]
    assert started_pids(SysRoot(tmp_path), 1) == []
    # on a target (its probe's parent is a shell there): the child of any rtlab-probe
    assert started_pids(SysRoot(tmp_path), None) == [300]


@pytest.fixture(scope="module")
def periodic(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the measured program")
    out = tmp_path_factory.mktemp("prog") / "periodic"
    subprocess.run([cc, "-O2", "-o", str(out), str(PERIODIC)], check=True)
    return out


@pytest.mark.skipif(not is_root(), reason="needs root for tracefs and SCHED_FIFO")
@pytest.mark.usefixtures("tracefs")
def test_app_and_attach_cases_run_here_with_their_audit(rtlab, periodic, tmp_path):
    attached = subprocess.Popen(
        [str(periodic), "abs", "1000", "1000000", str(tmp_path / "attached.txt")]
    )
    try:
        exp = tmp_path / "app.toml"
        exp.write_text(
            '[defaults]\nduration = "1500ms"\n'
            '[[series]]\nname = "started"\n'
            f'app = "{periodic} abs 1000 1000000 {tmp_path}/own.txt"\n'
            'cpus = "last"\nsweep = { policy = ["other", "fifo:70"] }\n'
            '[[series]]\nname = "attached"\nattach = "periodic"\n'
        )
        rc, out, err = rtlab("run", str(exp), "--results", str(tmp_path / "r"), "--json")
        assert rc == 0, err
        run_id = json.loads(out)["id"]
        rc, out, err = rtlab("show", "--results", str(tmp_path / "r"), run_id, "--json")
    finally:
        attached.kill()
        attached.wait()
    assert rc in (0, 6), err
    shown = json.loads(out)
    cases_dir = tmp_path / "r" / run_id / "cases"
    for i, policy in ((0, 0), (1, 1)):  # SCHED_OTHER, SCHED_FIFO
        doc = json.loads((cases_dir / f"00{i}.json").read_text())
        pid = doc["sched"]["command"]["pid"]
        [t] = [t for t in doc["threads"] if t["sched"]["tid"]]
        assert t["sched"]["comm"] == "periodic" and t["sched"]["tid"] == pid  # after chrt's exec
        assert t["count"] > 0 and t["sched"]["timer_latency"]["count"] > 0
        assert t["policy"]["name"] == ("fifo" if policy else "other")
        audit = json.loads((cases_dir / f"00{i}.app-audit.json").read_text())
        assert audit["status"] == "done" and audit["pids"] == [pid], audit
        assert {f["id"] for f in audit["findings"]} >= {"app.priority", "app.memlock"}
        prio = next(f for f in audit["findings"] if f["id"] == "app.priority")
        assert (prio["status"] == "WARN") == (not policy)  # fifo:70 is above the IRQ threads
    doc = json.loads((cases_dir / "002.json").read_text())
    assert doc["sched"]["process"] == attached.pid
    audit = json.loads((cases_dir / "002.app-audit.json").read_text())
    assert audit["status"] == "done" and audit["pids"] == [attached.pid]
    rows = shown["meters"]["sched"]
    assert len(rows) == 3 and all(r["thread"] == "periodic" for r in rows)
    assert [a["index"] for a in shown["app_audit"]] == [0, 1, 2]


def test_sched_view_rows_name_threads_and_say_how_the_program_ended():
    def thread(tid, comm, timer=0, wakeup=0):
        lat = {"count": timer, "max_ns": 5000 if timer else None}
        wake = {"count": wakeup, "max_ns": 7000 if wakeup else None}
        return {"sched": {"tid": tid, "comm": comm, "timer_latency": lat, "wakeup_latency": wake}}

    doc = {
        "meter": "sched",
        "params": {"command": ["./loop", "-c", "x"]},
        "sched": {"command": {"stopped_by_probe": False, "exit_status": 3, "signal": None}},
        "threads": [
            thread(10, "loop", timer=5),
            thread(11, "worker", wakeup=2),
            thread(12, "worker", wakeup=1),
            {"sched": {"tid": 0, "note": "no thread of the program took this slot"}},
        ],
    }
    view, rows = meter_rows(doc)
    assert view.key == "thread"
    assert [(r["thread"], r["tid"]) for r in rows] == [
        ("loop", 10),
        ("worker", 11),
        ("worker#2", 12),
    ]
    assert rows[0]["timer"] == 5 and rows[0]["wakeup"] == 0 and rows[0]["timer_max_ns"] == 5000
    assert rows[1]["wakeup_max_ns"] == 7000
    assert rows[0]["program"] == "./loop -c x (ended with exit status 3)"
    doc["params"] = {"process": "loop"}
    doc["sched"] = {"command": None}
    assert meter_rows(doc)[1][0]["program"] == "loop"
