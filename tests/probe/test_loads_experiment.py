"""The experiment key `load`: one spec per case, "none" for no load, checked by the probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtlab.errors import UserError
from rtlab.experiment import expand, load_experiment, parse, validate_with_probe
from rtlab.probe import Catalog, load_catalog, probe_catalog
from rtlab.system import SysRoot
from rtlab.targets import LocalTarget

from .._skips import skip_setup
from ..conftest import make_root

#: `rtlab-probe list --json`, for the tests that need no probe.
CATALOG = load_catalog(Path(__file__).parents[1] / "fixtures" / "probe-list.json")
TWO_CPUS = {"sys/devices/system/cpu/online": "0-1\n", "proc/cmdline": "quiet\n"}

SWEEP = """
[defaults]
interval = "1ms"
loops = 100
policy = "fifo:99"

[[series]]
name = "s"
cpus = "last"
isolate_loads = {isolate}
sweep = {{ load = ["none", "", "spin:50%", "stress-ng:cpu,nice=5", "ipc:1@0"] }}
"""


def root(tmp_path: Path) -> SysRoot:
    return SysRoot(make_root(tmp_path, TWO_CPUS))


@pytest.fixture
def catalog(probe) -> Catalog:
    """What the probe under test accepts (skips with a probe too old to say)."""
    try:
        return probe_catalog(probe)
    except UserError as e:
        skip_setup(str(e))


def load_args(case) -> list[str]:
    return case.call.loads


def test_sweep_over_loads_labels_each_case(tmp_path):
    exp = expand(parse(SWEEP.format(isolate="false"), "t.toml", CATALOG), root=root(tmp_path))
    assert [c.name for c in exp.cases] == [
        "load=none",
        "load=",
        "load=spin:50%",
        "load=stress-ng:cpu,nice=5",
        "load=ipc:1@0",
    ]
    assert [load_args(c) for c in exp.cases] == [
        [],
        [],
        ["spin:50%"],
        ["stress-ng:cpu,nice=5"],
        ["ipc:1@0"],
    ]
    # loads settle before measuring; no load, no settling
    assert exp.cases[0].expected_s < exp.cases[2].expected_s


def test_isolated_loads_go_before_the_scheduling_options(tmp_path):
    exp = expand(parse(SWEEP.format(isolate="true"), "t.toml", CATALOG), root=root(tmp_path))
    assert [load_args(c) for c in exp.cases][2:] == [
        ["spin:50%@0"],
        ["stress-ng:cpu@0,nice=5"],
        ["ipc:1@0"],  # names its own CPUs: kept
    ]


def test_load_must_be_a_string(tmp_path):
    bad = SWEEP.format(isolate="false").replace('"spin:50%"', "50")
    with pytest.raises(UserError, match="'load' must be str"):
        parse(bad, "t.toml", CATALOG)


def test_probe_refusal_names_the_load_key(tmp_path, catalog):
    text = SWEEP.format(isolate="false").replace('"spin:50%"', '"spin:120%"')
    exp = expand(parse(text, "t.toml", catalog), root=root(tmp_path))
    with pytest.raises(UserError) as e:
        validate_with_probe(exp, LocalTarget(catalog.probe).checker([]))
    msg = str(e.value)
    assert msg.startswith("t.toml: series 's' (load=spin:120%) key 'load':")
    assert '"spin:120%"' in msg


@pytest.mark.parametrize(
    ("keys", "key"),
    [
        ("forkcopy = 2\nforkcopy_size = '1Q'\n", "forkcopy"),
        ("loads = ['spin:5%', 'timer:0']\n", "loads"),
        ("probe_args = ['--load', 'nosuch:1']\n", "probe_args"),
        ("dma_latency = '1500ns'\n", "dma_latency"),
        ("interval = '1ns'\n", "interval"),
        ("deadline = '2h'\n", "deadline"),
        ("probe_args = ['--threshold', '2h']\n", "probe_args"),
        ("cpus = '0-9999'\n", "cpus"),
    ],
)
def test_probe_refusal_names_each_key(tmp_path, catalog, keys, key):
    text = f"[[series]]\nname = 's'\nloops = 10\n{keys}"
    exp = expand(parse(text, "t.toml", catalog), root=root(tmp_path))
    with pytest.raises(UserError) as e:
        validate_with_probe(exp, LocalTarget(catalog.probe).checker([]))
    assert str(e.value).startswith(f"t.toml: series 's' (s) key '{key}': ")


@pytest.mark.parametrize("preset", ["stress", "kernel-vs-user"])
def test_load_presets_are_checked_by_the_probe(tmp_path, catalog, preset):
    exp = load_experiment(preset, root=root(tmp_path), catalog=catalog)
    loads = {spec for c in exp.cases for spec in load_args(c)}
    assert "stress-ng:cpu" in loads
    assert all(c.params["policy"] == "fifo:99" for c in exp.cases)
    assert load_args(exp.cases[0]) == []  # the first row is the no-load baseline
    validate_with_probe(exp, LocalTarget(catalog.probe).checker([]))


def test_stress_preset_has_the_classic_rows(tmp_path):
    exp = load_experiment("stress", root=root(tmp_path), catalog=CATALOG)
    assert [c.swept["load"] for c in exp.cases] == [
        "none",
        "stress-ng:cpu",
        "stress-ng:vm",
        "stress-ng:io",
        "stress-ng:hdd",
        "stress-ng:full",
    ]


def test_kernel_vs_user_preset(tmp_path):
    exp = load_experiment("kernel-vs-user", root=root(tmp_path), catalog=CATALOG)
    kinds = [c.swept["load"].split(":")[0] for c in exp.cases]
    assert kinds == ["none", "stress-ng", "hackbench", "iperf3"]


TINY = """
[experiment]
name = "loads"
[defaults]
policy = "other"
interval = "1ms"
loops = 100
settle = "100ms"
[[series]]
name = "loads"
sweep = { load = ["none", "spin:30%", "timer:4"] }
"""


def test_run_and_show_record_the_activity_of_each_case(tmp_path, probe, catalog):
    import json
    import os
    import subprocess
    import sys

    rtlab = [sys.executable, "-m", "rtlab.cli"]
    env = {**os.environ, "RTLAB_PROBE": str(probe)}
    toml = tmp_path / "loads.toml"
    toml.write_text(TINY)
    out = tmp_path / "results"
    cp = subprocess.run(
        [*rtlab, "run", str(toml), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert cp.returncode == 0, cp.stderr
    (exp_dir,) = [p for p in out.iterdir() if p.is_dir()]
    docs = [json.loads(p.read_text()) for p in sorted((exp_dir / "cases").glob("*.json"))]
    assert [[ld["spec"] for ld in d["params"]["loads"]] for d in docs] == [
        [],
        ["spin:30%"],
        ["timer:4"],
    ]
    assert all(d["activity"]["interval_ns"] > 0 for d in docs)
    cp = subprocess.run(
        [*rtlab, "show", exp_dir.name, "--results", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "COLUMNS": "200"},
    )
    assert cp.returncode == 0, cp.stderr
    assert "system activity while measuring" in cp.stdout
    for label in ("load=none", "load=spin:30%", "load=timer:4"):
        assert any(line.strip().startswith(f"loads: {label} ") for line in cp.stdout.splitlines())
