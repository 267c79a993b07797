"""The probe on a target, over any transport that runs shell commands there.

A session keeps one channel open for its whole life (the guard): it makes the private
directory (`mktemp -d`), says the target's architecture, and removes the directory when
the channel closes, so that a lost connection leaves nothing behind either. The probe is
copied into that directory and every case runs there with `--stop-on-eof`: when its
channel closes (rtlab interrupted, connection lost) the probe stops and ends its loads.
A case runs in a `sh -s` channel opened while the previous case ran, so that the login
shell's start (its rc files can take a quarter of a second) is not paid between cases.

Every command sent is POSIX shell with every argument quoted (`shlex.quote`): no
experiment value can run a command there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rtlab._input import load_json
from rtlab.errors import LostError, UnsupportedError, UserError
from rtlab.probe import Catalog, ProbeOutcome, Refusal, one_line, raise_for_exit, refusal_of
from rtlab.probecall import Outputs, ProbeCall, probe_argv
from rtlab.system import SnapshotRoot, snapshot_from_bytes
from rtlab.targets._probes import probe_for
from rtlab.targets._spec import TargetSpec

#: Ends the progress lines of a case; the exit status follows, then the document.
MARK = b"rtlab-probe-exit "
#: The guard: a private directory that lives as long as the channel (stdin open).
GUARD = (
    'd=$(mktemp -d "${TMPDIR:-/tmp}/rtlab-XXXXXX") || exit 1; '
    'printf "rtlab-guard %s %s\\n" "$(uname -m)" "$d"; '
    'cat >/dev/null; rm -rf "$d" 2>/dev/null || { sleep 1; rm -rf "$d"; }'
)
_RAW_NAME = re.compile(r"[0-9]{3}\.raw(\.[0-9]{1,4})?")
EXIT_NO_DIR = 125  # the private directory is gone
MAX_CATALOG_VALUES = 1 << 16  # `rtlab-probe list --json` has about 1,000 values
MAX_PROCESSES_BYTES = 64 << 20  # /proc/*/stat of every process: ~300 bytes each


def quote(args: list[str]) -> str:
    """ARGS as one POSIX shell command line: each word literal."""
    return " ".join(shlex.quote(a) for a in args)


class Channel(Protocol):
    """One command running on the target."""

    async def readline(self) -> bytes: ...  # b"" at the end
    async def read(self) -> bytes: ...
    def write(self, data: bytes) -> None: ...
    def write_eof(self) -> None: ...
    async def finish(self) -> tuple[int | None, bytes]: ...  # (status or None if lost, stderr)


class Transport(Protocol):
    label: str

    async def open(self, command: str) -> Channel: ...
    async def close(self) -> None: ...


@dataclass
class Result:
    status: int | None
    stdout: bytes
    stderr: bytes

    def last_error(self, default: str) -> str:
        lines = self.stderr.decode(errors="replace").strip().splitlines()
        return one_line(lines[-1]) if lines else default


class Session:
    """The probe in its private directory on one target."""

    def __init__(self, spec: TargetSpec, transport: Transport) -> None:
        self.spec, self.t = spec, transport
        self.label = transport.label
        self.arch = ""
        self.dir = ""
        self.exe = ""
        self.version = ""
        self.local_probe: Path | None = None
        self._guard: Channel | None = None
        self._spare: asyncio.Future[Channel] | None = None

    async def run(self, command: str, stdin: bytes | None = None) -> Result:
        chan = await self.t.open(command)
        if stdin is not None:
            chan.write(stdin)
        chan.write_eof()
        out = await chan.read()
        status, err = await chan.finish()
        if status is None:
            raise LostError(f"connection to {self.label} lost")
        return Result(status, out, err)

    async def prepare(self) -> None:
        """Make the private directory, copy the probe for the target's architecture."""
        self._guard = await self.t.open(GUARD)
        while line := await self._guard.readline():  # (a chatty login shell may come first)
            if line.startswith(b"rtlab-guard "):
                _, self.arch, self.dir = line.decode(errors="replace").rstrip("\n").split(" ", 2)
                break
        if not self.arch or not self.dir.startswith("/"):
            status, err = await self._guard.finish()
            why = Result(status, b"", err).last_error(f"exit {status}")
            raise UnsupportedError(f"{self.label}: cannot make a private directory there ({why})")
        if self.spec.target_probe:
            self.exe = self.spec.target_probe
            got = await self.run(f"{quote([self.exe])} --version")
            where = f"{self.exe} on the target"
        else:
            self.local_probe = probe_for(self.spec, self.arch)
            self.exe = f"{self.dir}/rtlab-probe"
            data = self.local_probe.read_bytes()
            q = shlex.quote(self.exe)
            got = await self.run(f"cat > {q} && chmod 700 {q} && {q} --version", data)
            where = f"{self.local_probe} (copied for {self.arch})"
        if got.status != 0:
            raise UnsupportedError(
                f"{self.label}: the probe {where} does not run there "
                f"({got.last_error(f'exit {got.status}')}): give a static build for "
                f"{self.arch} (probe = PATH in targets.toml, see docs/targets.md)"
            )
        self.version = got.stdout.decode(errors="replace").strip()
        self._spare = asyncio.ensure_future(self.t.open("sh -s"))

    async def _shell(self) -> Channel:
        """A `sh -s` waiting for its script; the next one is started at once."""
        spare, self._spare = self._spare, None
        chan = await spare if spare is not None else await self.t.open("sh -s")
        self._spare = asyncio.ensure_future(self.t.open("sh -s"))
        return chan

    async def catalog(self) -> Catalog:
        got = await self.run(f"{quote([self.exe])} list --json")
        try:
            data = load_json(got.stdout, MAX_CATALOG_VALUES) if got.status == 0 else None
        except UserError:
            data = None
        return Catalog.from_dict(data, f"{self.label}: rtlab-probe")

    async def snapshot(self) -> SnapshotRoot:
        """What `rtlab-probe sysinfo` reads there: the target's /proc and /sys."""
        got = await self.run(f"{quote([self.exe])} sysinfo --json -")
        if got.status != 0:
            why = got.last_error(f"exit {got.status}")
            raise UnsupportedError(f"{self.label}: rtlab-probe sysinfo failed ({why})")
        return snapshot_from_bytes(got.stdout, f"{self.label}: rtlab-probe sysinfo")

    async def processes(self) -> SnapshotRoot:
        """/proc/PID/stat of every process there, by one `cat`: a look for a process, far
        quicker than a whole sysinfo on a slow target (the files of processes that end
        meanwhile are missing, not an error)."""
        got = await self.run("cat /proc/[0-9]*/stat 2>/dev/null")
        if len(got.stdout) > MAX_PROCESSES_BYTES:
            raise UnsupportedError(f"{self.label}: /proc/*/stat over {MAX_PROCESSES_BYTES} bytes")
        files = {}
        for line in got.stdout.decode(errors="replace").splitlines():
            pid = line.partition(" ")[0]
            if pid.isdigit() and " (" in line:
                files[f"/proc/{pid}/stat"] = line
        if not files:
            why = got.last_error(f"exit {got.status}")
            raise UnsupportedError(f"{self.label}: cannot read /proc/*/stat ({why})")
        return SnapshotRoot(files, source=f"{self.label}: /proc/*/stat")

    async def process_snapshot(self, pids: list[int]) -> SnapshotRoot:
        """The files of processes PIDS and the kernel log there (`rtlab-probe sysinfo
        --pid`), for the application audit."""
        args = [self.exe, "sysinfo", "--json", "-"]
        for pid in pids:
            args += ["--pid", str(pid)]
        got = await self.run(quote(args))
        if got.status != 0:
            why = got.last_error(f"exit {got.status}")
            raise UnsupportedError(f"{self.label}: rtlab-probe sysinfo --pid failed ({why})")
        return snapshot_from_bytes(got.stdout, f"{self.label}: rtlab-probe sysinfo --pid")

    async def check_all(self, calls: list[ProbeCall]) -> dict[ProbeCall, Refusal | None]:
        """`rtlab-probe ... --check` of each call, in one script: up to the first refusal."""
        exe, lines = shlex.quote(self.exe), [f"cd {shlex.quote(self.dir)} || exit {EXIT_NO_DIR}"]
        for i, call in enumerate(calls):
            check = f"{exe} {quote(probe_argv(call, check=True))} </dev/null >/dev/null 2>&1"
            lines.append(f"{check} || {{ echo {i}; exit 0; }}")
        lines.append("echo ok")
        got = await self.run("sh -s", ("\n".join(lines) + "\n").encode())
        answer = got.stdout.decode(errors="replace").strip()
        if got.status != 0 or not (answer == "ok" or answer.isdigit()):
            why = got.last_error(f"exit {got.status}")
            raise UnsupportedError(f"{self.label}: cannot check the cases there ({why})")
        done = len(calls) if answer == "ok" else int(answer)
        out: dict[ProbeCall, Refusal | None] = {c: None for c in calls[:done]}
        if done < len(calls):
            out[calls[done]] = await self.check(calls[done])
        return out

    async def check(self, call: ProbeCall) -> Refusal | None:
        argv = [self.exe, *probe_argv(call, check=True)]
        got = await self.run(f"cd {shlex.quote(self.dir)} && {quote(argv)}")
        if got.status == 0:
            return None
        assert got.status is not None
        stdout, stderr = got.stdout.decode(errors="replace"), got.stderr.decode("utf-8", "replace")
        return refusal_of(got.status, stdout, stderr)

    async def run_case(
        self,
        call: ProbeCall,
        document: Path,
        raw: bool,
        on_progress: Callable[[dict[str, Any]], None] | None,
        stop: asyncio.Event,
    ) -> ProbeOutcome:
        """Run one case there and bring its document (and, with RAW, its raw files) back
        to DOCUMENT's directory. STOP set: the probe's stdin is closed, it stops and the
        outcome says interrupted. LostError when the connection goes."""
        name = document.name
        raw_name = f"{document.stem}.raw" if raw else None
        outputs = Outputs(name, raw_name, stop_on_eof=True)
        doc = shlex.quote(name)
        script = (
            f"cd {shlex.quote(self.dir)} || exit {EXIT_NO_DIR}; "
            f"{quote([self.exe, *probe_argv(call, outputs)])}; "
            f"rc=$?; printf '\\n{MARK.decode()}%s\\n' \"$rc\"; cat {doc} 2>/dev/null; "
            f'rm -f {doc}; exit "$rc"\n'
        )
        chan = await self._shell()
        chan.write(script.encode())  # its stdin stays open: closing it stops the probe
        closer = asyncio.ensure_future(_eof_when(stop, chan))
        rc: int | None = None
        try:
            while line := await chan.readline():
                if line.startswith(MARK):
                    rc = int(line[len(MARK) :].strip() or b"-1")
                    break
                if on_progress and line.strip():
                    with contextlib.suppress(ValueError, RecursionError):  # display only
                        on_progress(json.loads(line))
            data = await chan.read() if rc is not None else b""
            status, err = await chan.finish()
        finally:
            closer.cancel()
        stderr = err.decode(errors="replace")
        if rc is None:
            if status is None or status == EXIT_NO_DIR:
                raise LostError(f"connection to {self.label} lost")
            rc = status
        raise_for_exit(rc, stderr)
        written = None
        if data.strip():
            document.write_bytes(data)
            written = document
            if raw:
                await self._pull_raw(data, document.parent)
        return ProbeOutcome(rc, written, stderr, stop.is_set())

    async def _pull_raw(self, doc_bytes: bytes, into: Path) -> None:
        try:
            threads = json.loads(doc_bytes).get("threads") or []
        except (ValueError, AttributeError):
            return  # the document's reader says what is wrong with it
        for t in threads:
            name = Path(str(t.get("raw_file") or "")).name if isinstance(t, dict) else ""
            if not _RAW_NAME.fullmatch(name):
                continue
            path = shlex.quote(f"{self.dir}/{name}")
            got = await self.run(f"cat {path} && rm -f {path}")
            if got.status == 0:
                (into / name).write_bytes(got.stdout)

    async def close(self) -> None:
        """Remove the private directory (the guard ends) and close the connection."""
        try:
            if self._spare is not None:
                spare, self._spare = self._spare, None
                if spare.done() and not spare.cancelled() and spare.exception() is None:
                    spare.result().write_eof()  # its sh ends
                else:
                    spare.cancel()
            if self._guard is not None:
                self._guard.write_eof()
                with contextlib.suppress(LostError, TimeoutError):
                    await asyncio.wait_for(self._guard.finish(), 10)
        finally:
            await self.t.close()


async def _eof_when(stop: asyncio.Event, chan: Channel) -> None:
    await stop.wait()
    chan.write_eof()
