"""`rtlab lava testdef`: the YAML is a LAVA test definition, every experiment value reaches
the probe as one literal argument, and the script reports lava-test-case measurements."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rtlab.experiment import Experiment
from rtlab.lava import FORMAT, case_id, emit, make_testdef, quote
from rtlab.probecall import Option, ProbeCall, probe_argv
from rtlab.records import CaseRecord

from .probe.conftest import probe_path

HOSTILE = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "a'b\"c",
    "; touch PWNED #",
    "line\nbreak: - [x]",
    "tab\tand \x1b[31m escape \x7f \x85 \u2028 \ufeff end",
    "--shell $1 $2 $$ ${HOME} \\",
    "- item\n---\n...",
    "' || touch PWNED; echo '",
    "ü € 😀",
    "",
]

SMALL = """
[experiment]
name = "lava me"
deadline = "1s"
[defaults]
policy = "other"
settle = "0s"
[[series]]
name = "wake"
interval = "200us"
loops = 50
sweep = { threads = [1, 2] }
[[series]]
name = "noise"
meter = "noise"
duration = "50ms"
cpus = "0"
"""


def _experiment(calls: list[ProbeCall], name: str = "x", description: str = "") -> Experiment:
    cases = [CaseRecord(i, f"s{i}", f"c{i}", {}, call=c) for i, c in enumerate(calls)]
    return Experiment(name, description, 10**6, "test", "", [], {}, cases=cases)


def _fake_bin(d: Path, record: Path) -> Path:
    """A lava-test-case that records its arguments, and a probe that records its own and
    writes a progress file as the real one ends it."""
    d.mkdir(exist_ok=True)
    (d / "lava-test-case").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {record}\n')
    (d / "fake-probe").write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "a = sys.argv[1:]\n"
        "if a == ['--version']: sys.exit(0)\n"
        "p = a[a.index('--progress') + 1]\n"
        f"open({str(record)!r} + '.argv', 'a').write(json.dumps(a) + '\\n')\n"
        "line = {'phase': 'done', 'threads': [{'cpu': 0, 'count': 5, 'max_ns': 2000000,\n"
        "        'p99_ns': 1500}, {'cpu': None, 'count': 5, 'max_ns': 3000, 'p99_ns': 900}]}\n"
        "open(p, 'w').write('{\"phase\":\"start\"}\\n' + json.dumps(line) + '\\n')\n"
    )
    for f in d.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    return d / "fake-probe"


def _run_steps(text: str, cwd: Path, bindir: Path) -> subprocess.CompletedProcess:
    """The steps as LAVA runs them: one sh script with set -e and set -x, `$N` escaped in
    a step that contains --cmd or --shell (lava_dispatcher's TestRunnerAction)."""
    steps = yaml.safe_load(text)["run"]["steps"]
    steps = [
        re.sub(r"\$(\d+)\b", r"\\$\1", s) if "--cmd" in s or "--shell" in s else s for s in steps
    ]
    script = "set -e\nset -x\n" + "".join(f"{s}\n" for s in steps)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    return subprocess.run(
        ["sh", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_hostile_values_reach_the_probe_as_literal_arguments(tmp_path):
    record = tmp_path / "cases.log"
    probe = _fake_bin(tmp_path / "bin", record)
    calls = [ProbeCall("wakeup", (Option("load", v), Option("policy", v))) for v in HOSTILE]
    exp = _experiment(calls, name="n$(touch PWNED)\n: x", description="d'\"\x00\n- y")
    text = make_testdef(exp, str(probe), 10**6, str(tmp_path / "dut"))
    doc = yaml.safe_load(text)
    assert doc["metadata"]["format"] == FORMAT
    assert doc["metadata"]["name"] == "rtlab-n-touch-PWNED-x"
    assert doc["metadata"]["description"].startswith("rtlab experiment n$(touch PWNED)\n: x")
    cp = _run_steps(text, tmp_path, tmp_path / "bin")
    assert cp.returncode == 0, cp.stderr
    assert not list(tmp_path.rglob("PWNED"))
    argv = [json.loads(x) for x in (tmp_path / "cases.log.argv").read_text().splitlines()]
    assert [a[: a.index("--json")] for a in argv] == [probe_argv(c) for c in calls]
    reports = record.read_text().splitlines()
    assert len(reports) == 2 * len(HOSTILE)
    # the worst thread: max 2 ms > the 1 ms deadline, p99 1.5 µs within it
    first = case_id(exp.cases[0])
    assert reports[0] == f"{first}-max --result fail --measurement 2000.000 --units us"
    assert reports[1] == f"{first}-p99 --result pass --measurement 1.500 --units us"


def test_a_case_without_result_fails_and_the_others_run(tmp_path):
    record = tmp_path / "cases.log"
    _fake_bin(tmp_path / "bin", record)
    exp = _experiment([ProbeCall("wakeup"), ProbeCall("noise")])
    text = make_testdef(exp, "/bin/false", None, str(tmp_path / "dut"))
    text = text.replace('"\\"$RTLAB_PROBE\\" --version"', '"true"')  # /bin/false has none
    cp = _run_steps(text, tmp_path, tmp_path / "bin")
    assert cp.returncode == 0, cp.stderr
    assert record.read_text().splitlines() == [f"{case_id(c)} --result fail" for c in exp.cases]
    assert "rtlab-probe exited 1 without a result" in cp.stdout


def test_lava_trace_shows_each_case_call_not_the_helpers(tmp_path):
    """LAVA runs the steps under `set -x`: the trace shows each `rtlab_case` call (its
    probe arguments), not every line of the helpers with the probe's progress line
    (found in a real lava-run: ~50 trace lines per case), and the trace is back on
    after each case."""
    record = tmp_path / "cases.log"
    probe = _fake_bin(tmp_path / "bin", record)
    exp = _experiment([ProbeCall("wakeup", (Option("loops", "5"),)), ProbeCall("noise")])
    text = make_testdef(exp, str(probe), None, str(tmp_path / "dut"))
    cp = _run_steps(text + '    - "echo after"\n', tmp_path, tmp_path / "bin")
    assert cp.returncode == 0, cp.stderr
    trace = [ln for ln in cp.stderr.splitlines() if ln.startswith("+")]
    calls = [ln for ln in trace if ln.startswith("+ rtlab_case ")]
    assert [c.split()[2] for c in calls] == [case_id(c) for c in exp.cases]
    assert "--loops 5" in calls[0]
    assert not [ln for ln in trace if "phase" in ln or "rtlab_key" in ln or "lava-test-case" in ln]
    assert trace[-1] == "+ echo after"
    assert len(record.read_text().splitlines()) == 4


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.text(), lambda kids: st.lists(kids, max_size=3), max_leaves=8))
def test_emitter_round_trips_through_yaml(value):
    data = {"key": value, "list": [value, "x"], "nested": {"a": value}}
    assert yaml.safe_load(emit(data)) == _no_surrogates(data)


def _no_surrogates(v):
    if isinstance(v, str):
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in v)
    if isinstance(v, list):
        return [_no_surrogates(x) for x in v]
    return {k: _no_surrogates(x) for k, x in v.items()}


