"""--tracer timerlat (wakeup) and --tracer osnoise (noise): the kernel's tracer measures,
driven through tracefs. Here no kernel has them, so these tests check the refusals and
the fallback, on a fake tracefs tree ($RTLAB_TRACEFS) and on the machine's own; the
control of a present tracer (settings written and put back, samples from its lines) is
tested in probe/tests/test_ktracer.c."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rtlab.errors import UnsupportedError
from rtlab.experiment import expand, parse, validate_with_probe
from rtlab.probe import check_call, probe_catalog
from rtlab.system import SysRoot

from .._skips import skip_setup
from ..conftest import make_root
from .conftest import one_line, refused

OLD_NS = 10**18  # an mtime no write leaves
QUICK = ["--loops", "20", "--interval", "1ms", "--policy", "other", "--no-mlock"]
# meter, its tracer, arguments that run briefly
CASES = [
    ("wakeup", "timerlat", ["--loops", "20", "--interval", "1ms"]),
    ("noise", "osnoise", ["--duration", "50ms"]),
]


def fake_tracefs(tmp_path: Path, tracers: str = "blk function nop") -> Path:
    """A tree standing in for tracefs, osnoise/ as a user left it."""
    root = tmp_path / "tracefs"
    (root / "instances").mkdir(parents=True)
    (root / "osnoise").mkdir()
    (root / "available_tracers").write_text(tracers + "\n")
    (root / "current_tracer").write_text("nop\n")
    for name, value in {
        "cpus": "0-3\n",
        "timerlat_period_us": "1000\n",
        "period_us": "500000\n",
        "runtime_us": "200000\n",
        "stop_tracing_us": "40\n",
        "stop_tracing_total_us": "0\n",
        "print_stack": "0\n",
        # the kernel's defaults: a file cannot play this one (test_ktracer.c does)
        "options": "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP NO_OSNOISE_PREEMPT_DISABLE "
        "NO_OSNOISE_IRQ_DISABLE\n",
    }.items():
        (root / "osnoise" / name).write_text(value)
    return root


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file and directory under ROOT with its bytes: what a run may not change."""
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
        for p in sorted(root.rglob("*"))
    }


def run(run_probe, tmp_path, meter: str, args: list[str], tracefs: Path | None):
    out = tmp_path / "doc.json"
    out.unlink(missing_ok=True)
    env = dict(os.environ)
    env.pop("RTLAB_TRACEFS", None)
    env["RTLAB_STATE"] = str(tmp_path / "state")  # the journal of the osnoise/ settings
    if tracefs is not None:
        env["RTLAB_TRACEFS"] = str(tracefs)
    cp = run_probe(
        meter, *args, "--policy", "other", "--no-mlock", "--quiet", "--json", str(out), env=env
    )
    return cp, json.loads(out.read_text()) if out.exists() else None


@pytest.mark.parametrize(("meter", "tracer", "args"), CASES)
def test_without_the_tracer_the_run_is_refused_in_one_line(
    run_probe, tmp_path, meter, tracer, args
):
    fake = fake_tracefs(tmp_path)
    before = tree(fake)
    cp, doc = run(run_probe, tmp_path, meter, ["--tracer", tracer, "--cpus", "0", *args], fake)
    assert cp.returncode == 3, cp.stderr
    line = one_line(cp)
    assert line.startswith(f"rtlab-probe {meter}: --tracer {tracer}: this kernel has no {tracer}")
    assert "available_tracers: blk function nop" in line and "--allow-fallback" in line
    assert doc is None
    assert tree(fake) == before  # nothing written, no instance made


