"""Find the rtlab-probe binary, ask it what it accepts, check arguments with it, run it,
read its documents."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import IO, Any, NoReturn

from rtlab.errors import InternalError, OutputError, UnsupportedError, UserError
from rtlab.probecall import Outputs, ProbeCall, probe_argv
from rtlab.resultdoc import check_document

#: Version of the probe's result document. 2: `threshold` became `deadline`
#: (params.threshold_ns -> params.deadline_ns, threshold_exceeded -> deadline_exceeded).
#: 3: threads[].lost (raw samples dropped) -> raw_lost; `lost` is a meter's lost events.
RESULT_SCHEMA = 8

# Probe exit codes (docs/result-format.md, README); 5: an output could not be written.
EXIT_OK, EXIT_THRESHOLD, EXIT_USAGE, EXIT_UNSUPPORTED, EXIT_INTERNAL = 0, 1, 2, 3, 4
EXIT_OUTPUT = 5

#: Option types of `rtlab-probe list --json`.
OPTION_TYPES = ("flag", "int", "duration", "cpulist", "policy", "string", "load", "choice")


def find_probe() -> Path:
    """$RTLAB_PROBE, else the rtlab-probe installed beside this Python, else $PATH."""
    env = os.environ.get("RTLAB_PROBE")
    if env:
        path = Path(env)
        if not path.is_file():
            raise UserError(f"RTLAB_PROBE={env}: no such file")
        return path
    beside = Path(sys.executable).parent / "rtlab-probe"
    if beside.is_file():
        return beside
    found = shutil.which("rtlab-probe")
    if found:
        return Path(found)
    raise UserError("rtlab-probe not found: install the package (pip install .) or set RTLAB_PROBE")


# --- what the probe accepts: `rtlab-probe list --json` ---------------------------------


@dataclass(frozen=True)
class ProbeOption:
    """One option of the probe ("--dma-latency DUR"), as the probe describes it."""

    name: str  # canonical, without "--": "dma-latency"
    type: str  # one of OPTION_TYPES
    metavar: str | None = None
    help: str = ""
    min: int | None = None  # int: the value; duration: ns
    max: int | None = None
    step: int | None = None  # the value must be a multiple of it (ns for durations)
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()  # choice: the words accepted

    @property
    def key(self) -> str:
        """The experiment key of this option: "dma_latency"."""
        return self.name.replace("-", "_")

    @property
    def takes_value(self) -> bool:
        return self.type != "flag"


@dataclass(frozen=True)
class ProbeMeter:
    name: str
    summary: str
    options: tuple[ProbeOption, ...]
    explainable: bool = False  # takes --explain (its samples are wake-ups)


@dataclass(frozen=True)
class LoadKind:
    name: str
    syntax: str  # "spin:PCT%[:PERIOD]"
    summary: str


@dataclass(frozen=True)
class Catalog:
    """The meters, options and load kinds one probe build accepts."""

    version: str
    common_options: tuple[ProbeOption, ...]
    meters: tuple[ProbeMeter, ...]
    loads: tuple[LoadKind, ...]
    probe: Path | None = None  # the binary described; None when read from a file

    def meter(self, name: str) -> ProbeMeter | None:
        return next((m for m in self.meters if m.name == name), None)

    @property
    def meter_names(self) -> list[str]:
        return [m.name for m in self.meters]

    def options(self, meter: str) -> tuple[ProbeOption, ...]:
        """The options METER accepts: its own, then the common ones."""
        m = self.meter(meter)
        return (m.options if m else ()) + self.common_options

    def option(self, meter: str, word: str) -> ProbeOption | None:
        """The option of METER named WORD ("interval", or an alias such as "threshold")."""
        for o in self.options(meter):
            if word == o.name or word in o.aliases:
                return o
        return None

    @classmethod
    def from_dict(cls, data: Any, source: str, probe: Path | None = None) -> Catalog:
        """Read the document of `list --json`; UserError when it cannot describe options."""
        if not isinstance(data, dict) or not isinstance(data.get("common_options"), list):
            raise UserError(
                f"{source}: this rtlab-probe is too old to describe its options "
                "(no 'common_options' in `list --json`): rebuild and reinstall it"
            )
        try:
            return cls(
                version=str(data.get("version", "")),
                common_options=tuple(_option(o) for o in data["common_options"]),
                meters=tuple(
                    ProbeMeter(
                        str(m["name"]),
                        str(m.get("summary", "")),
                        tuple(_option(o) for o in m.get("options", [])),
                        m.get("explainable") is True,
                    )
                    for m in data["meters"]
                ),
                loads=tuple(
                    LoadKind(str(k["name"]), str(k.get("syntax", "")), str(k.get("summary", "")))
                    for k in data.get("loads", [])
                ),
                probe=probe,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InternalError(f"{source}: malformed `list --json` ({e!r})") from None


def _option(o: dict) -> ProbeOption:
    kind = str(o["type"])  # a type newer than OPTION_TYPES: its values are taken as strings
    lo, hi, step = ("min_ns", "max_ns", "step_ns") if kind == "duration" else ("min", "max", "step")
    return ProbeOption(
        name=str(o["name"]),
        type=kind,
        metavar=o.get("metavar"),
        help=str(o.get("help", "")),
        min=int(o[lo]) if o.get(lo) is not None else None,
        max=int(o[hi]) if o.get(hi) is not None else None,
        step=int(o[step]) if o.get(step) is not None else None,
        aliases=tuple(str(a) for a in o.get("aliases", [])),
        choices=tuple(str(c) for c in o.get("choices", [])) if kind == "choice" else (),
    )


# (path, mtime, size) -> Catalog: a rebuilt probe is asked again.
_CATALOGS: dict[tuple[str, int, int], Catalog] = {}


def probe_catalog(probe: Path | None = None) -> Catalog:
    """What PROBE (default: find_probe()) accepts, from `rtlab-probe list --json`."""
    path = Path(probe or find_probe())
    try:
        st = path.stat()
    except OSError as e:
        raise UserError(f"{path}: cannot run the probe ({e.strerror})") from None
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _CATALOGS:
        try:
            cp = subprocess.run(
                [str(path), "list", "--json"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise UserError(f"{path}: cannot run the probe ({e})") from None
        try:
            data = json.loads(cp.stdout) if cp.returncode == EXIT_OK else None
        except json.JSONDecodeError:
            data = None
        _CATALOGS[key] = Catalog.from_dict(data, str(path), probe=path)
    return _CATALOGS[key]


def load_catalog(path: Path) -> Catalog:
    """A catalog saved from `rtlab-probe list --json` (tests, offline checks)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: cannot read a probe catalog ({e})") from None
    return Catalog.from_dict(data, str(path))


