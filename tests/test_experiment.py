from __future__ import annotations

import functools
import os
from dataclasses import replace
from pathlib import Path

import pytest

from rtlab.errors import InternalError, UnsupportedError, UserError
from rtlab.experiment import (
    case_keys,
    expand,
    load_experiment,
    parse,
    preset_names,
    read_source,
    validate_with_probe,
)
from rtlab.probe import Catalog, ProbeMeter, ProbeOption, Refusal, load_catalog
from rtlab.probecall import probe_argv
from rtlab.system import SysRoot

from .conftest import make_root

TWO_CPUS = {"sys/devices/system/cpu/online": "0-1\n", "proc/cmdline": "quiet\n"}
#: `rtlab-probe list --json` of the probe these tests are written against.
CATALOG_FILE = Path(__file__).parent / "fixtures" / "probe-list.json"


def argv(case) -> list[str]:
    return probe_argv(case.call)


@functools.cache
def catalog() -> Catalog:
    return load_catalog(CATALOG_FILE)


def plain_root(tmp_path: Path, extra: dict[str, str] | None = None) -> SysRoot:
    return SysRoot(make_root(tmp_path, {**TWO_CPUS, **(extra or {})}))


def load(spec: str, tmp_path: Path, **kw):
    return load_experiment(
        spec, root=kw.pop("root", None) or plain_root(tmp_path), catalog=catalog(), **kw
    )


def parse_(text: str, source: str = "t.toml"):
    return parse(text, source, catalog())


def test_presets_ship():
    assert {"standard", "policies", "quick"} <= set(preset_names())


def test_standard_is_three_series_of_nine_cases(tmp_path):
    exp = load("standard", tmp_path)
    assert [s["name"] for s in exp.series] == [
        "no preemption",
        "preemption",
        "preemption + isolation",
    ]
    assert len(exp.cases) == 27
    assert {c.params["loops"] for c in exp.cases} == {60000}
    assert [c.swept["forkcopy"] for c in exp.cases[:9]] == list(range(9))
    first, fifo = exp.cases[1], exp.cases[10]
    assert argv(first)[0] == "wakeup"
    assert argv(first)[argv(first).index("--policy") + 1] == "other"
    assert "--load" in argv(first) and "forkcopy:1:1M" in argv(first)
    assert fifo.params["policy"] == "fifo:99"
    assert 25 * 60 < sum(c.expected_s for c in exp.cases) < 30 * 60


def test_quick_finishes_under_three_minutes(tmp_path):
    exp = load("quick", tmp_path)
    assert len(exp.cases) == 27
    assert sum(c.expected_s for c in exp.cases) < 170


def test_policies_preset(tmp_path):
    exp = load("policies", tmp_path)
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
    exp = load("standard", tmp_path)
    iso = [c for c in exp.cases if c.series == "preemption + isolation"]
    assert all(c.params["cpus_resolved"] == "1" for c in iso)
    assert "forkcopy:3:1M@0" in argv(iso[3])
    assert any("last CPU" in n for n in exp.notes)


def test_isolation_with_isolcpus(tmp_path):
    root = plain_root(
        tmp_path,
        {
            "sys/devices/system/cpu/online": "0-3\n",
            "proc/cmdline": "ro isolcpus=nohz,domain,3 quiet\n",
        },
    )
    exp = load("standard", tmp_path, root=root)
    iso = [c for c in exp.cases if c.series == "preemption + isolation"]
    assert iso[0].params["cpus_resolved"] == "3"
    assert "forkcopy:3:1M" in argv(iso[3])  # the kernel keeps loads off an isolated CPU
    assert any("isolcpus" in n for n in exp.notes)


