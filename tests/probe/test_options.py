"""One vocabulary: --deadline (alias --threshold), --dma-latency as a duration,
`list --help`, and `list --json` describing every option a host needs."""

from __future__ import annotations

import json
import os

import pytest

OPTION_TYPES = {"flag", "int", "duration", "cpulist", "policy", "string", "load", "choice"}
INT32_MAX = 2**31 - 1


@pytest.mark.parametrize("spelling", ["--deadline", "--threshold"])
def test_deadline_and_its_alias_exit_1_when_exceeded(wakeup, spelling):
    # Every latency exceeds 1 ns: the exit code is certain, not a timing assertion.
    cp, doc = wakeup("--loops", "50", "--policy", "other", spelling, "1ns")
    assert cp.returncode == 1, cp.stderr
    assert doc["schema"] == 8
    assert doc["deadline_exceeded"] is True
    assert doc["params"]["deadline_ns"] == 1
    assert "threshold_exceeded" not in doc and "threshold_ns" not in doc["params"]
    assert doc["argv"][doc["argv"].index(spelling) + 1] == "1ns"  # recorded as typed


def test_no_deadline_is_recorded_as_null(wakeup):
    cp, doc = wakeup("--loops", "20", "--policy", "other")
    assert cp.returncode == 0, cp.stderr
    assert doc["params"]["deadline_ns"] is None and doc["deadline_exceeded"] is False
    assert doc["params"]["dma_latency_us"] is None


@pytest.mark.parametrize("value", ["10", "5", "1500ns", "1.5us", "-1us", "2147483648us"])
def test_dma_latency_needs_a_whole_number_of_us_with_a_unit(run_probe, value):
    cp = run_probe("wakeup", "--loops", "10", "--policy", "other", "--dma-latency", value)
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "--dma-latency" in lines[0] and value in lines[0]
    assert cp.stdout == ""


@pytest.mark.parametrize("value", ["0us", "10us", "1ms", "2147483647us", "0"])
def test_dma_latency_durations_pass_check(run_probe, value):
    cp = run_probe("wakeup", "--dma-latency", value, "--check")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "" and cp.stderr == ""


def dma_device_usable() -> str | None:
    """Why /dev/cpu_dma_latency cannot be held here, or None."""
    try:
        os.close(os.open("/dev/cpu_dma_latency", os.O_WRONLY))
    except OSError as e:
        return f"/dev/cpu_dma_latency cannot be opened for writing ({e.strerror})"
    return None


@pytest.mark.parametrize(("value", "us"), [("0us", 0), ("10us", 10), ("1ms", 1000)])
def test_dma_latency_is_held_and_recorded_in_us(wakeup, value, us):
    why = dma_device_usable()
    if why:
        pytest.skip(why)
    cp, doc = wakeup("--loops", "10", "--policy", "other", "--dma-latency", value)
    assert cp.returncode == 0, cp.stderr
    assert doc["params"]["dma_latency_us"] == us


def test_list_help_prints_the_usage_of_list(run_probe):
    for flag in ("--help", "-h"):
        cp = run_probe("list", flag)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.startswith("usage: rtlab-probe list") and "--json" in cp.stdout
        assert cp.stderr == ""


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_flags(run_probe, flag):
    cp = run_probe(flag)
    assert cp.returncode == 0 and cp.stdout.startswith("rtlab-probe ")


def check_option(o: dict) -> None:
    assert {"name", "type", "metavar", "help", "aliases"} <= o.keys(), o
    assert o["type"] in OPTION_TYPES, o
    assert isinstance(o["name"], str) and not o["name"].startswith("-")
    assert o["metavar"] is None if o["type"] == "flag" else isinstance(o["metavar"], str), o
    assert isinstance(o["help"], str) and o["help"] and "\n" not in o["help"]
    assert isinstance(o["aliases"], list) and all(isinstance(a, str) for a in o["aliases"])
    if o["type"] == "int":
        assert isinstance(o["min"], int) and isinstance(o["max"], int) and o["min"] <= o["max"]
        assert "min_ns" not in o
    elif o["type"] == "duration":
        assert isinstance(o["min_ns"], int) and isinstance(o["max_ns"], int)
        assert 0 <= o["min_ns"] <= o["max_ns"] and "min" not in o
    else:
        assert not {"min", "max", "min_ns", "max_ns"} & o.keys(), o
    if o["type"] == "choice":
        words = o["choices"]
        assert len(words) >= 2 and len(set(words)) == len(words), o
        assert all(isinstance(w, str) and w for w in words) and o["default"] in words, o
    else:
        assert "choices" not in o and "default" not in o, o