# --- checking arguments: `rtlab-probe ARGS --check` -----------------------------------


@dataclass(frozen=True)
class Refusal:
    """Why the probe refused a set of arguments."""

    message: str  # one line
    option: str | None  # canonical option name ("interval", "load"), None when not one option
    value: str | None  # the value as given
    exit_code: int  # EXIT_USAGE, EXIT_UNSUPPORTED (e.g. a load's tool missing), ...

    def __str__(self) -> str:
        return self.message


def refusal_of(returncode: int, stdout: str, stderr: str) -> Refusal:
    """Why the probe refused (exit RETURNCODE): its JSON line on STDOUT, else the last
    line of STDERR."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            doc = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("error"), str):
            option, value = doc.get("option"), doc.get("value")
            return Refusal(
                one_line(doc["error"]),
                option if isinstance(option, str) else None,
                value if isinstance(value, str) else None,
                returncode,
            )
        break
    line = (stderr.strip().splitlines() or [f"exit {returncode}"])[-1]
    if line.startswith("rtlab-probe") and ": " in line:  # "rtlab-probe wakeup: --x: why"
        line = line.split(": ", 1)[1]
    return Refusal(one_line(line), None, None, returncode)


def check_call(call: ProbeCall, probe: Path | None = None) -> Refusal | None:
    """Validate a probe call without measuring (loads' tools included): None when the
    probe accepts it, else its refusal."""
    try:
        cp = subprocess.run(
            [str(probe or find_probe()), *probe_argv(call, check=True)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        raise InternalError("rtlab-probe --check did not answer within 60 s") from None
    except OSError as e:
        raise UserError(f"cannot run rtlab-probe ({e.strerror})") from None
    return None if cp.returncode == EXIT_OK else refusal_of(cp.returncode, cp.stdout, cp.stderr)


def one_line(text: str) -> str:
    """TEXT with control characters escaped, so that a message stays on one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# --- result documents ------------------------------------------------------------------


def migrate(doc: dict, source: str) -> dict:
    """Bring a result document to the current schema, step by step."""
    schema = doc.get("schema")
    if not isinstance(schema, int):
        raise UserError(f"{source}: not an rtlab result document (no integer 'schema')")
    if schema > RESULT_SCHEMA:
        raise UserError(f"{source}: schema {schema} is newer than this rtlab ({RESULT_SCHEMA})")
    if schema < 1:
        raise UserError(f"{source}: unknown result schema {schema}")
    if schema == 1:
        doc = _v1_to_v2(doc)
    if doc.get("schema") == 2:
        doc = _v2_to_v3(doc)
    if doc.get("schema") == 3:
        doc = dict(doc, schema=4, explain=None, spikes=[])  # 4 added the spike explanation
    if doc.get("schema") == 4:
        doc = _v4_to_v5(doc)
    if doc.get("schema") == 5:
        doc = dict(doc, schema=6, conditions=None)  # 6 added the run's conditions
    if doc.get("schema") == 6:
        doc = _v6_to_v7(doc)
    if doc.get("schema") == 7:
        doc = _v7_to_v8(doc)
    if not isinstance(doc.get("threads"), list):
        raise UserError(f"{source}: result document has no 'threads' list")
    check_document(doc, source)
    return doc


#: host.virtualization of a document older than schema 5: nobody looked.
UNKNOWN_VIRTUALIZATION = {"kind": "unknown", "hypervisor": "", "signature": "", "source": "none"}


def _v4_to_v5(doc: dict) -> dict:
    """5 added host.virtualization (the hypervisor the probe ran under)."""
    doc = dict(doc, schema=5)
    host = doc.get("host")
    if isinstance(host, dict) and "virtualization" not in host:
        doc["host"] = dict(host, virtualization=dict(UNKNOWN_VIRTUALIZATION))
    return doc


def _v7_to_v8(doc: dict) -> dict:
    """8 added the CPU time split and the load average to `activity` (absent: null)."""
    doc = dict(doc, schema=8)
    activity = doc.get("activity")
    if isinstance(activity, dict):
        doc["activity"] = {"tick_ns": None, "cpu_time_ns": None, "loadavg": None, **activity}
    return doc


#: What a document older than schema 7 says about kernel stacks: none were recorded.
NO_STACKS_BEFORE_7 = "recorded before result schema 7 (no kernel stacks)"


def _v6_to_v7(doc: dict) -> dict:
    """7 added the kernel stack of each spike's main cause (and explain.stacks)."""
    doc = dict(doc, schema=7)
    explain = doc.get("explain")
    if isinstance(explain, dict) and "stacks" not in explain:
        stacks = {"recorded": False, "trigger": None, "reason": NO_STACKS_BEFORE_7, "read": 0}
        doc["explain"] = dict(explain, stacks=stacks)
    spikes = doc.get("spikes")
    if isinstance(spikes, list):
        doc["spikes"] = [
            {
                "cause_stack": None,
                "cause_stack_at_ns": None,
                "cause_stack_truncated": False,
                "cause_stack_unavailable": NO_STACKS_BEFORE_7,
                **s,
            }
            if isinstance(s, dict)
            else s
            for s in spikes
        ]
    return doc


def _v1_to_v2(doc: dict) -> dict:
    """--threshold was renamed --deadline."""
    doc = dict(doc, schema=2)
    if "threshold_exceeded" in doc:
        doc["deadline_exceeded"] = doc.pop("threshold_exceeded")
    params = doc.get("params")
    if isinstance(params, dict) and "threshold_ns" in params:
        doc["params"] = {k: v for k, v in params.items() if k != "threshold_ns"}
        doc["params"]["deadline_ns"] = params["threshold_ns"]
    return doc


def _v2_to_v3(doc: dict) -> dict:
    """threads[].lost counted dropped raw samples: now raw_lost."""
    threads = doc.get("threads")
    if isinstance(threads, list):
        threads = [
            {("raw_lost" if k == "lost" else k): v for k, v in t.items()}
            if isinstance(t, dict)
            else t
            for t in threads
        ]
    return dict(doc, schema=3, threads=threads)


def load_document(path: Path) -> dict:
    try:
        doc = json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError
        raise UserError(f"{path}: not valid JSON ({one_line(str(e))})") from None
    if not isinstance(doc, dict):
        raise UserError(f"{path}: not a JSON object")
    return migrate(doc, str(path))


# --- running it ------------------------------------------------------------------------


@dataclass
class ProbeOutcome:
    returncode: int
    document: Path | None  # None when the probe wrote nothing
    stderr: str
    interrupted: bool


ProgressFn = Callable[[dict], None]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def die_with(parent: int) -> Callable[[], None]:
    """preexec_fn: SIGTERM the child when its parent dies, even by SIGKILL (rtlab's own
    children: a farm's members)."""
    prctl = _libc().prctl  # looked up before fork: the child only calls it

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: no signal will come
            os._exit(EXIT_INTERNAL)

    return preexec


def _start_in(cgroup: str) -> Callable[[], None]:
    """preexec_fn: the child moves itself into CGROUP (a cgroup.procs file) before it
    becomes the probe (exit 3 when it cannot)."""

    def preexec() -> None:
        try:
            fd = os.open(cgroup, os.O_WRONLY)
            os.write(fd, b"0")  # 0: the writing process
            os.close(fd)
        except OSError as e:
            os.write(2, f"cannot start the probe in {cgroup} ({e.strerror})\n".encode())
            os._exit(EXIT_UNSUPPORTED)

    return preexec


def term_as_interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    """A signal handler (SIGTERM) that stops the program as ^C does."""
    raise KeyboardInterrupt


def _lines(stream: IO[str]) -> Iterator[str]:
    yield from iter(stream.readline, "")


def _last_line(stderr: str, default: str) -> str:
    lines = stderr.strip().splitlines()
    return one_line(lines[-1]) if lines else default


def raise_for_exit(returncode: int, stderr: str) -> None:
    """The probe's exit codes 2, 3, 4 and 5 as rtlab's errors, wherever it ran; the last
    line of STDERR says why."""
    if returncode == EXIT_UNSUPPORTED:
        raise UnsupportedError(_last_line(stderr, "exit 3"))
    if returncode == EXIT_USAGE:
        raise UserError(_last_line(stderr, "bad usage"))
    if returncode == EXIT_INTERNAL:
        raise InternalError(_last_line(stderr, "rtlab-probe: internal error (exit 4)"))
    if returncode == EXIT_OUTPUT:
        raise OutputError(_last_line(stderr, "rtlab-probe: an output could not be written"))


def run_probe(
    call: ProbeCall,
    outputs: Outputs,
    on_progress: ProgressFn | None = None,
    probe: Path | None = None,
    cgroup: str | None = None,
) -> ProbeOutcome:
    """Run the probe for CALL on this machine, writing OUTPUTS; feed its progress lines to
    ON_PROGRESS. With CGROUP (a cgroup.procs file) the probe starts in that cgroup.

    The probe runs in its own session so that a terminal's ^C reaches rtlab only;
    rtlab forwards SIGINT/SIGTERM, and the probe still writes an incomplete document.
    Its standard input is a pipe from rtlab and it runs with --stop-on-eof, as on a
    remote target: if rtlab dies (even SIGKILLed) the pipe closes, and the probe stops its
    loads and writes an incomplete document. No Python code runs in the child between
    fork and exec unless CGROUP is given.
    """
    outputs = replace(outputs, stop_on_eof=True)
    cmd = [str(probe or find_probe()), *probe_argv(call, outputs)]
    document = Path(outputs.document)
    interrupted = False
    previous = signal.signal(signal.SIGTERM, term_as_interrupt)
    proc = None
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,  # held open until the probe has ended
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
            preexec_fn=_start_in(cgroup) if cgroup is not None else None,
        )
        assert proc.stdout is not None and proc.stderr is not None  # both PIPE
        try:
            for line in _lines(proc.stdout):
                if on_progress:
                    with contextlib.suppress(json.JSONDecodeError, RecursionError):  # display
                        on_progress(json.loads(line))
        except KeyboardInterrupt:
            interrupted = True
            proc.send_signal(signal.SIGINT)  # the probe still writes an incomplete document
            proc.stdout.read()
        stderr = proc.stderr.read()
        rc = proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if proc is not None and proc.poll() is None:  # interrupted at an unlucky moment
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
    raise_for_exit(rc, stderr)
    return ProbeOutcome(rc, document if document.exists() else None, stderr, interrupted)
