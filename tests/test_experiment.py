from __future__ import annotations

from pathlib import Path

import pytest

from rtlab.errors import UserError
from rtlab.experiment import expand, load_experiment, parse, preset_names, validate_with_probe
from rtlab.system import SysRoot

from .conftest import make_root

TWO_CPUS = {"sys/devices/system/cpu/online": "0-1\n", "proc/cmdline": "quiet\n"}


def plain_root(tmp_path: Path, extra: dict[str, str] | None = None) -> SysRoot:
    return SysRoot(make_root(tmp_path, {**TWO_CPUS, **(extra or {})}))


def test_presets_ship():
    assert {"standard", "policies", "quick"} <= set(preset_names())


def test_standard_is_three_series_of_nine_cases(tmp_path):
    exp = load_experiment("standard", root=plain_root(tmp_path))
    assert [s["name"] for s in exp.series] == [
        "no preemption",
        "preemption",
        "preemption + isolation",
    ]
    assert len(exp.cases) == 27
    assert {c.params["loops"] for c in exp.cases} == {60000}
    assert [c.swept["forkcopy"] for c in exp.cases[:9]] == list(range(9))
    first, fifo = exp.cases[1], exp.cases[10]
    assert first.args[:3] == ["wakeup", "--policy", "other"]
    assert "--load" in first.args and "forkcopy:1:1M" in first.args
    assert fifo.params["policy"] == "fifo:99"
    assert 25 * 60 < sum(c.expected_s for c in exp.cases) < 30 * 60


def test_quick_finishes_under_three_minutes(tmp_path):
    exp = load_experiment("quick", root=plain_root(tmp_path))
    assert len(exp.cases) == 27
    assert sum(c.expected_s for c in exp.cases) < 170


def test_policies_preset(tmp_path):
    exp = load_experiment("policies", root=plain_root(tmp_path))
    assert [c.params["policy"] for c in exp.cases] == [
        "other:0",
        "other:-20",
        "fifo:40",
        "fifo:60",
        "fifo:99",
    ]
    assert all(c.params["cpus_resolved"] == "0-1" for c in exp.cases)
    assert all(c.params["interval"] == "400us" for c in exp.cases)


def test_isolation_without_isolated_cpus_uses_last_cpu_and_keeps_loads_off(tmp_path):
    exp = load_experiment("standard", root=plain_root(tmp_path))
    iso = [c for c in exp.cases if c.series == "preemption + isolation"]
    assert all(c.params["cpus_resolved"] == "1" for c in iso)
    assert "forkcopy:3:1M@0" in iso[3].args
    assert any("last CPU" in n for n in exp.notes)


def test_isolation_with_isolcpus(tmp_path):
    root = plain_root(
        tmp_path,
        {
            "sys/devices/system/cpu/online": "0-3\n",
            "proc/cmdline": "ro isolcpus=nohz,domain,3 quiet\n",
        },
    )
    exp = load_experiment("standard", root=root)
    iso = [c for c in exp.cases if c.series == "preemption + isolation"]
    assert iso[0].params["cpus_resolved"] == "3"
    assert "forkcopy:3:1M" in iso[3].args  # the kernel keeps loads off an isolated CPU
    assert any("isolcpus" in n for n in exp.notes)


def test_scale(tmp_path):
    exp = load_experiment("standard", scale=0.5, root=plain_root(tmp_path))
    assert {c.params["loops"] for c in exp.cases} == {30000}
    with pytest.raises(UserError):
        load_experiment("standard", scale=0, root=plain_root(tmp_path))


GOOD = """
[experiment]
name = "t"
deadline = "100us"
[defaults]
interval = "500us"
duration = "2s"
[[series]]
name = "a"
policy = "fifo:10"
sweep = { forkcopy = [0, 2], interval = ["1ms", "2ms"] }
"""


def test_product_of_sweeps_and_duration_scaling(tmp_path):
    exp = expand(parse(GOOD, "t.toml"), scale=0.5, root=plain_root(tmp_path))
    assert exp.deadline_ns == 100_000
    assert [c.name for c in exp.cases] == [
        "forkcopy=0, interval=1ms",
        "forkcopy=0, interval=2ms",
        "forkcopy=2, interval=1ms",
        "forkcopy=2, interval=2ms",
    ]
    assert exp.cases[0].params["duration"] == "1000000000ns"
    assert "--duration" in exp.cases[0].args


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[series]]\nname='a'\npolcy='other'\n", "unknown key 'polcy' (did you mean policy?)"),
        ("[defaults]\nloops='many'\n[[series]]\nname='a'\n", "'loops' must be int"),
        ("[defaults]\nloops=0\n[[series]]\nname='a'\n", "'loops' must be >= 1"),
        ("[defaults]\ninterval='5'\n[[series]]\nname='a'\n", "'interval'"),
        ("[[series]]\nname='a'\nsweep={forkcopy=3}\n", "must be a non-empty list"),
        ("[[series]]\nname='a'\nsweep={forkcopy=[]}\n", "must be a non-empty list"),
        ("[[series]]\nname='a'\n[[series]]\nname='a'\n", "used twice"),
        ("[[series]]\npolicy='other'\n", "'name'"),
        ("[experiment]\nname='x'\n", "at least one [[series]]"),
        ("[experiment]\nnme='x'\n[[series]]\nname='a'\n", "unknown key 'nme'"),
        ("[surprise]\n", "unknown key 'surprise'"),
        ("[[series]\nname='a'", "not valid TOML"),
        ("[[series]]\nname='a'\nraw=1\n", "'raw' must be bool"),
        ("[[series]]\nname='a'\nforkcopy=true\n", "'forkcopy' must be int"),
    ],
)
def test_bad_experiment_files(text, message):
    with pytest.raises(UserError) as e:
        parse(text, "bad.toml")
    assert "bad.toml" in str(e.value) and message in str(e.value)
    assert "\n" not in str(e.value)


def test_unknown_preset_names_the_presets():
    with pytest.raises(UserError, match="no such preset"):
        load_experiment("nonesuch")


def test_probe_refusal_names_series_and_key(tmp_path):
    exp = expand(parse(GOOD.replace("fifo:10", "fifo:200"), "t.toml"), root=plain_root(tmp_path))

    def check(args):
        return '--policy: "fifo:200": priority must be 1..99' if "fifo:200" in args else None

    with pytest.raises(UserError) as e:
        validate_with_probe(exp, check)
    assert str(e.value).startswith("t.toml: series 'a' (forkcopy=0, interval=1ms) key 'policy':")
