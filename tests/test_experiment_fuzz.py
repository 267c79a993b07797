"""Hostile experiment files: parse + expand either succeed or raise a one-line UserError,
nothing else escapes. Property tests need no probe (the catalog is the captured
`rtlab-probe list --json`); the CLI tests at the end go through the real probe."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rtlab
from rtlab.errors import UserError
from rtlab.experiment import case_keys, expand, load_experiment, parse
from rtlab.probe import load_catalog, probe_catalog
from rtlab.probecall import probe_argv
from rtlab.system import SysRoot

from ._skips import need_tool, skip_setup
from .conftest import make_root
from .probe.conftest import probe_path

CATALOG = load_catalog(Path(__file__).parent / "fixtures" / "probe-list.json")
KEYS = sorted(case_keys(CATALOG))
FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> SysRoot:
    tmp = tmp_path_factory.mktemp("root")
    return SysRoot(
        make_root(
            tmp,
            {
                "sys/devices/system/cpu/online": "0-3\n",
                "proc/cmdline": "ro isolcpus=3 quiet\n",
            },
        )
    )


# --- writing TOML from generated values ----------------------------------------------------


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return (
            "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
        )
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a TOML basic string, or a refused one
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"


def toml_table(d: dict) -> str:
    return "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in d.items())


# --- the pieces: valid ones and hostile ones -----------------------------------------------

GOOD_STRINGS = [
    "wakeup",
    "other",
    "fifo:99",
    "1ms",
    "250us",
    "0",
    "2s",
    "0-1",
    "all",
    "last",
    "isolated",
    "none",
    "",
    "spin:10%",
    "forkcopy:2",
    "stress-ng:cpu",
    "1M",
    "--interval",
    "--json",
    "-h",
    "--threshold=1ms",
    "10us",
]
HOSTILE_STRINGS = [
    "\x00",
    "a\nb",
    "--help",
    "99999999999999999999999h",
    "1e400s",
    "0-99999999999",
    "0-1_000_000",
    "٣ms",
    "0-٩٩٩٩٩٩٩٩٩",
    "\u202e",
    "µs",
    "1.5ns",
    "-1ms",
]
strings = st.sampled_from(GOOD_STRINGS + HOSTILE_STRINGS) | st.text(max_size=12)
ints = (
    st.sampled_from([0, 1, 2, -1, 4000, 2**62, 2**63 - 1, -(2**63), 10**30, 2**64]) | st.integers()
)
floats = st.sampled_from([0.5, 1.0, math.inf, -math.inf, math.nan, 1e308])
scalars = st.booleans() | ints | floats | strings
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)
    ),
    max_leaves=8,
)
keys = st.sampled_from(KEYS * 4 + ["nme", "polcy", "threshold", "x\ny", ""])
# Mostly values a key of that kind takes, so that files get past the first check.
PLAUSIBLE = {
    "int": st.integers(0, 5000),
    "count": st.integers(0, 8),
    "duration": st.sampled_from(["1ms", "250us", "0", "2s", "10us", "1h", "3m"]),
    "cpulist": st.sampled_from(["0-1", "1", "0", "3", "0,2"]) | st.integers(0, 3),
    "cpus": st.sampled_from(["0-1", "all", "last", "isolated", "2"]) | st.integers(0, 3),
    "flag": st.booleans(),
    "bool": st.booleans(),
    "str": st.sampled_from(["other", "fifo:50", "rr:1", "1M", "64K"]),
    "meter": st.just("wakeup"),
    "load": st.sampled_from(["", "none", "spin:10%", "timer:2", "stress-ng:cpu,nice=5"]),
    "strings": st.lists(
        st.sampled_from(["spin:5%", "--distance", "10us", "--allow-fallback", "--json", "x"]),
        max_size=3,
    ),
}
KINDS = {name: decls[0].kind for name, decls in case_keys(CATALOG).items()}


def value_for(key: str) -> st.SearchStrategy:
    plausible = PLAUSIBLE.get(KINDS.get(key, ""), values)
    return st.one_of(*[plausible] * 6, values)


@st.composite
def case_table(draw, max_size: int = 4) -> dict:
    return {k: draw(value_for(k)) for k in draw(st.lists(keys, max_size=max_size, unique=True))}


@st.composite
def series(draw) -> dict:
    s: dict = {"name": draw(st.sampled_from(["a", "b", "c", "", "a\nb"]) | st.text(max_size=4))}
    s.update(draw(case_table()))
    if draw(st.booleans()):
        sweep = {}
        for k in draw(st.lists(keys, min_size=1, max_size=2, unique=True)):
            sweep[k] = draw(st.lists(value_for(k), min_size=1, max_size=3) | values)
        s["sweep"] = sweep
    return s


@st.composite
def documents(draw) -> str:
    # hostile top-level shapes, now and then: `experiment = 5`, `series = [1]`, `defaults = true`
    top = {}
    if draw(st.integers(0, 4)) == 0:
        top[draw(st.sampled_from(["experiment", "defaults", "series", "surprise"]))] = draw(values)
    parts = []
    if "experiment" not in top and draw(st.booleans()):
        head = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": st.sampled_from(["x", "", "a\nb"]) | strings | ints,
                    "description": st.sampled_from(["", "d"]) | values,
                    "deadline": st.sampled_from(["100us", "1h", "0us", "2h"]) | strings | ints,
                },
            )
        )
        parts.append("[experiment]\n" + toml_table(head))
    if "defaults" not in top and draw(st.booleans()):
        parts.append("[defaults]\n" + toml_table(draw(case_table(5))))
    for s in draw(st.lists(series(), min_size=0 if "series" in top else 1, max_size=3)):
        if "series" in top:
            break
        sweep = s.pop("sweep", None)
        text = "[[series]]\n" + toml_table(s)
        if isinstance(sweep, dict):
            text += "[series.sweep]\n" + toml_table(sweep)
        elif sweep is not None:
            text += f"sweep = {toml_value(sweep)}\n"
        parts.append(text)
    return toml_table(top) + "".join(draw(st.permutations(parts)))


def check_outcome(text: str, root: SysRoot, scale: float = 1.0) -> None:
    """parse + expand: cases with plain arguments, or one line of UserError."""
    try:
        exp = expand(parse(text, "f.toml", CATALOG), scale, root)
    except UserError as e:
        msg = str(e)
        assert msg.startswith("f.toml: ") and msg.isprintable(), repr(msg)
        return
    for case in exp.cases:
        assert all(isinstance(a, str) and "\0" not in a for a in probe_argv(case.call))
        assert 0 <= case.expected_s < math.inf
        json.dumps(case.params, allow_nan=False)  # the manifest stores them


@FUZZ
@given(text=documents(), scale=st.sampled_from([1.0, 0.01, 1e300, 3.0]))
def test_random_documents(root, text, scale):
    check_outcome(text, root, scale)


PRESET = (Path(rtlab.__file__).parent / "presets" / "standard.toml").read_text()


@FUZZ
@given(
    cut=st.integers(0, len(PRESET)),
    insert=st.sampled_from(
        ["\0", "\n", "[", "]]", "= 5\n", '"', "'", "\\u0000", "[[series]]\n", "1e999", "[" * 800]
    )
    | st.text(max_size=6),
    drop=st.integers(0, 8),
)
def test_mutated_presets(root, cut, insert, drop):
    check_outcome(PRESET[:cut] + insert + PRESET[cut + drop :], root)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=200) | st.sampled_from([b"\xff\xfe[", b"a = '\xe9'", b"\x00" * 4]))
def test_random_bytes_in_a_file(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.toml"
        path.write_bytes(data)
        try:
            load_experiment(str(path), catalog=CATALOG)
        except UserError as e:
            assert str(e).startswith(str(path)) and str(e).isprintable()


# --- through the CLI and the real probe ----------------------------------------------------


@pytest.fixture(scope="module")
def probe() -> Path:
    path = probe_path()
    try:
        probe_catalog(path)
    except UserError as e:
        skip_setup(str(e))
    return path


def rtlab_run_check(probe: Path, tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    toml = tmp_path / "bad.toml"
    toml.write_text(text)
    env = {
        **os.environ,
        "RTLAB_PROBE": str(probe),
        "PYTHONPATH": str(Path(rtlab.__file__).parents[1]),
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "rtlab.cli",
            "run",
            str(toml),
            "--check",
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("meter = '--help'\n", "series 's': 'meter' must be one of wakeup, periodic, response"),
        (
            "probe_args = ['--json', 'x']\n",
            "series 's' (s) key 'probe_args': '--json' is set by rtlab",
        ),
        ("deadline = '2h'\n", "series 's' (s) key 'deadline': --deadline: \"2h\" is out of range"),
    ],
)
def test_run_check_refuses_before_anything_runs(probe, tmp_path, keys, message):
    cp = rtlab_run_check(probe, tmp_path, f"[[series]]\nname = 's'\nloops = 10\n{keys}")
    assert cp.returncode == 2, cp.stderr
    assert cp.stderr.count("\n") == 1 and message in cp.stderr and "Traceback" not in cp.stderr
    assert not (tmp_path / "r").exists()


def test_run_check_asks_stress_ng_about_every_case(probe, tmp_path):
    need_tool("stress-ng")
    text = (
        "[[series]]\nname = 's'\nloops = 10\n"
        "sweep = { load = ['stress-ng:cpu', 'stress-ng:--cpu 1 --no-such-option'] }\n"
    )
    cp = rtlab_run_check(probe, tmp_path, text)
    assert cp.returncode == 2, cp.stderr
    assert (
        "series 's' (load=stress-ng:--cpu 1 --no-such-option) key 'load': " in cp.stderr
        and "stress-ng refuses" in cp.stderr
    )
    assert cp.stderr.count("\n") == 1 and not (tmp_path / "r").exists()
