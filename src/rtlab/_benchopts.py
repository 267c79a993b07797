"""What `rtlab bench throughput` takes beyond its built-in suite: a user's commands as
workloads (`--workload 'NAME=CMD'`) and a scheduling policy to run every workload under
(`--policy fifo:PRIO`).

A command is split into words as a shell would (shlex) and run without a shell; its
figure is the wall time of one run in seconds (lower is better). Limits: a command of at
most MAX_COMMAND_CHARS characters and MAX_COMMAND_WORDS words, a name of at most
MAX_NAME_CHARS of [A-Za-z0-9._+-], the last MAX_ERROR_TAIL bytes of its standard error
kept to say why a run failed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from rtlab.errors import UnsupportedError, UserError
from rtlab.system import LIVE_ROOT, Root
from rtlab.throughput import Workload, process_group

MAX_COMMAND_CHARS = 4096
MAX_COMMAND_WORDS = 256
MAX_NAME_CHARS = 64
MAX_ERROR_TAIL = 400
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_NAMED = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._+-]*)=(.*)", re.S)


def _resolve(word: str) -> str | None:
    """WORD as the shell-free exec would find it: a path as given, else on $PATH."""
    if "/" in word:
        return word if os.path.isfile(word) and os.access(word, os.X_OK) else None
    return shutil.which(word)


def _run_command(argv: list[str], name: str) -> float:
    """One run of ARGV in a process group of its own (killed on every exit path): its
    wall time in seconds. A non-zero exit is the user's command failing: exit 2."""
    with tempfile.TemporaryFile(prefix="rtlab-wl-") as err:
        t0 = time.perf_counter()
        with process_group(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
        ) as p:
            p.wait()
        wall_s = time.perf_counter() - t0
        if p.returncode != 0:
            err.seek(max(0, err.seek(0, os.SEEK_END) - MAX_ERROR_TAIL))
            tail = err.read().decode(errors="replace").strip().splitlines()
            why = f": {tail[-1]}" if tail else ""
            raise UserError(f"--workload {name}: the command exited {p.returncode}{why}")
    return wall_s


def user_workload(spec: str, taken: set[str]) -> Workload:
    """`--workload SPEC`: 'CMD' (named by its first word) or 'NAME=CMD'. TAKEN holds the
    names already used (the built-ins chosen, earlier commands); a clash is exit 2."""
    if len(spec) > MAX_COMMAND_CHARS:
        raise UserError(f"--workload: longer than {MAX_COMMAND_CHARS} characters")
    m = _NAMED.fullmatch(spec)
    name, text = (m.group(1), m.group(2)) if m else (None, spec)
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise UserError(f"--workload {spec!r}: {e}") from None
    if not argv:
        raise UserError(f"--workload {spec!r}: no command")
    if len(argv) > MAX_COMMAND_WORDS:
        raise UserError(f"--workload: more than {MAX_COMMAND_WORDS} words")
    exe = _resolve(argv[0])
    if exe is None:
        raise UserError(f"--workload {spec!r}: command not found: {argv[0]}")
    name = name or os.path.basename(argv[0])
    if not _NAME.fullmatch(name) or len(name) > MAX_NAME_CHARS:
        raise UserError(
            f"--workload {spec!r}: name it NAME=CMD, NAME of [A-Za-z0-9._+-] "
            f"(at most {MAX_NAME_CHARS})"
        )
    if name in taken:
        raise UserError(f"--workload: a workload named '{name}' is given twice (NAME=CMD)")
    taken.add(name)
    words = (exe, *argv[1:])
    return Workload(
        name,
        "s",
        False,
        None,
        shlex.join(argv),
        lambda _scale: _run_command(list(words), name),
        command=tuple(argv),
    )


# --- scheduling policy ------------------------------------------------------------------

_POLICIES = {"fifo": os.SCHED_FIFO, "rr": os.SCHED_RR}


def parse_policy(text: str) -> tuple[str, int] | None:
    """`other` (None: as rtlab runs) or `fifo:PRIO` / `rr:PRIO` with PRIO 1..99."""
    if text == "other":
        return None
    kind, _, prio = text.partition(":")
    if kind not in _POLICIES or not prio.isdigit() or not 1 <= int(prio) <= 99:
        raise UserError(f"--policy {text!r}: other, fifo:PRIO or rr:PRIO (PRIO 1..99)")
    return kind, int(prio)


def rt_throttling(root: Root = LIVE_ROOT) -> tuple[int | None, int | None]:
    """(sched_rt_runtime_us, sched_rt_period_us), None where unreadable."""

    def read(name: str) -> int | None:
        text = root.read(f"proc/sys/kernel/{name}")
        try:
            return int(text) if text is not None else None
        except ValueError:
            return None

    return read("sched_rt_runtime_us"), read("sched_rt_period_us")


def check_policy(policy: tuple[str, int], root: Root = LIVE_ROOT) -> dict[str, Any]:
    """Refuse what cannot or must not run (exit 3), before anything runs: a policy this
    process may not set, or real-time throttling off (a workload busy on every CPU at
    SCHED_FIFO would then starve everything else, rtlab included). The policy's record."""
    kind, prio = policy
    runtime_us, period_us = rt_throttling(root)
    if runtime_us == -1:
        raise UnsupportedError(
            f"--policy {kind}:{prio}: real-time throttling is off "
            "(kernel.sched_rt_runtime_us = -1): a workload busy on every CPU would starve "
            "the system; put it back first (rtlab tune reset, or sysctl "
            "kernel.sched_rt_runtime_us=950000)"
        )
    with applied(policy):
        pass  # refused here, with the reason, rather than after some runs
    return {
        "policy": f"{kind}:{prio}",
        "sched_rt_runtime_us": runtime_us,
        "sched_rt_period_us": period_us,
    }


@contextlib.contextmanager
def applied(policy: tuple[str, int] | None) -> Iterator[None]:
    """rtlab's thread at POLICY while inside, so that every process a workload starts
    inherits it (fork and exec keep the policy); the previous policy after."""
    if policy is None:
        yield
        return
    kind, prio = policy
    before = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, _POLICIES[kind], os.sched_param(prio))
    except PermissionError:
        raise UnsupportedError(
            f"--policy {kind}:{prio}: not permitted to use SCHED_{kind.upper()} "
            f"(needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO of at least {prio})"
        ) from None
    try:
        yield
    finally:
        os.sched_setscheduler(0, *before)
