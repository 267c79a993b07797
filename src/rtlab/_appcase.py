"""Application cases of an experiment: the user's own program measured by the sched meter.

    app = "CMD ARGS"        rtlab starts the program for each case (`rtlab-probe sched -- CMD`)
    attach = "NAME"         a process already running there, found by its name (--process)
    app_threads = "NAME"    only its threads of that name (--comm); "all" (default): every one

Both imply `meter = "sched"`. In an `app` case, `policy` and `cpus` are the program's, as
for a meter's measured thread: rtlab starts it under `chrt` and `taskset` (the probe starts
a command in the fair class on every CPU, and chrt and taskset exec the program in place,
so its PID is the one the probe follows). An attached process keeps its own: rtlab does not
change a program it did not start, and refuses both keys there.
"""

from __future__ import annotations

import shlex
from typing import Any

from rtlab.probecall import Option

APP, ATTACH, APP_THREADS = "app", "attach", "app_threads"
APP_METER = "sched"
#: Threads of a started program observed when `threads` does not say (the probe's limit: 64).
APP_SLOTS = 8
MAX_COMMAND_CHARS = 4096
# The policy words of `policy` and chrt's option for each (util-linux and busybox alike).
_CHRT = {"fifo": "-f", "rr": "-r", "other": "-o", "batch": "-b", "idle": "-i"}


def app_kind(p: dict[str, Any]) -> str | None:
    """APP or ATTACH when the case keys P measure an application, else None."""
    return APP if APP in p else ATTACH if ATTACH in p else None


def app_error(p: dict[str, Any]) -> tuple[str, str] | None:
    """(key, why) when the application keys of case P do not fit together, else None."""
    kind = app_kind(p)
    if kind is None:
        return (APP_THREADS, "needs 'app' or 'attach'") if APP_THREADS in p else None
    if APP in p and ATTACH in p:
        return ATTACH, "'app' and 'attach' exclude each other"
    meter = p.get("meter", APP_METER)
    if meter != APP_METER:
        return "meter", f"an {kind} case is measured by the sched meter, not {meter!r}"
    value = p[kind]
    if not isinstance(value, str) or not value.strip():
        return kind, "must name a " + ("command" if kind == APP else "process")
    if len(value) > MAX_COMMAND_CHARS or not value.isprintable():
        return kind, f"must be printable text of at most {MAX_COMMAND_CHARS} characters"
    if kind == APP:
        try:
            words = shlex.split(value)
        except ValueError as e:
            return kind, f"not a command line ({e})"
        if not words:
            return kind, "must name a command"
    elif "/" in value:
        return kind, "a process name (/proc/PID/comm, as pidof takes it), not a path"
    threads = p.get(APP_THREADS, "all")
    if not isinstance(threads, str) or not threads or not threads.isprintable():
        return APP_THREADS, '"all" or the name of the threads to observe'
    if "duration" not in p:
        return "duration", f"an {kind} case runs for a 'duration' (its program has no loops)"
    if kind == ATTACH:
        for key in ("policy", "cpus"):
            if key in p:
                return key, (
                    "an attached process keeps its own policy and CPUs: rtlab does not "
                    "change a program it did not start"
                )
    if isinstance(p.get("policy"), str):
        why = _policy_error(p["policy"])
        if why:
            return "policy", why
    return None


def _policy_error(policy: str) -> str | None:
    """Why chrt cannot start a program under POLICY, or None."""
    word, colon, arg = policy.partition(":")
    if word not in _CHRT:
        return f"an app case starts its program with chrt: {', '.join(_CHRT)}, not {policy!r}"
    limits = {"fifo": (1, 99), "rr": (1, 99), "other": (-20, 19), "batch": (-20, 19)}
    if word not in limits:
        return f"{word!r} takes no value" if colon else None
    low, high = limits[word]
    if word in ("fifo", "rr") and not colon:
        return f"{word} needs a priority ({word}:PRIO, {low}..{high})"
    try:
        value = int(arg) if colon else 0
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        return f"{policy!r}: {'priority' if low > 0 else 'nice'} must be {low}..{high}"
    return None


def _chrt(policy: str) -> list[str]:
    """The chrt (and nice) words that start a program under POLICY ("fifo:80", "other:-5")."""
    word, _, arg = policy.partition(":")
    if word in ("fifo", "rr"):
        return ["chrt", _CHRT[word], arg]
    nice = ["nice", "-n", arg] if arg and word in ("other", "batch") and int(arg) else []
    return ["chrt", _CHRT[word], "0", *nice]


def app_options(p: dict[str, Any], cpus: str | None) -> tuple[list[Option], tuple[str, ...]]:
    """The sched meter's selection options and the command of application case P (checked
    by app_error), CPUS its resolved `cpus`."""
    kind = app_kind(p)
    threads = p.get(APP_THREADS, "all")
    options = [Option("comm", threads, APP_THREADS)] if threads != "all" else []
    if kind == ATTACH:
        return [Option("process", p[ATTACH], ATTACH), *options], ()
    if "threads" not in p:
        options.append(Option("threads", str(APP_SLOTS), APP))
    prefix = _chrt(p["policy"]) if "policy" in p else []
    if cpus:
        prefix += ["taskset", "-c", cpus]
    return options, (*prefix, *shlex.split(p[APP]))
