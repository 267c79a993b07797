"""Real kernels in virtual machines: Debian's 6.1 PREEMPT_RT and generic kernels, each
booted once for the session (vm:KERNEL targets, virtme-ng + QEMU), with a boot line
that isolates CPU 1. The guest sees this machine's root file system, so this rtlab and
its probe run there at the same paths.

One guest runs at a time (an emulated guest keeps a host CPU busy even when idle): the
tests on the RT kernel run first, then its guest stops and the generic one boots.

The kernels and QEMU are Debian packages of `make debs`: missing, they are a setup-class
skip (a failure in CI as root). Only a machine that cannot run QEMU at all skips."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rtlab.errors import LostError
from rtlab.probe import find_probe
from rtlab.targets import open_target

from .._skips import need_tool, skip_setup

#: CPU 1 of the 2 guest CPUs is the real-time one.
APPEND = "isolcpus=managed_irq,domain,1 nohz_full=1 rcu_nocbs=1"
RT_CPU = 1
STATE = "/tmp/rtlab-state"  # RTLAB_STATE inside the guest (tune and partition journals)


def release(kind: str) -> str:
    """The newest Debian 6.1 kernel of KIND ("rt" or "generic") installed in /boot."""
    images = sorted(Path("/boot").glob("vmlinuz-*-amd64"))
    rt = [p for p in images if p.name.endswith("-rt-amd64")]
    found = rt if kind == "rt" else [p for p in images if p not in rt]
    if not found:
        package = "linux-image-rt-amd64" if kind == "rt" else "linux-image-amd64"
        skip_setup(f"no {kind} kernel in /boot (Debian package {package}: make debs)")
    return found[-1].name.removeprefix("vmlinuz-")


def vm_url(kind: str, append: str = APPEND) -> str:
    return f"vm:{release(kind)}?cpus=2&memory=1G&append={append}"


@dataclass
class Guest:
    """A booted kernel: its target, and commands run in it."""

    target: object
    release: str

    def sh(self, command: str, check: bool = True) -> str:
        """COMMAND's standard output; its failure is the test's (with its stderr)."""
        try:
            r = self.target.shell(command)  # type: ignore[attr-defined]
        except LostError as e:  # the guest's last console lines say why (a panic, an OOM)
            tail = self.target.machine.log_tail(12)  # type: ignore[attr-defined]
            raise AssertionError(f"{e}; the guest's console: {tail}") from None
        out = r.stdout.decode(errors="replace")
        if check and r.status != 0:
            err = r.stderr.decode(errors="replace").strip()[-800:]
            raise AssertionError(f"in the guest: {command!r} exited {r.status}: {err}")
        return out

    def rtlab(self, *args: str, check: bool = True) -> str:
        """`rtlab ARGS` run in the guest by this very installation."""
        env = f"RTLAB_STATE={STATE} RTLAB_RESULTS=/tmp/rtlab-results"
        return self.sh(f"{env} {shlex.quote(sys.executable)} -m rtlab.cli "
                       + " ".join(shlex.quote(a) for a in args), check)  # fmt: skip

    @property
    def probe(self) -> str:
        return shlex.quote(str(find_probe()))


class _Guests:
    """The one guest booted now, by kind; booting another stops it first."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self.guest: Guest | None = None

    def get(self, kind: str) -> Guest:
        if self.kind != kind:
            self.close()
            if os.geteuid() != 0:
                pytest.skip("booting a guest that measures as root needs root here")
            need_tool("qemu-system-x86_64")
            need_tool("depmod")
            self.guest = Guest(open_target(vm_url(kind)), release(kind))
            self.kind = kind
        assert self.guest is not None
        return self.guest

    def close(self) -> None:
        guest, self.guest, self.kind = self.guest, None, None
        if guest is not None:
            guest.target.close()


@pytest.fixture(scope="session")
def _guests() -> Iterator[_Guests]:
    guests = _Guests()
    try:
        yield guests
    finally:
        guests.close()


@pytest.fixture
def rt_guest(_guests: _Guests) -> Guest:
    return _guests.get("rt")


@pytest.fixture
def generic_guest(_guests: _Guests) -> Guest:
    return _guests.get("generic")


@pytest.fixture(params=["rt", "generic"])
def guest(request) -> Guest:
    return request.getfixturevalue(f"{request.param}_guest")


def _kind(item: pytest.Item) -> int:
    """0: the test needs the RT guest, 1: the generic one, 2: neither."""
    names = getattr(item, "fixturenames", ())
    callspec = getattr(item, "callspec", None)
    kind = callspec.params.get("guest") if callspec is not None else None
    kind = kind or next((k for k in ("rt", "generic") if f"{k}_guest" in names), None)
    return {"rt": 0, "generic": 1}.get(kind, 2)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of this folder, in their places among the others, RT guest's first."""
    here = Path(__file__).parent
    slots = [i for i, item in enumerate(items) if here in item.path.parents]
    ordered = sorted((items[i] for i in slots), key=_kind)  # stable: file order within
    for i, item in zip(slots, ordered, strict=True):
        items[i] = item


SPINNER = Path(__file__).resolve().parents[1] / "probe" / "spinner.py"


def explain_planted(
    g: Guest, name: str, *spinner_args: str, explain_max: int = 40
) -> tuple[int, dict]:
    """Plant tests/probe/spinner.py as NAME (SCHED_FIFO 80 on the RT CPU, 3 ms every
    30 ms, then SPINNER_ARGS), explain a 4 s fifo:50 wakeup run there (the EXPLAIN_MAX
    worst samples over 100 µs), stop it by PID: (its PID, the document)."""
    out = f"/tmp/{name}.out"
    spin = (
        f"{shlex.quote(sys.executable)} {shlex.quote(str(SPINNER))} {RT_CPU} 80 3000 30 "
        f"{name} {' '.join(spinner_args)} >{out} 2>&1 & echo $!"
    )
    pid = int(g.sh(spin).strip())
    try:
        g.sh(f"for i in $(seq 100); do grep -q ready {out} && break; sleep 0.1; done")
        g.sh(
            f"{g.probe} wakeup --cpus {RT_CPU} --policy fifo:50 --duration 4s "
            f"--explain 100us --explain-max {explain_max} --json /tmp/{name}.json --quiet"
        )
    finally:
        g.sh(f"kill {pid}", check=False)
    return pid, json.loads(g.sh(f"cat /tmp/{name}.json"))


def explained_spikes(doc: dict) -> list[dict]:
    """The spikes of a probe document whose --explain worked, each one's causes and its
    unexplained rest summing to its latency."""
    assert doc["explain"]["status"] == "ok", doc["explain"]
    spikes = doc["spikes"]
    assert spikes, "no sample above the --explain threshold with a spinner on the CPU"
    for s in spikes:
        assert sum(c["ns"] for c in s["causes"]) + s["unexplained_ns"] == s["latency_ns"]
    return list(spikes)
