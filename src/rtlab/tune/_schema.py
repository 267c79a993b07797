"""The schema of a journal's records: every line is checked before anything acts on it.

A record is one flat JSON object (no nesting). The header names the journal's kind and
root; an intent (``op``) has exactly the fields of its operation, each of its type; an
outcome (``state``) refers to an earlier intent. Paths are relative, of plain names
(no ``..``, see _rootfs.check_rel) and under /proc or /sys — or, in a partition's
journal, under its cgroup mount. A bad record is a ValueError saying what is wrong; the
journal turns it into a one-line UserError naming the line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from rtlab.errors import UserError
from rtlab.system import parse_cpulist
from rtlab.tune._rootfs import LIVE_WRITABLE, check_rel, under

JOURNAL_SCHEMA = 1
COMPARE = ("text", "int", "mask", "list", "choice")
META, CONTROLLER = "partition", "controller"  # partition journals' own ops
PENDING, DONE, REFUSED, UNDOING = "pending", "done", "refused", "undoing"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a partition (a cgroup name)
KIND_RE = re.compile(r"tune|settings|partition-[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_ROOT_BYTES = 4096
TASK_FILES = ("tasks", "cgroup.procs")


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError("not a string")
    return v


def _opt_str(v: Any) -> str | None:
    return None if v is None else _str(v)


def _path(v: Any) -> str:
    return check_rel(v)


def _opt_path(v: Any) -> str | None:
    return None if v is None else _path(v)


def _task_file(v: Any) -> str:
    if _path(v).rsplit("/", 1)[-1] not in TASK_FILES:
        raise ValueError("not a tasks or cgroup.procs file")
    return v


def _pid(v: Any) -> int:
    if type(v) is not int or not 0 < v < 1 << 22:  # PID_MAX_LIMIT
        raise ValueError("not a task ID")
    return v


def parse_cpus(text: str) -> list[int]:
    """A CPU list ("0-3,8"), its numbers bounded as everywhere; ValueError otherwise."""
    try:
        return parse_cpulist(text)
    except UserError as e:
        raise ValueError(str(e)) from None


def _cpus(v: Any) -> str:
    parse_cpus(_str(v))
    return v


def _compare(v: Any) -> str:
    if v not in COMPARE:
        raise ValueError(f"not one of {', '.join(COMPARE)}")
    return v


def _version(v: Any) -> int:
    if type(v) is not int or v not in (1, 2):
        raise ValueError("not 1 or 2")
    return v


def _name(v: Any) -> str:
    if not isinstance(v, str) or not NAME_RE.fullmatch(v):
        raise ValueError("not a partition name")
    return v


Check = Callable[[Any], Any]
WHY: dict[str, Check] = {"check": _str, "why": _str}  # optional on every op
OPS: dict[str, dict[str, Check]] = {
    "file": {"path": _path, "original": _str, "new": _str, "compare": _compare},
    "affinity": {
        "pid": _pid,
        "start": _opt_str,
        "comm": _str,
        "original": _cpus,
        "new": _cpus,
        "compare": _compare,
    },
    "mkdir": {"path": _path},
    "move": {
        "pid": _pid,
        "start": _opt_str,
        "comm": _str,
        "original": _task_file,
        "new": _task_file,
    },
    CONTROLLER: {"path": _path, "controller": _str, "original": _opt_str, "new": _str},
    META: {
        "name": _name,
        "version": _version,
        "mount": _path,
        "rt": _path,
        "hk": _opt_path,
        "rt_cpus": _cpus,
        "hk_cpus": _cpus,
        "mode": _str,
    },
}
KIND_OPS = {"tune": ("file", "affinity"), "partition": (META, "file", "mkdir", "move", CONTROLLER)}
OUTCOMES: dict[str, dict[str, Check]] = {
    DONE: {"readback": _opt_str},
    REFUSED: {"error": _str},
    UNDOING: {},
}


def _fields(rec: dict[str, Any], required: dict[str, Check], optional: dict[str, Check]) -> None:
    for key in rec:
        if key not in required and key not in optional:
            raise ValueError(f"unknown field {key!r}")
    for key, check in required.items():
        if key not in rec:
            raise ValueError(f"no {key!r}")
        try:
            check(rec[key])
        except ValueError as e:
            raise ValueError(f"{key!r}: {e}") from None
    for key, check in optional.items():
        if key in rec:
            try:
                check(rec[key])
            except ValueError as e:
                raise ValueError(f"{key!r}: {e}") from None


def check_header(rec: dict[str, Any], kind: str) -> None:
    """The first record: {"journal": 1, "kind": KIND, "root": "/…", "created_utc": …}."""
    if rec.get("journal") != JOURNAL_SCHEMA or type(rec.get("journal")) is not int:
        raise ValueError(f"not an rtlab journal (schema {JOURNAL_SCHEMA})")
    _fields(rec, {"journal": lambda v: v, "kind": _str, "root": _root, "created_utc": _str}, {})
    if rec["kind"] != kind or not KIND_RE.fullmatch(kind):
        raise ValueError(f"a journal of kind {rec['kind']!r} in the file of {kind!r}")


def _root(v: Any) -> str:
    root = _str(v)
    if not root.startswith("/") or os.path.normpath(root) != root or "\0" in root:
        raise ValueError("not an absolute, normalized path")
    if len(root.encode("utf-8", "surrogatepass")) > MAX_ROOT_BYTES:
        raise ValueError(f"longer than {MAX_ROOT_BYTES} bytes")
    if any(ord(c) < 0x20 for c in root):
        raise ValueError("a control character in the path")
    return root


def check_intent(rec: dict[str, Any], kind: str, live: bool, meta: dict[str, Any] | None) -> None:
    """An intent record of a journal of KIND, for the live root or a tree; META: the
    partition record before it (partition journals)."""
    op = rec.get("op")
    family = "tune" if kind in ("tune", "settings") else "partition"
    if op not in KIND_OPS[family]:
        raise ValueError(f"op {op!r} is not one of a {family} journal's")
    _fields(rec, {"seq": lambda v: v, "op": _str, **OPS[op]}, WHY)
    if op == "affinity" and not live:
        raise ValueError("a task's affinity is changed on the live system only")
    if op == META:
        _check_meta(rec, meta)
        if rec["name"] != kind.partition("-")[2]:
            raise ValueError(f"'name': not the partition of this journal ({kind})")
        return
    if family == "tune":
        if op == "file":
            _within("path", rec["path"], LIVE_WRITABLE)
        return
    if meta is None:
        raise ValueError(f"op {op!r} before the partition record")
    mount: str = meta["mount"]
    if op == "file":
        _within("path", rec["path"], (*LIVE_WRITABLE, mount))
    elif op == "move":
        _within("new", rec["new"], (mount,))
        _within("original", rec["original"], (mount,))
    elif op == "mkdir" and rec["path"] not in (meta["rt"], meta["hk"]):
        raise ValueError(f"'path': /{rec['path']} is not the partition's cgroup")
    elif op == CONTROLLER and rec["path"] != f"{mount}/cgroup.subtree_control":
        raise ValueError(f"'path': not /{mount}/cgroup.subtree_control")


def _within(key: str, path: str, where: tuple[str, ...]) -> None:
    if not under(path, where):
        raise ValueError(f"{key!r}: /{path} is not under " + ", ".join(f"/{p}" for p in where))


def _check_meta(rec: dict[str, Any], earlier: dict[str, Any] | None) -> None:
    mount, name = rec["mount"], rec["name"]
    if rec["rt"] != f"{mount}/{name}":
        raise ValueError(f"'rt': not {mount}/{name}")
    hk = f"{mount}/{name}-hk" if rec["version"] == 1 else None
    if rec["hk"] != hk:
        raise ValueError(f"'hk': not {hk}")
    same = ("name", "version", "mount", "rt", "hk")
    if earlier is not None and any(rec[k] != earlier[k] for k in same):
        raise ValueError("a partition record of another partition")


def check_outcome(rec: dict[str, Any]) -> None:
    state = rec.get("state")
    if state not in OUTCOMES:
        raise ValueError(f"state {state!r} is not one of {', '.join(OUTCOMES)}")
    _fields(rec, {"seq": lambda v: v, "state": _str}, OUTCOMES[state])
