"""The root the application audit reads on any target: the system as the target's root
has it, and the audited processes' files (/proc/PID/**) and the kernel log (dev/kmsg)
from a snapshot taken again when the window has passed.

On this machine both come from the live system. On a remote target the processes'
files come from `rtlab-probe sysinfo --pid PID…` run there (the files of each process
and of each of its threads, and /dev/kmsg), once before and once after the window; the
system (CPUs, isolation, IRQs and their threads) from the sysinfo document read when
the target was opened."""

from __future__ import annotations

import time
from collections.abc import Callable

from rtlab.system._root import Root


class ProcessRoot:
    """BASE for the system; FETCH() for /proc/PID/** of PIDS and dev/kmsg, taken anew
    by wait(). FETCH may be BASE itself when BASE is live."""

    def __init__(self, base: Root, pids: list[int], fetch: Callable[[], Root]) -> None:
        self.base, self._fetch = base, fetch
        self._own = tuple(f"proc/{p}" for p in pids)
        self.top = fetch()

    @property
    def live(self) -> bool:
        return self.base.live and self.top is self.base

    def _source(self, name: str) -> Root:
        n = name.strip("/")
        if n == "dev/kmsg" or any(n == p or n.startswith(p + "/") for p in self._own):
            return self.top
        return self.base

    def read(self, name: str) -> str | None:
        return self._source(name).read(name)

    def read_gz(self, name: str) -> str | None:
        return self._source(name).read_gz(name)

    def listdir(self, name: str) -> list[str] | None:
        return self._source(name).listdir(name)

    def describe(self) -> str:
        return self.base.describe()

    def refresh(self) -> None:
        """Read the processes' files again (the end of the window)."""
        self.top = self._fetch()

    def wait(self, seconds: float) -> None:
        """Let the window pass, then read the processes' files again."""
        time.sleep(seconds)
        self.refresh()