def test_list_json_describes_every_option(run_probe):
    cp = run_probe("list", "--json")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    assert {"version", "common_options", "meters", "loads"} <= doc.keys()
    common = {o["name"]: o for o in doc["common_options"]}
    for o in doc["common_options"]:
        check_option(o)
    for m in doc["meters"]:
        assert m["name"] and m["summary"]
        for o in m["options"]:
            check_option(o)
            assert o["name"] not in common, "a meter option shadows a common one"
    for name in ("cpus", "threads", "policy", "loops", "duration", "json", "raw", "load", "check"):
        assert name in common, name
    assert "threshold" in common["deadline"]["aliases"]
    assert common["deadline"]["type"] == "duration"
    names = [o["name"] for o in doc["common_options"]]
    assert "threshold" not in names and len(names) == len(set(names))
    aliases = [a for o in doc["common_options"] for a in o["aliases"]]
    assert not set(aliases) & set(names)
    dma = common["dma-latency"]
    assert (dma["type"], dma["min_ns"], dma["max_ns"]) == ("duration", 0, INT32_MAX * 1000)
    assert dma["step_ns"] == 1000
    assert common["threads"]["type"] == "int" and common["threads"]["min"] == 1
    assert common["quiet"]["type"] == "flag" and common["quiet"]["metavar"] is None
    assert "forkcopy" in [ld["name"] for ld in doc["loads"]]


# Words that need more than themselves to pass --check: other options, a kernel tracer.
NEEDS_MORE = {("response", "transport", "gpio"), ("wakeup", "tracer", "timerlat")}
NEEDS_MORE |= {("noise", "tracer", "osnoise")}
NEEDS_MORE |= {("sched", "samples", w) for w in ("any", "timer", "wakeup")}  # threads to observe


def test_every_word_of_a_choice_is_accepted_and_no_other(run_probe):
    """Each word `list --json` lists for a choice passes --check; a word not listed is
    refused in one line that lists them all, exit 2, and the --check JSON names it."""
    doc = json.loads(run_probe("list", "--json").stdout)
    seen = 0
    for m in doc["meters"]:
        for o in m["options"]:
            if o["type"] != "choice":
                continue
            seen += 1
            for word in o["choices"]:
                if (m["name"], o["name"], word) in NEEDS_MORE:
                    continue
                cp = run_probe(m["name"], f"--{o['name']}", word, "--check")
                assert cp.returncode == 0, (m["name"], o["name"], word, cp.stderr)
            cp = run_probe(m["name"], f"--{o['name']}={o['default']}x", "--check")
            assert cp.returncode == 2
            message = (
                f"--{o['name']}: must be one of {', '.join(o['choices'])}; not '{o['default']}x'"
            )
            assert cp.stderr == f"rtlab-probe {m['name']}: {message}\n"
            assert json.loads(cp.stdout) == {
                "error": message,
                "option": o["name"],
                "value": f"{o['default']}x",
            }
    assert seen >= 7


def test_every_listed_option_is_accepted(run_probe):
    """What `list --json` describes is what the parser takes, aliases included."""
    doc = json.loads(run_probe("list", "--json").stdout)
    samples = {"int": "1", "duration": "1ms", "cpulist": "0", "policy": "other", "load": "spin:5%"}
    skip = {"check", "json", "raw", "progress", "loops", "duration", "cpus", "threads"}
    for o in [*doc["common_options"], *doc["meters"][0]["options"]]:
        if o["name"] in skip:
            continue
        for spelling in [o["name"], *o["aliases"]]:
            value = [] if o["type"] == "flag" else [samples.get(o["type"], "x")]
            if o["name"] == "dma-latency":
                value = ["10us"]
            if o["name"] == "tracer":
                value = ["user"]  # the others need their kernel tracer
            if o["name"] == "explain-max":
                value = ["1", "--explain", "1ms"]  # it refines --explain
            cp = run_probe("wakeup", f"--{spelling}", *value, "--check")
            assert cp.returncode == 0, (spelling, cp.stderr)