def test_scale(tmp_path):
    exp = load("standard", tmp_path, scale=0.5)
    assert {c.params["loops"] for c in exp.cases} == {30000}
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(UserError, match="--scale must be a finite number > 0"):
            load("standard", tmp_path, scale=bad)


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
    exp = expand(parse_(GOOD), scale=0.5, root=plain_root(tmp_path))
    assert exp.deadline_ns == 100_000
    assert [c.name for c in exp.cases] == [
        "forkcopy=0, interval=1ms",
        "forkcopy=0, interval=2ms",
        "forkcopy=2, interval=1ms",
        "forkcopy=2, interval=2ms",
    ]
    assert exp.cases[0].params["duration"] == "1000000000ns"
    assert "--duration" in argv(exp.cases[0])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[series]]\nname='a'\npolcy='other'\n", "unknown key 'polcy' (did you mean policy?)"),
        ("[defaults]\nloops='many'\n[[series]]\nname='a'\n", "'loops' must be int"),
        ("[defaults]\nforkcopy=-1\n[[series]]\nname='a'\n", "'forkcopy' must be >= 0"),
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
def test_bad_experiment_files(text, message, tmp_path):
    with pytest.raises(UserError) as e:  # checked when read, or for each case's meter
        expand(parse_(text, "bad.toml"), root=plain_root(tmp_path))
    assert "bad.toml" in str(e.value) and message in str(e.value)
    assert "\n" not in str(e.value)


def test_unknown_preset_names_the_presets():
    with pytest.raises(UserError, match="no such preset"):
        load_experiment("nonesuch")


def test_probe_refusal_names_series_and_key(tmp_path):
    exp = expand(parse_(GOOD.replace("fifo:10", "fifo:200")), root=plain_root(tmp_path))

    def check(call):
        if "fifo:200" in call.values("policy"):
            return Refusal('--policy: "fifo:200": priority must be 1..99', "policy", "fifo:200", 2)
        return None

    with pytest.raises(UserError) as e:
        validate_with_probe(exp, check)
    assert str(e.value) == (
        "t.toml: series 'a' (forkcopy=0, interval=1ms) key 'policy': "
        '--policy: "fifo:200": priority must be 1..99'
    )


# --- case keys come from the probe's own description of its options -----------------------

ONE = "[[series]]\nname = 'a'\n"


def one_case(tmp_path: Path, keys: str, **kw):
    (case,) = expand(parse_(ONE + keys), root=plain_root(tmp_path), **kw).cases
    return case


def test_case_keys_are_the_probe_options_less_those_rtlab_sets():
    keys = case_keys(catalog())
    assert {
        "interval",
        "distance",
        "dma_latency",
        "deadline",
        "main_cpus",
        "allow_fallback",
    } <= set(keys)
    assert not {"json", "raw_path", "quiet", "progress", "check", "no_mlock", "help"} & set(keys)
    assert keys["raw"][0].kind == "bool" and keys["cpus"][0].kind == "cpus"  # host keys


def test_option_keys_become_probe_options(tmp_path):
    case = one_case(
        tmp_path,
        "dma_latency = '10us'\ndeadline = '50us'\nallow_fallback = true\nmain_cpus = 0\n"
        "mlock = false\n",
    )
    args = argv(case)
    assert args[args.index("--dma-latency") + 1] == "10us"
    assert args[args.index("--deadline") + 1] == "50us"
    assert args[args.index("--main-cpus") + 1] == "0"
    assert "--allow-fallback" in args and "--no-mlock" in args
    case = one_case(tmp_path, "allow_fallback = false\n")
    assert "--allow-fallback" not in argv(case)  # false: not given


def test_tracer_is_a_key_of_wakeup_and_noise(tmp_path):
    """--tracer comes from the catalog: `tracer` selects the kernel's tracer per case."""
    case = one_case(tmp_path, "cpus = 0\ntracer = 'timerlat'\n")
    assert argv(case)[argv(case).index("--tracer") + 1] == "timerlat"
    case = one_case(tmp_path, "meter = 'noise'\ncpus = 0\ntracer = 'osnoise'\n")
    assert argv(case)[0] == "noise" and argv(case)[argv(case).index("--tracer") + 1] == "osnoise"
    with pytest.raises(UserError, match="'tracer' must be str"):
        one_case(tmp_path, "tracer = true\n")
    with pytest.raises(UserError, match="key 'tracer': not an option of meter 'periodic'"):
        one_case(tmp_path, "meter = 'periodic'\ntracer = 'timerlat'\n")


