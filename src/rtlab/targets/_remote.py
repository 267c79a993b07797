"""A target reached over a transport (SSH, labgrid), opened for one command (`rtlab run
--target`, `rtlab audit --target`).

The SSH session is asynchronous (asyncssh): it runs on an event loop in a thread of its
own, and the CLI and the runner call it as they call the local probe. A case's progress
lines come back to the calling thread; ^C or SIGTERM there closes the probe's channel,
so the probe stops and the case is reported interrupted, as a local one is.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from rtlab.probe import Catalog, ProbeOutcome, Refusal
from rtlab.probecall import ProbeCall
from rtlab.records import CaseRecord
from rtlab.system import Root, SnapshotRoot, parse_cpulist
from rtlab.system._approot import ProcessRoot
from rtlab.targets._base import CheckFn, ProgressFn, Target
from rtlab.targets._session import Result, Session
from rtlab.targets._spec import LABGRID, TargetSpec

T = TypeVar("T")
_DONE = object()


async def open_session(spec: TargetSpec, accept_new_host_key: bool = False) -> Session:
    """Connect to SPEC and copy the probe there; UnsupportedError (exit 3) when it cannot."""
    if spec.kind == LABGRID:
        from rtlab.targets._labgrid import connect as connect_labgrid

        transport: Any = await connect_labgrid(spec)
    else:
        from rtlab.targets._ssh import connect

        transport = await connect(spec, accept_new_host_key)
    session = Session(spec, transport)
    try:
        await session.prepare()
    except BaseException:
        await session.close()
        raise
    return session


class Remote(Target):
    """One target, its probe's catalog and its system (sysinfo), for synchronous callers."""

    def __init__(
        self, spec: TargetSpec, accept_new_host_key: bool = False, farm: str | None = None
    ) -> None:
        self.spec, self.name, self.farm = spec, spec.short, farm
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.session: Session | None = None
        try:
            self.session = self._call(open_session(spec, accept_new_host_key))
            self._catalog, self._root = self._call(self._describe())
        except BaseException:
            self.close()
            raise

    async def _describe(self) -> tuple[Any, SnapshotRoot]:
        assert self.session is not None
        return await asyncio.gather(self.session.catalog(), self.session.snapshot())

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result()
        except KeyboardInterrupt:
            fut.cancel()
            raise

    @property
    def root(self) -> Root:
        return self._root

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    @property
    def rt_cpus(self) -> list[int] | None:
        return parse_cpulist(self.spec.rt_cpus) if self.spec.rt_cpus else None

    @property
    def id_name(self) -> str | None:
        return self.name

    def processes_now(self) -> Root:
        """Each process's /proc/PID/stat there, read now."""
        assert self.session is not None
        return self._call(self.session.processes())

    def process_root(self, pids: list[int]) -> ProcessRoot:
        """The processes' files from the target's probe (`sysinfo --pid`), each time."""
        assert self.session is not None
        session = self.session
        return ProcessRoot(self._root, pids, lambda: self._call(session.process_snapshot(pids)))

    def checker(self, calls: list[ProbeCall]) -> CheckFn:
        """The check of validate_with_probe, answered by the target's probe: every distinct
        call checked there in one go."""
        assert self.session is not None
        session = self.session
        answers = self._call(session.check_all(list(dict.fromkeys(calls))))

        def check(call: ProbeCall) -> Refusal | None:
            if call not in answers:
                answers[call] = self._call(session.check(call))
            return answers[call]

        return check

    def record(self) -> dict[str, Any]:
        """What an experiment's manifest keeps of its target (`--resume` reconnects)."""
        assert self.session is not None
        s = self.session
        probe = s.spec.target_probe or (str(s.local_probe) if s.local_probe else None)
        return {
            "name": self.name,
            "url": self.spec.url,
            "spec": self.spec.to_dict(),
            "arch": s.arch,
            "probe": probe,
            "probe_version": s.version,
            "farm": self.farm,
        }

    def run_case(
        self,
        case: CaseRecord,
        call: ProbeCall,
        document: Path,
        raw: Path | None,
        on_progress: ProgressFn | None = None,
    ) -> ProbeOutcome:
        """One case on the target; its raw files come back beside DOCUMENT."""
        assert self.session is not None
        lines: queue.SimpleQueue[Any] = queue.SimpleQueue()
        stop = asyncio.Event()
        fut = asyncio.run_coroutine_threadsafe(
            self.session.run_case(call, document, raw is not None, lines.put, stop), self._loop
        )
        fut.add_done_callback(lambda _: lines.put(_DONE))
        stopping = False
        while True:
            try:
                item = lines.get(timeout=0.2)
            except queue.Empty:
                continue
            except KeyboardInterrupt:  # ^C, or SIGTERM through the runner
                if stopping:
                    fut.cancel()
                    raise
                stopping = True
                self._loop.call_soon_threadsafe(stop.set)
                continue
            if item is _DONE:
                break
            if on_progress is not None:
                on_progress(item)
        return fut.result()

    def shell(self, command: str, stdin: bytes | None = None) -> Result:
        """Run a POSIX shell COMMAND there (every word quoted by the caller): its status,
        output and errors. LostError when the connection goes."""
        assert self.session is not None
        return self._call(self.session.run(command, stdin))

    def close(self) -> None:
        """Remove the private directory there, close the connection, end the thread."""
        try:
            if self.session is not None and self._loop.is_running():
                fut = asyncio.run_coroutine_threadsafe(self.session.close(), self._loop)
                try:
                    fut.result(timeout=30)
                except Exception:  # closing is best effort: the guard removes the directory
                    fut.cancel()
            self.session = None
        finally:
            if self._loop.is_running():
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(timeout=10)
            if not self._loop.is_running():
                self._loop.close()