@pytest.mark.parametrize(("meter", "tracer", "args"), CASES)
def test_with_fallback_the_user_loop_measures_and_says_why(
    run_probe, tmp_path, meter, tracer, args
):
    fake = fake_tracefs(tmp_path)
    before = tree(fake)
    cp, doc = run(
        run_probe,
        tmp_path,
        meter,
        ["--tracer", tracer, "--cpus", "0", "--allow-fallback", *args],
        fake,
    )
    assert cp.returncode == 0, cp.stderr
    assert doc["tracer"]["requested"] == tracer and doc["tracer"]["used"] == "user"
    assert f"no {tracer} tracer" in doc["tracer"]["reason"]
    assert doc["params"]["tracer"] == tracer
    (t,) = doc["threads"]
    assert t["cpu"] == 0 and tracer not in t  # the user-space loop's own keys
    if meter == "wakeup":
        assert t["count"] == 20
    else:
        assert t["reads"] > 0
    assert tree(fake) == before


def test_busy_is_refused_even_with_fallback(run_probe, tmp_path):
    fake = fake_tracefs(tmp_path, "timerlat osnoise nop")
    (fake / "instances" / "rtla").mkdir()
    (fake / "instances" / "rtla" / "current_tracer").write_text("osnoise\n")
    before = tree(fake)
    for extra in ([], ["--allow-fallback"]):
        cp, doc = run(
            run_probe,
            tmp_path,
            "wakeup",
            ["--tracer", "timerlat", "--cpus", "0", *QUICK[:4], *extra],
            fake,
        )
        assert cp.returncode == 3 and doc is None
        assert "instances/rtla runs the osnoise or timerlat tracer" in one_line(cp)
    assert tree(fake) == before


@pytest.mark.parametrize(("meter", "tracer", "args"), CASES)
def test_a_failed_setup_puts_every_setting_back(run_probe, tmp_path, meter, tracer, args):
    """The tracer is there, its settings get written; then the instance has none of the
    files a kernel gives a new one, setup fails (exit 3) and the exit path writes every
    osnoise/ file back as found and removes the instance."""
    fake = fake_tracefs(tmp_path, "timerlat osnoise nop")
    for f in (fake / "osnoise").iterdir():
        os.utime(f, ns=(OLD_NS, OLD_NS))
    before = tree(fake)
    if meter == "wakeup":
        args = [*args, "--interval", "500us"]  # 1ms is the period found: not written
    cp, doc = run(run_probe, tmp_path, meter, ["--tracer", tracer, "--cpus", "0", *args], fake)
    assert cp.returncode == 3 and doc is None
    assert "cannot configure the tracefs instance" in one_line(cp)
    assert tree(fake) == before
    written = {f.name for f in (fake / "osnoise").iterdir() if f.stat().st_mtime_ns != OLD_NS}
    mine = {"timerlat_period_us"} if tracer == "timerlat" else {"period_us", "runtime_us"}
    assert written == {"cpus", "stop_tracing_us", *mine}  # those that differed, and only those


def test_check_reports_an_absent_tracer_as_unsupported(run_probe, tmp_path):
    fake = fake_tracefs(tmp_path)
    env = {**os.environ, "RTLAB_TRACEFS": str(fake)}
    cp = run_probe("noise", "--tracer", "osnoise", "--cpus", "0", "--check", env=env)
    assert cp.returncode == 3
    fault = json.loads(cp.stdout)
    assert fault["option"] == "tracer" and fault["value"] == "osnoise"
    assert "no osnoise tracer" in fault["error"]


def test_user_is_the_default(run_probe, tmp_path):
    cp, doc = run(run_probe, tmp_path, "wakeup", QUICK[:4], None)
    assert cp.returncode == 0, cp.stderr
    assert doc["tracer"] == {"requested": "user", "used": "user", "reason": None}
    assert doc["params"]["tracer"] == "user"