MECHANISMS = (
    "nanosleep-abs, nanosleep-rel, busy-poll, setitimer, posix-timer-signal, "
    "posix-timer-thread, timerfd, condvar, deadline"
)


def test_choice_options_come_with_their_words():
    """`list --json` describes a choice with its words; the key takes exactly those."""
    o = catalog().option("periodic", "mechanism")
    assert o is not None and o.type == "choice" and ", ".join(o.choices) == MECHANISMS
    assert catalog().option("pagefault", "protect").choices == (
        "none",
        "mlock",
        "prefault",
        "mlock+prefault",
    )
    assert catalog().option("wakeup", "interval").choices == ()  # not a choice
    (k,) = case_keys(catalog())["mechanism"]
    assert k.kind == "choice" and k.choices == o.choices


def test_choice_values_are_checked_before_anything_runs(tmp_path):
    (case,) = expand(
        parse_(ONE + "meter = 'periodic'\nsweep = { mechanism = ['timerfd', 'condvar'] }\n"),
        root=plain_root(tmp_path),
    ).cases[:1]
    assert case.call.value("mechanism") == "timerfd"
    for text, message in [
        (
            "meter = 'periodic'\nmechanism = 'timer-fd'\n",
            f"t.toml: series 'a': 'mechanism' must be one of {MECHANISMS}; not 'timer-fd'",
        ),
        (
            "meter = 'periodic'\nsweep = { mechanism = ['timerfd', ''] }\n",
            f"t.toml: series 'a' sweep: 'mechanism' must be one of {MECHANISMS}; not ''",
        ),
        (  # a word of noise's --tracer, not of wakeup's: refused for the case's meter
            "tracer = 'osnoise'\n",
            "t.toml: series 'a' (a) key 'tracer': must be one of user, timerlat; not 'osnoise'",
        ),
        (
            "meter = 'pagefault'\nsweep = { protect = ['none', 'MLOCK'] }\n",
            "'protect' must be one of none, mlock, prefault, mlock+prefault; not 'MLOCK'",
        ),
    ]:
        with pytest.raises(UserError) as e:
            expand(parse_(ONE + text), root=plain_root(tmp_path))
        assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("dma_latency = 10\n", "'dma_latency' must be str (a duration with a unit"),
        ("dma_latency = '10'\n", "'dma_latency' bad duration '10': a unit is required"),
        ("allow_fallback = 'yes'\n", "'allow_fallback' must be bool"),
        ("loops = 1.5\n", "'loops' must be int, not float"),
        ("loops = true\n", "'loops' must be int, not bool"),
        ("loops = nan\n", "'loops' must be int, not float"),
        ("threads = '2'\n", "'threads' must be int, not str"),
        ("policy = ''\n", "'policy' must not be empty"),
        ("cpus = ''\n", "'cpus' must not be empty"),
        ("cpus = [1]\n", "'cpus' must be str or int"),
        ("loads = ['spin:10%', '']\n", "'loads' must be a list of non-empty strings"),
        ("loads = [1]\n", "'loads' must be a list of strings"),
        ("probe_args = '--interval 1ms'\n", "'probe_args' must be list of strings, not str"),
        ("threshold = '1ms'\n", "key 'threshold': not an option of meter 'wakeup'"),
        ("meter = '--help'\n", "'meter' must be one of wakeup, periodic, response, noise, "),
        ("sweep = { meter = ['wakeup', 'nonesuch'] }\n", "'meter' must be one of wakeup, periodic"),
        ("duration = '99999999999999999999h'\n", "is too long"),
    ],
)
def test_case_key_types_follow_the_option_types(keys, message, tmp_path):
    with pytest.raises(UserError) as e:  # checked when read, or for each case's meter
        expand(parse_(ONE + keys), root=plain_root(tmp_path))
    assert message in str(e.value) and "\n" not in str(e.value)


