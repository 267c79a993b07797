"""A case that did not run in the conditions it asked for is marked CONDITIONS NOT MET by
`rtlab run`, `show` and `report` (exit 6, whatever the deadline); `compare` still works.

The real case: a run with --allow-fallback whose probe runs as an unprivileged user, so
SCHED_FIFO falls back. The same path through a stored document: a schema-5 document (no
`conditions`) whose thread fell back, imported with `rtlab import probe`."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .probe.conftest import probe_path

NOT_MET = "CONDITIONS NOT MET"


@pytest.fixture(scope="module")
def probe_doc(tmp_path_factory) -> dict:
    """A real wakeup document as the probe writes it (policy other: no privilege needed)."""
    d = tmp_path_factory.mktemp("doc")
    cmd = [str(probe_path()), "wakeup", "--loops", "100", "--interval", "200us", "--policy",
           "other", "--no-mlock", "--quiet", "--json", str(d / "w.json")]  # fmt: skip
    subprocess.run(cmd, check=True, timeout=60)
    return json.loads((d / "w.json").read_text())


def _fell_back(doc: dict) -> dict:
    """DOC as a schema-5 probe wrote it for `--policy fifo:80 --allow-fallback` refused."""
    old = copy.deepcopy(doc)
    old["schema"] = 5
    old.pop("conditions", None)
    old["params"].update(policy="fifo:80", allow_fallback=True)
    for t in old["threads"]:
        t.update(
            policy={"name": "other", "priority": 0, "nice": 0},
            policy_fallback=True,
            policy_fallback_reason="SCHED_FIFO needs CAP_SYS_NICE (Operation not permitted)",
        )
    return old


def _stored(rtlab, tmp_path: Path, name: str, doc: dict) -> str:
    f = tmp_path / f"{name}.json"
    f.write_text(json.dumps(doc))
    rc, out, err = rtlab("import", "probe", str(f), "--results", str(tmp_path / "r"), "--json")
    assert rc == 0, err
    return json.loads(out)["id"]


def test_a_stored_fallback_is_conditions_not_met_in_show_and_report(rtlab, tmp_path, probe_doc):
    exp = _stored(rtlab, tmp_path, "fell", _fell_back(probe_doc))
    results = ["--results", str(tmp_path / "r")]
    for deadline in ([], ["--deadline", "1h"], ["--deadline", "1ns"]):  # none, PASS, FAIL
        rc, out, _ = rtlab("show", exp, *results, *deadline)
        assert rc == 6, out
        verdict = next(x for x in out.splitlines() if x.startswith(NOT_MET))
        assert "T0 ran other:0, not fifo:80 (fell back: SCHED_FIFO needs CAP_SYS_NICE" in verdict
        assert "PASS" not in out and "FAIL" not in out
    rc, out, _ = rtlab("show", exp, *results, "--json")
    data = json.loads(out)
    assert rc == 6 and data["verdict"] == NOT_MET
    (item,) = data["conditions_not_met"]
    assert item["reason"].startswith("T0 ran other:0, not fifo:80") and item["series"]
    assert data["condition_warnings"] == []
    (case,) = data["conditions"]
    assert case["recorded"] is False and case["met"] is False
    html = tmp_path / "rep.html"
    rc, out, _ = rtlab("report", exp, *results, "-o", str(html), "--deadline", "1h")
    assert rc == 6 and NOT_MET in out
    text = html.read_text()
    assert NOT_MET in text and "Conditions while measuring" in text
    assert "conditions not met" in (tmp_path / "rep.verdict.csv").read_text()
    rows = (tmp_path / "rep.conditions.csv").read_text().splitlines()
    assert len(rows) == 2 and "T0 ran other:0, not fifo:80" in rows[1]
    rc, out, _ = rtlab("report", exp, *results, "-o", str(html), "--json")
    data = json.loads(out)
    assert rc == 6 and data["verdict"] == NOT_MET
    assert data["conditions_not_met"][0]["experiment"] == exp


def test_conditions_met_keep_the_verdict_and_compare_works(rtlab, tmp_path, probe_doc):
    ok = _stored(rtlab, tmp_path, "ok", probe_doc)
    fell = _stored(rtlab, tmp_path, "fell", _fell_back(probe_doc))
    results = ["--results", str(tmp_path / "r")]
    rc, out, _ = rtlab("show", ok, *results, "--deadline", "1h")
    assert rc == 0 and "PASS" in out and NOT_MET not in out
    rc, out, _ = rtlab("show", ok, *results, "--json")
    data = json.loads(out)
    assert rc == 0 and data["verdict"] is None and data["conditions_not_met"] == []
    rc, out, err = rtlab("compare", ok, fell, *results)
    assert rc == 0, err
    rc, out, _ = rtlab("report", ok, fell, *results, "-o", str(tmp_path / "both.html"))
    assert rc == 6 and NOT_MET in out


FALLBACK_TOML = """
[experiment]
name = "fallback"
[defaults]
meter = "wakeup"
policy = "fifo:80"
allow_fallback = true
interval = "1ms"
loops = 100
[[series]]
name = "rt"
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the probe as another user")
def test_a_run_whose_policy_fell_back_exits_6_in_run_show_and_report(tmp_path):
    """The probe runs as nobody (RTLAB_PROBE names a wrapper that drops to uid 65534 and
    every capability), so fifo:80 is refused and --allow-fallback runs it as other."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    shared = Path(tempfile.mkdtemp(prefix="rtlab-test-"))  # nobody writes its document here
    try:
        os.chmod(shared, 0o777)
        wrapper = shared / "probe-as-nobody"
        wrapper.write_text(
            "#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups "
            f'--inh-caps=-all {probe_path()} "$@"\n'
        )
        wrapper.chmod(0o755)
        (shared / "fb.toml").write_text(FALLBACK_TOML)
        env = {**os.environ, "RTLAB_PROBE": str(wrapper)}
        results = str(shared / "r")

        def rtlab(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "rtlab.cli", *args, "--results", results],
                capture_output=True,
                text=True,
                timeout=300,
                env=env,
                preexec_fn=lambda: os.umask(0),  # directories nobody can write in
            )

        run = rtlab("run", str(shared / "fb.toml"), "--json", "--deadline", "1h")
        assert run.returncode == 6, run.stderr
        data = json.loads(run.stdout)
        assert data["verdict"] == NOT_MET and data["complete"]
        reasons = [x["reason"] for x in data["conditions_not_met"]]
        assert any(r.startswith("T0 ran other:0, not fifo:80 (fell back") for r in reasons)
        (doc,) = (shared / "r" / data["id"] / "cases").glob("*.json")
        assert json.loads(doc.read_text())["threads"][0]["policy_fallback"] is True
        show = rtlab("show", data["id"])
        assert show.returncode == 6 and NOT_MET in show.stdout
        report = rtlab("report", data["id"])
        assert report.returncode == 6 and NOT_MET in report.stdout
        assert NOT_MET in (shared / "r" / data["id"] / "report.html").read_text()
        plain = rtlab("run", str(shared / "fb.toml"))  # the same verdict line at its end
        assert plain.returncode == 6 and f"{NOT_MET}: rt / rt: T0 ran other:0" in plain.stderr
    finally:
        shutil.rmtree(shared)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to write to /dev/kmsg and SCHED_FIFO")
def test_a_real_run_records_its_conditions_and_a_symptom_logged_meanwhile(rtlab, tmp_path):
    """A pinned fifo run as root meets its conditions; a kernel-log symptom written by this
    test (user space) while it measures is a warning, labelled so, and the exit stays 0."""
    doc_path, progress = tmp_path / "w.json", tmp_path / "progress"
    os.mkfifo(progress)
    cmd = [str(probe_path()), "wakeup", "--cpus", "0", "--policy", "fifo:80", "--duration",
           "3s", "--quiet", "--progress", str(progress), "--json", str(doc_path)]  # fmt: skip
    with subprocess.Popen(cmd) as proc:
        with open(progress) as stream:  # the probe opens it before measuring
            first = next((x for x in stream if '"phase":"measure"' in x), "")  # measuring now
            if first:
                with open("/dev/kmsg", "w") as kmsg:
                    kmsg.write("rtlab test: sched: RT throttling activated\n")
            stream.read()
        assert proc.wait(timeout=60) == 0 and first
    doc = json.loads(doc_path.read_text())
    if doc.get("conditions") is None:
        pytest.skip("this rtlab-probe does not record its conditions yet")
    rc, out, err = rtlab(
        "import", "probe", str(doc_path), "--results", str(tmp_path / "r"), "--json"
    )
    assert rc == 0, err
    exp = json.loads(out)["id"]
    rc, out, _ = rtlab("show", exp, "--results", str(tmp_path / "r"), "--json")
    data = json.loads(out)
    assert rc == 0 and data["conditions_not_met"] == []
    (case,) = data["conditions"]
    assert case["recorded"] and case["met"]
    assert case["applied"]["threads"][0]["policy"] == "fifo:80"
    assert [c["cpu"] for c in case["cpus"]] == [0]
    (logged,) = [m for m in case["messages"] if m["symptom"] is not None]
    assert logged["user_space"] and logged["symptom"] == "RT throttling"
    assert any(
        w["reason"].startswith("kernel log: RT throttling:")
        and w["reason"].endswith("(logged by user space)")
        for w in data["condition_warnings"]
    )
    rc, out, _ = rtlab("show", exp, "--results", str(tmp_path / "r"))
    assert rc == 0 and "logged by user space" in out
