"""`rtlab run --tuned`: the plan is applied for the run and reset after it, also when the
run fails; the record names the tuning, and compare names the setups by it."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from rtlab.errors import UserError
from rtlab.probecall import Option, ProbeCall
from rtlab.system._setup import setup_description, setup_names
from rtlab.tune import STATE_ENV, Journal
from rtlab.tune._during import measured_cpus, tuned

SYSTEMS = Path(__file__).parent / "fixtures" / "systems"
TIMER = "proc/sys/kernel/timer_migration"


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    r = tmp_path / "root"
    shutil.copytree(SYSTEMS / "desktop", r)
    return r


def call(meter: str, cpus: str | None) -> ProbeCall:
    pinned = (Option("cpus", cpus, "cpus"),) if cpus else ()
    return ProbeCall(meter, (Option("loops", "10", "loops"), *pinned))


def exp(cpus: str | None = "3") -> SimpleNamespace:
    return SimpleNamespace(cases=[SimpleNamespace(call=call("wakeup", cpus))], deadline_ns=None)


def said(text: str) -> None:
    pass


def test_measured_cpus_are_the_cases_pinned_cpus():
    e = SimpleNamespace(
        cases=[
            SimpleNamespace(call=call("wakeup", "2-3")),
            SimpleNamespace(call=call("noise", None)),
            SimpleNamespace(call=None),  # an imported case
        ]
    )
    assert measured_cpus(e.cases) == [2, 3]
    assert measured_cpus(exp(None).cases) is None


def test_applied_during_the_run_and_reset_after(root):
    before = snapshot(root)
    with tuned(exp(), said, root) as record:
        assert snapshot(root) != before  # in effect while the cases run
        assert (root / TIMER).read_text().strip() == "0"
        assert record["summary"].startswith("tuned: ")
        assert record["plan"]["rt_cpus"] == "3"
    assert snapshot(root) == before
    assert record["reset"] and all(o["state"] == "restored" for o in record["reset"])
    assert Journal.load(Journal.path_for("tune")) is None  # nothing left to undo


def test_reset_also_when_the_run_fails(root):
    before = snapshot(root)
    with pytest.raises(KeyboardInterrupt), tuned(exp(), said, root):
        raise KeyboardInterrupt
    assert snapshot(root) == before


def test_an_active_tuning_is_not_taken_over(root):
    Journal.open_or_create("tune", "/")  # a tuning the user applied by hand
    with pytest.raises(UserError, match="already active"), tuned(exp(), said, root):
        pass


def test_setups_are_named_by_their_tuning():
    base = {"preempt_model": "full", "hz": 250}
    tuned_facts = dict(base, tuning="tuned: governor, IRQs")
    assert setup_names([base, tuned_facts], ["a", "b"]) == ["untuned", "tuned: governor, IRQs"]
    assert "untuned" not in setup_description(base)


def test_tuned_with_resume_is_bad_usage(rtlab):
    rc, _, err = rtlab("run", "--resume", "x", "--tuned")
    assert rc == 2 and "--tuned" in err