@pytest.mark.parametrize(
    ("meter", "args", "option", "message"),
    [
        ("wakeup", ["--tracer", "timerlat"], "tracer", "--tracer timerlat needs --cpus"),
        (
            "wakeup",
            ["--tracer", "osnoise", "--cpus", "0"],
            "tracer",
            "--tracer: must be one of user, timerlat; not 'osnoise'",
        ),
        (
            "noise",
            ["--tracer", "timerlat", "--cpus", "0"],
            "tracer",
            "--tracer: must be one of user, osnoise; not 'timerlat'",
        ),
        (
            "wakeup",
            ["--tracer", "timerlat", "--cpus", "0", "--interval", "50us"],
            "interval",
            "timerlat's period is a whole number of us from 100us to 1s",
        ),
        (
            "wakeup",
            ["--tracer", "timerlat", "--cpus", "0", "--distance", "10us"],
            "distance",
            "one period for all CPUs",
        ),
        (
            "wakeup",
            ["--tracer", "timerlat", "--cpus", "0", "--policy", "deadline:1ms/2ms/2ms"],
            "policy",
            "not deadline",
        ),
        (
            "wakeup",
            ["--tracer", "timerlat", "--cpus", "0", "--explain", "50us"],
            "tracer",
            "exclude each other",
        ),
        (
            "noise",
            ["--tracer", "osnoise", "--cpus", "0", "--threshold", "2us"],
            "threshold",
            "tracing_thresh",
        ),
    ],
)
def test_bad_usage_is_refused_before_tracefs_is_read(
    meter_run, run_probe, meter, args, option, message
):
    line, fault = refused(meter_run, run_probe, meter, args, ["--loops", "5"])
    assert message in line and fault["option"] == option


@pytest.mark.parametrize(("meter", "tracer", "args"), CASES)
def test_the_machines_tracefs_without_the_tracer(run_probe, tracefs, tmp_path, meter, tracer, args):
    """The real tracefs is only read: no instance is left, nothing else changes."""
    available = (tracefs / "available_tracers").read_text().split()
    if tracer in available:
        pytest.skip(f"this kernel has {tracer}: the refusal cannot be seen")
    instances = sorted(p.name for p in (tracefs / "instances").iterdir())
    cp, doc = run(run_probe, tmp_path, meter, ["--tracer", tracer, "--cpus", "0", *args], None)
    assert cp.returncode == 3 and doc is None
    assert f"this kernel has no {tracer} tracer" in one_line(cp)
    cp, doc = run(
        run_probe,
        tmp_path,
        meter,
        ["--tracer", tracer, "--cpus", "0", "--allow-fallback", *args],
        None,
    )
    assert cp.returncode == 0, cp.stderr
    assert doc["tracer"]["used"] == "user"
    assert sorted(p.name for p in (tracefs / "instances").iterdir()) == instances


EXPERIMENT = """
[[series]]
name = "kernel"
cpus = 0
loops = 100
tracer = "timerlat"
"""


def test_rtlab_run_takes_tracer_from_the_catalog(probe, tmp_path, monkeypatch):
    """`tracer` is an experiment key because the probe lists --tracer; the probe's --check
    accepts it where the tracer is (a fake tree) and says why not where it is absent."""
    try:
        catalog = probe_catalog(probe)
    except Exception as e:  # a probe too old to list its options
        skip_setup(str(e))
    root = SysRoot(
        make_root(tmp_path, {"sys/devices/system/cpu/online": "0-1\n", "proc/cmdline": "quiet\n"})
    )
    exp = expand(parse(EXPERIMENT, "t.toml", catalog), root=root)
    (case,) = exp.cases
    assert case.call.value("tracer") == "timerlat"
    monkeypatch.setenv("RTLAB_TRACEFS", str(fake_tracefs(tmp_path, "timerlat osnoise nop")))
    validate_with_probe(exp, lambda call: check_call(call, probe))
    monkeypatch.setenv("RTLAB_TRACEFS", str(fake_tracefs(tmp_path / "absent")))
    with pytest.raises(UnsupportedError) as e:
        validate_with_probe(exp, lambda call: check_call(call, probe))
    assert "key 'tracer': --tracer timerlat: this kernel has no timerlat tracer" in str(e.value)