def two_meters() -> Catalog:
    """The fixture catalog plus a meter without the options of wakeup."""
    busy = ProbeMeter("busy", "a meter of its own", (ProbeOption("work", "int", "N", min=1),))
    return replace(catalog(), meters=(*catalog().meters, busy))


def test_each_case_takes_the_options_of_its_meter(tmp_path):
    def cases(text: str):
        return expand(parse(ONE + text, "t.toml", two_meters()), root=plain_root(tmp_path)).cases

    with pytest.raises(UserError) as e:
        cases("interval = '2ms'\nsweep = { meter = ['wakeup', 'busy'] }\n")
    assert str(e.value) == (
        "t.toml: series 'a' (meter=busy) key 'interval': not an option of meter 'busy'"
    )
    (case,) = cases("meter = 'busy'\nwork = 3\n")
    assert argv(case)[0] == "busy" and argv(case)[-2:] == ["--work", "3"]
    with pytest.raises(UserError, match="key 'probe_args': '--interval' is not an option of meter"):
        cases("meter = 'busy'\nprobe_args = ['--interval', '1ms']\n")


@pytest.mark.parametrize(
    ("probe_args", "message"),
    [
        ("['--json', 'x']", "'--json' is set by rtlab"),
        ("['--raw=x']", "'--raw=x' is set by rtlab"),
        ("['--progress', '-']", "'--progress' is set by rtlab"),
        ("['--quiet']", "'--quiet' is set by rtlab"),
        ("['--check']", "'--check' is set by rtlab"),
        ("['-h']", "'-h' is set by rtlab"),
        ("['--help']", "'--help' is set by rtlab"),
        ("['x']", "'x' is not an option"),
        ("['--']", "'--' is not an option"),
        ("['--interval']", "'--interval' needs a value"),
        ("['--bogus', '1']", "'--bogus' is not an option of meter 'wakeup'"),
        ("['--allow-fallback', '1ms']", "'1ms' is not an option"),
    ],
)
def test_probe_args_hold_only_options_of_the_meter(tmp_path, probe_args, message):
    with pytest.raises(UserError) as e:
        one_case(tmp_path, f"probe_args = {probe_args}\n")
    assert str(e.value).startswith("t.toml: series 'a' (a) key 'probe_args': ")
    assert message in str(e.value)


def test_probe_args_are_passed_on(tmp_path):
    extra = ["--distance", "10us", "--allow-fallback", "--threshold=1ms", "--load", "spin:5%"]
    case = one_case(tmp_path, f"probe_args = {extra!r}\n")
    given = [(o.name, o.value, o.key) for o in case.call.options[-4:]]
    assert given == [  # under their canonical names, each from the key probe_args
        ("distance", "10us", "probe_args"),
        ("allow-fallback", None, "probe_args"),
        ("deadline", "1ms", "probe_args"),
        ("load", "spin:5%", "probe_args"),
    ]
    assert argv(case)[-5:] == ["--allow-fallback", "--deadline", "1ms", "--load", "spin:5%"]


@pytest.mark.parametrize(
    ("deadline", "message"),
    [
        ("'100'", "bad duration '100'"),
        ("0", "must be a duration string"),
        ("'0us'", "must be > 0 and at most 1h"),
        ("'61m'", "must be > 0 and at most 1h, not '61m'"),
        ("'99999999999999999999999h'", "must be > 0 and at most 1h"),
        ("''", "bad duration ''"),
        ("true", "must be a duration string"),
    ],
)
def test_experiment_deadline_is_a_duration_up_to_an_hour(deadline, message):
    text = f"[experiment]\ndeadline = {deadline}\n" + ONE
    with pytest.raises(UserError) as e:
        parse_(text)
    assert str(e.value).startswith("t.toml: [experiment] 'deadline'") and message in str(e.value)
    assert parse_("[experiment]\ndeadline = '1h'\n" + ONE).deadline_ns == 3600 * 10**9