def test_quote_escapes_what_yaml_cannot_hold():
    assert quote('a"b\\c\n\t') == '"a\\"b\\\\c\\n\\t"'
    assert quote("\x00\x85\u2028\ufeff") == '"\\x00\\x85\\u2028\\ufeff"'
    assert yaml.safe_load(quote("\x00\x85\u2028\ufeff")) == "\x00\x85\u2028\ufeff"


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh")
def test_cli_testdef_runs_the_real_probe(rtlab, tmp_path):
    (tmp_path / "exp.toml").write_text(SMALL)
    out = tmp_path / "rtlab.yaml"
    probe = probe_path()
    rc, _, err = rtlab(
        "lava", "testdef", str(tmp_path / "exp.toml"), "--probe", str(probe), "-o", str(out),
        "--dut-dir", str(tmp_path / "dut"),
    )  # fmt: skip
    assert rc == 0, err
    doc = yaml.safe_load(out.read_text())
    assert set(doc) == {"metadata", "run"} and set(doc["run"]) == {"steps"}
    assert doc["metadata"]["name"] == "rtlab-lava-me"
    steps = doc["run"]["steps"]
    assert all(isinstance(s, str) for s in steps)
    case_steps = [s for s in steps if s.startswith("rtlab_case ")]
    assert len(case_steps) == 3 and case_steps[0].startswith("rtlab_case 000-wake-threads-1 ")
    record = tmp_path / "cases.log"
    _fake_bin(tmp_path / "bin", record)
    cp = _run_steps(out.read_text(), tmp_path, tmp_path / "bin")
    assert cp.returncode == 0, cp.stderr
    reports = [r.split() for r in record.read_text().splitlines()]
    assert [r[0] for r in reports] == [
        "000-wake-threads-1-max", "000-wake-threads-1-p99",
        "001-wake-threads-2-max", "001-wake-threads-2-p99",
        "002-noise-noise-max", "002-noise-noise-p99",
    ]  # fmt: skip
    for r in reports:
        assert r[1:3] == ["--result", "pass"] or r[1:3] == ["--result", "fail"]
        assert r[3] == "--measurement" and float(r[4]) >= 0 and r[5:] == ["--units", "us"]
    assert len(list((tmp_path / "dut").glob("*.json"))) == 3


def test_cli_testdef_refusals(rtlab, tmp_path):
    (tmp_path / "exp.toml").write_text(SMALL.replace('interval = "200us"', 'interval = "0"'))
    rc, _, err = rtlab("lava", "testdef", str(tmp_path / "exp.toml"))
    assert rc == 2 and "interval" in err and err.count("\n") == 1
    rc, _, err = rtlab("lava", "testdef", "quick", "--sysinfo", str(tmp_path))
    assert rc == 2 and "not a regular file" in err
