"""The application audit of an `app` or `attach` case, made while the case runs.

When the probe has started measuring, the application's process is found (an attached one
by its name, a started one as the probe's child in the probe's own process group: loads
have groups of their own), and `rtlab audit --pid` is made on it over a window inside the
case's duration. The document (what `rtlab audit --pid --json` prints, with the case's
PIDs and window) is stored beside the case's result, `cases/NNN.app-audit.json`.

On this machine the audit reads the live /proc; on a board or virtual machine the
target is looked at (its /proc/*/stat, to find the process: `Target.processes_now`) and
its probe reads the process (`sysinfo --pid` before and after the window:
`Target.process_root`). There a started program is the child of a process named
rtlab-probe in that probe's process group (its shell's).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab._appcase import APP, ATTACH, app_kind
from rtlab.errors import UnsupportedError, UserError
from rtlab.records import CaseRecord
from rtlab.store import write_json_atomic
from rtlab.system import Root
from rtlab.system._app import MAX_WINDOW_S, MIN_WINDOW_S, pids_of, read_app_facts
from rtlab.system._checks_app import app_document, run_app_audit
from rtlab.units import parse_duration_ns

if TYPE_CHECKING:
    from rtlab.targets import Target

APP_AUDIT_SUFFIX = ".app-audit.json"
APP_AUDIT_SCHEMA = 1
WINDOW_SHARE = 0.5  # of the case's duration: the window starts once the probe measures
FIND_FOR_S = 2.0  # the least time the process is looked for (a started one execs first)
# The probe's progress phase once it measures (its first such line comes a quarter second
# in): a command it starts has been forked by then, so a target's first look finds it.
MEASURING = ("measure",)


PROBE_COMM = "rtlab-probe"


def app_audit_path(document: Path) -> Path:
    """cases/NNN.app-audit.json beside cases/NNN.json."""
    return document.with_name(document.stem + APP_AUDIT_SUFFIX)


def _stat(root: Root, pid: str) -> tuple[int, int, str, str] | None:
    """(ppid, process group, state, comm) of /proc/PID/stat."""
    text = root.read(f"proc/{pid}/stat")
    if not text:
        return None
    head, _, rest = text.rpartition(")")
    f = rest.split()
    try:
        return int(f[1]), int(f[2]), f[0], head.partition("(")[2]
    except (IndexError, ValueError):
        return None


def started_pids(root: Root, parent: int | None) -> list[int]:
    """The program a probe run by PARENT (None: by any process) started: a live child of a
    process named rtlab-probe in that probe's process group (its loads lead groups of their
    own; here the probe leads its group, on a target it is in its shell's). Other children
    of PARENT that lead a group (a virtual machine's QEMU) are not probes."""
    stats = {}
    for name in root.listdir("proc") or []:
        if name.isdigit():
            s = _stat(root, name)
            if s is not None and s[2] not in ("Z", "X"):
                stats[int(name)] = s
    probes = {
        pid: pgrp
        for pid, (ppid, pgrp, _, comm) in stats.items()
        if comm == PROBE_COMM and (parent is None or (ppid == parent and pgrp == pid))
    }
    return sorted(
        pid for pid, (ppid, pgrp, _, _) in stats.items() if ppid in probes and pgrp == probes[ppid]
    )


class CaseAppAudit:
    """The application audit of one case on TARGET: started by the case's first progress
    line, collected (its document) when the case has ended."""

    def __init__(self, target: Target, case: CaseRecord) -> None:
        self.target, self.case = target, case
        self.kind = app_kind(case.params)
        self.doc: dict[str, Any] = {"schema": APP_AUDIT_SCHEMA, "case": case.index}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def progress(self, line: dict[str, Any]) -> None:
        """A progress line of the probe: once it measures, the audit begins."""
        if self._thread is None and line.get("phase") in MEASURING:
            self._thread = threading.Thread(target=self._audit, daemon=True)
            self._thread.start()

    def _find(self, for_s: float) -> tuple[list[int], int]:
        """The program's processes, looked for over FOR_S seconds (at least FIND_FOR_S; on
        a remote target each look is a round trip to its probe), and the looks made."""
        live = self.target.root.live
        parent = os.getpid() if live else None  # there: the child of any rtlab-probe
        until = time.monotonic() + max(FIND_FOR_S, for_s)
        looks = 0
        while not self._stop.is_set():
            root = self.target.processes_now()
            looks += 1
            if self.kind == ATTACH:
                found = pids_of(root, self.case.params[ATTACH])
            else:
                found = started_pids(root, parent)
            if found or time.monotonic() >= until:
                return found, looks
            self._stop.wait(0.02)
        return [], looks

    def _audit(self) -> None:
        duration_s = parse_duration_ns(self.case.params["duration"]) / 1e9
        window_s = min(MAX_WINDOW_S, duration_s * WINDOW_SHARE)
        try:
            if window_s < MIN_WINDOW_S:
                raise UserError(
                    f"the case lasts {duration_s:g} s: too short for a window of "
                    f"{MIN_WINDOW_S:g} s within it"
                )
            began = time.monotonic()
            pids, looks = self._find(duration_s - window_s)  # the window still fits
            if not pids:
                what = self.case.params.get(ATTACH) if self.kind == ATTACH else "its command"
                raise UserError(
                    f"no process of {what} found while the case ran ({looks} looks over "
                    f"{time.monotonic() - began:.1f} s)"
                )
            proot = self.target.process_root(pids)

            def wait(seconds: float) -> None:
                self._stop.wait(seconds)
                proot.refresh()

            facts = read_app_facts(proot, pids, window_s, wait=wait)
            self.doc.update(
                status="done",
                pids=pids,
                window_s=window_s,
                **app_document(facts, run_app_audit(facts)),
            )
        except UnsupportedError as e:
            self.doc.update(status="unavailable", reason=f"application audit: {e}")
        except UserError as e:
            self.doc.update(status="failed", reason=str(e))

    def finish(self, document: Path) -> None:
        """Store the document beside the case's DOCUMENT (the case has ended)."""
        if self._thread is None:
            self.doc.update(status="failed", reason="the probe never reached its measurement")
        else:
            self._thread.join()
        if "status" not in self.doc:  # the audit's thread failed: a bug, said as such
            self.doc.update(status="failed", reason="the application audit ended in an error")
        write_json_atomic(app_audit_path(document), self.doc)

    def abandon(self) -> None:
        """The case did not finish: stop waiting (nothing is stored)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def case_app_audit(target: Target, case: CaseRecord) -> CaseAppAudit | None:
    """The application audit of CASE on TARGET, None when it measures no application."""
    if app_kind(case.params) not in (APP, ATTACH):
        return None
    return CaseAppAudit(target, case)


MAX_APP_AUDIT_BYTES = 16 << 20
MAX_APP_AUDIT_VALUES = 1 << 20
STATUSES = ("FAIL", "WARN", "INFO", "OK")


def read_app_audit(experiment: Path, case: CaseRecord) -> dict[str, Any] | None:
    """cases/NNN.app-audit.json of CASE in the EXPERIMENT directory, None when it has none;
    UserError naming the file and the key when it is damaged."""
    from rtlab._input import load_json, read_regular

    f = experiment / "cases" / f"{case.slug}{APP_AUDIT_SUFFIX}"
    if not f.exists():
        return None
    try:
        doc = load_json(read_regular(str(f), MAX_APP_AUDIT_BYTES), MAX_APP_AUDIT_VALUES)
    except UserError as e:
        raise UserError(f"{f}: {e}") from None
    if not isinstance(doc, dict) or doc.get("status") not in ("done", "failed", "unavailable"):
        raise UserError(f"{f}: 'status' must be done, failed or unavailable")
    findings = doc.get("findings", [])
    if not isinstance(findings, list) or not all(
        isinstance(x, dict) and x.get("status") in STATUSES for x in findings
    ):
        raise UserError(f"{f}: 'findings' must be a list of findings with a status")
    if doc["status"] != "done" and not isinstance(doc.get("reason"), str):
        raise UserError(f"{f}: 'reason' must be a string")
    return doc


def app_audit_lines(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(status, text) lines of an application audit: each finding not OK with its evidence
    and fix, or why there is none."""
    if doc["status"] != "done":
        return [("-", doc["reason"])]
    out = []
    for x in sorted(doc["findings"], key=lambda x: STATUSES.index(x["status"])):
        if x["status"] != "OK":
            out.append((x["status"], f"{x.get('id')}: {x.get('evidence')}; fix: {x.get('fix')}"))
    ok = sum(x["status"] == "OK" for x in doc["findings"])
    pids = ", ".join(str(p) for p in doc.get("pids", []))
    out.append(("OK", f"{ok} checks passed (PID {pids}, window {doc.get('window_s', 0):g} s)"))
    return out