# --- hostile files: one line, never a traceback --------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("experiment = 5\n" + ONE, "[experiment] must be a table, not int"),
        ("[[experiment]]\nname = 'x'\n" + ONE, "[experiment] must be a table, not array"),
        ("defaults = true\n" + ONE, "[defaults] must be a table, not bool"),
        ("series = [[1]]\n", "series[0]: each series ([[series]]) must be a table, not array"),
        ("series = [1]\n", "series[0]: each series ([[series]]) must be a table, not int"),
        ("series = 'a'\n", "needs at least one [[series]]"),
        ("series = []\n", "needs at least one [[series]]"),
        (ONE + "sweep = 3\n", "'sweep' must be a table"),
        (ONE + "sweep = { policy = 'fifo:1' }\n", "sweep 'policy' must be a non-empty list"),
        ("[experiment]\nname = 5\n" + ONE, "[experiment] 'name' must be str"),
        ("[experiment]\ndescription = []\n" + ONE, "[experiment] 'description' must be str"),
        (ONE + "description = 1\n", "series 'a': 'description' must be str"),
        (ONE + 'policy = "fifo\\u0000:9"\n', "'series[0].policy' contains a NUL character"),
        (ONE + 'loads = ["x", "a\\u0000"]\n', "'series[0].loads[1]' contains a NUL character"),
        ('"a\\u0000" = 1\n' + ONE, "key 'a\\x00' contains a NUL character"),
        ("a = " + "[" * 5000 + "]" * 5000 + "\n", "not valid TOML"),
        ("a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n", "not valid TOML"),
        (ONE + "loops = 0x" + "f" * 40 + "\n", "'series[0].loops' is beyond the 64-bit integers"),
        (ONE + "loops = " + "9" * 5000 + "\n", "not valid TOML (Exceeds the limit"),
        (ONE + "loops = 9223372036854775808\n", "is beyond the 64-bit integers of TOML"),
        ("[[series]]\nname = 'a\\nb'\n[[series]]\nname = 'a\\nb'\n", "series name 'a\\nb' is used"),
        (ONE + "'x\\ny' = 1\n", "unknown key 'x\\ny'"),
        (ONE + "sweep = { a = [1], b = [1] }\n", "unknown key 'a'"),
        (
            ONE
            + "sweep = { forkcopy = "
            + str(list(range(101)))
            + ", load = "
            + str([f"spin:{i}%" for i in range(100)])
            + " }\n",
            "more than 10000 cases",
        ),
    ],
)
def test_hostile_files_give_one_line(text, message):
    with pytest.raises(UserError) as e:
        parse_(text)
    assert message in str(e.value), str(e.value)
    assert str(e.value).startswith("t.toml: ") and "\n" not in str(e.value)


def test_huge_values_do_not_overflow(tmp_path):
    big = 2**63 - 1
    case = one_case(tmp_path, f"loops = {big}\n", scale=1e300)
    loops = argv(case)[argv(case).index("--loops") + 1]
    assert int(loops) > big  # the probe refuses it, naming the key
    assert 0 < case.expected_s < float("inf")
    case = one_case(tmp_path, "duration = '2562047h'\ninterval = '10s'\n", scale=1e300)
    assert case.params["duration"].endswith("ns") and 0 < case.expected_s < float("inf")
    case = one_case(tmp_path, f"loops = {big}\ninterval = '10s'\n")
    assert case.expected_s == pytest.approx(big * 10)


def test_values_below_range_reach_the_probe_unscaled(tmp_path):
    """Scaling keeps a case at >= 1 loop; a loops = 0 typed is the probe's to refuse."""
    case = one_case(tmp_path, "loops = 0\nthreads = 0\n", scale=0.001)
    assert argv(case)[argv(case).index("--loops") + 1] == "0"
    case = one_case(tmp_path, "loops = 10\n", scale=0.001)
    assert argv(case)[argv(case).index("--loops") + 1] == "1"


def test_absurd_cpu_lists_are_left_to_the_probe(tmp_path):
    for cpus in ("0-99999999999", "0-1_000_000_000", "x", "0-٩٩٩٩٩٩٩٩٩٩"):
        case = one_case(tmp_path, f"cpus = '{cpus}'\nisolate_loads = true\nload = 'spin:5%'\n")
        assert argv(case)[argv(case).index("--cpus") + 1] == cpus
        assert argv(case)[argv(case).index("--load") + 1] == "spin:5%"  # not pinned


def test_read_source_refuses_what_is_no_regular_utf8_file(tmp_path):
    with pytest.raises(UserError, match="not a regular file"):
        read_source(str(tmp_path))
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a regular file"):
        read_source(str(fifo))  # and does not hang waiting for a writer
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b"[experiment]\nname = 'caf\xe9'\n")
    with pytest.raises(UserError) as e:
        read_source(str(latin))
    assert str(e.value) == f"{latin}: not UTF-8 text (byte 0xe9 at offset 24)"
    with pytest.raises(UserError, match="cannot read"):
        read_source("a\0b.toml")
    with pytest.raises(UserError, match="no such preset or file"):
        read_source("no\0such")
    with pytest.raises(UserError, match=r"cannot read \(No such file"):
        read_source(str(tmp_path / "missing.toml"))
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"#" * (2 << 20))
    with pytest.raises(UserError, match="too large"):
        read_source(str(huge))


# --- the probe's refusal, mapped back to the key that produced the value ------------------

LOADS = """
[[series]]
name = "s"
cpus = "last"
isolate_loads = true
forkcopy = 2
load = "spin:50%"
loads = ["timer:4", "ipc:1@0"]
probe_args = ["--load", "net", "--distance", "5us"]
"""


def refuse(option: str | None, value: str | None, code: int = 2):
    def check(call) -> Refusal:
        return Refusal(f"--{option}: {value!r} refused", option, value, code)

    return check


@pytest.mark.parametrize(
    ("option", "value", "key"),
    [
        ("load", "forkcopy:2:1M@0", "forkcopy"),
        ("load", "spin:50%@0", "load"),
        ("load", "timer:4@0", "loads"),
        ("load", "ipc:1@0", "loads"),
        ("load", "net", "probe_args"),
        ("distance", "5us", "probe_args"),
        ("cpus", "1", "cpus"),
        ("threads", "2", None),  # not from a key: the probe's message alone
        (None, None, None),
    ],
)
def test_refusal_names_the_key_that_gave_the_value(tmp_path, option, value, key):
    exp = expand(parse_(LOADS), root=plain_root(tmp_path))
    with pytest.raises(UserError) as e:
        validate_with_probe(exp, refuse(option, value))
    named = f" key '{key}'" if key else ""
    assert str(e.value) == f"t.toml: series 's' (s){named}: --{option}: {value!r} refused"


def test_refusal_exit_codes(tmp_path):
    exp = expand(parse_(LOADS), root=plain_root(tmp_path))
    with pytest.raises(UnsupportedError, match="key 'load': "):
        validate_with_probe(exp, refuse("load", "spin:50%@0", 3))
    with pytest.raises(InternalError, match="exited 4"):
        validate_with_probe(exp, refuse(None, None, 4))


def test_refusal_of_a_swept_value_names_its_case(tmp_path):
    text = "[[series]]\nname = 'a\\nb'\nsweep = { mlock = [true, false], deadline = ['1us'] }\n"
    exp = expand(parse_(text), root=plain_root(tmp_path))
    seen = []

    def check(call):
        seen.append(call)
        return Refusal("cannot lock", "no-mlock", None, 2) if call.has("no-mlock") else None

    with pytest.raises(UserError) as e:
        validate_with_probe(exp, check)
    assert str(e.value) == (
        "t.toml: series 'a\\nb' (mlock=False, deadline=1us) key 'mlock': cannot lock"
    )
    assert len(seen) == 2
