"""Experiment settings around each case: written through the ``settings`` journal before
the case, restored (byte for byte) after it.

The journal (``tune/settings.jsonl`` in the state directory) exists only while a case's
settings are in effect, and a lock (``tune/settings.lock``, flock) is held meanwhile. A
run killed in a case leaves the journal behind with the lock released: the next
`rtlab run` and `rtlab tune reset` see that and put the originals back, as `rtlab tune
reset` does after a killed `tune apply`. Before the first case every value of the run is
tried once (written and put back at once, journalled like the others), so a value the
kernel refuses stops the run before it starts; a refusal in the middle of the run puts
back what the case had changed and stops it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from rtlab.errors import SettingError, UnsupportedError, UserError
from rtlab.tune._apply import (
    ALREADY,
    CHANGED,
    GONE,
    REFUSED_NOW,
    RESTORED,
    Changer,
    Outcome,
    normalize,
)
from rtlab.tune._journal import Journal
from rtlab.tune._settings import RT_RUNTIME, SettingWrite

KIND = "settings"
LOCK_NAME = "settings.lock"
SayFn = Callable[[str], None]


def _label(root: Path) -> str:
    r = root.resolve()
    return "/" if r == Path("/") else str(r)


@contextlib.contextmanager
def _locked(where: Path | None, what: str) -> Iterator[None]:
    """Hold the settings lock; UserError when a running `rtlab run` holds it."""
    fd = _try_lock(where)
    if fd is None:
        raise SettingError(
            f"{what}: another rtlab run is changing settings now (it puts them back "
            "after its case); wait for it or stop it"
        )
    try:
        yield
    finally:
        os.close(fd)


def _try_lock(where: Path | None) -> int | None:
    """The lock's descriptor, held; None when someone else holds it."""
    path = Journal.path_for(KIND, where).with_name(LOCK_NAME)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as e:
        raise UserError(f"{path}: cannot open the settings lock ({e.strerror or e})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        raise UserError(f"{path}: cannot lock ({e.strerror or e})") from None
    return fd


def check_writes(ws: list[SettingWrite], root: Path) -> None:
    """Refuse, before anything is written, a file that is missing or read-only, and two
    keys of one case writing one file. UserError naming the key."""
    seen: dict[str, str] = {}
    for w in ws:
        other = seen.setdefault(w.path, w.key)
        if other != w.key:
            raise UserError(f"{w.key} and {other} both set /{w.path}: keep one of them")
        what = "no such sysctl" if w.path.startswith("proc/sys/") else "no such file"
        try:
            st = os.stat(root / w.path)
        except OSError as e:
            raise UserError(f"{w.key}: {what} on this system (/{w.path}: "
                            f"{e.strerror or e})") from None  # fmt: skip
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"{w.key}: /{w.path} is not a file")
        if not st.st_mode & stat.S_IWUSR:  # proc and sysfs: root is held to the owner's bits
            raise UserError(f"{w.key}: /{w.path} is read-only")


def _why(w: SettingWrite, detail: str) -> str:
    hint = ""
    if w.path == RT_RUNTIME or w.path.endswith("/cpu.rt_runtime_us"):
        hint = (
            " (it must not exceed kernel.sched_rt_period_us, and with CONFIG_RT_GROUP_SCHED "
            "the real-time runtime given to cgroups, or SCHED_DEADLINE reservations, "
            "must still fit in it)"
        )
    return f"{w.key} = {w.new}: the kernel refuses it ({detail}){hint}"


class CaseSettings:
    """Settings written under ROOT (the live system, or a tree in the tests) through the
    journal in the state directory WHERE (default: $RTLAB_STATE, else /var/lib/rtlab)."""

    def __init__(self, root: Path = Path("/"), where: Path | None = None) -> None:
        self.root = Path(root)
        self.where = where
        self.live = _label(self.root) == "/"

    def journal_path(self) -> Path:
        return Journal.path_for(KIND, self.where)

    def _need_root(self) -> None:
        if self.live and os.geteuid() != 0:
            raise UnsupportedError("experiment settings change kernel settings: run it as root")

    # --- recovery -----------------------------------------------------------------------

    def leftover(self) -> list[Outcome] | None:
        """Put back what a killed run left in effect (newest first); the outcomes, or
        None when there is nothing to put back or a running rtlab run owns it."""
        path = self.journal_path()
        if not path.exists():
            return None
        fd = _try_lock(self.where)
        if fd is None:
            return None
        try:
            j = Journal.load(path)
            if j is None:
                Journal.clear_torn(path)
                return None
            root = j.header.get("root")
            if not isinstance(root, str) or not root.startswith("/"):
                raise UserError(f"{path}: the journal names no root directory")
            changer = Changer(Path(root), j)
            outs = changer.reset()
            for o in outs:
                if o.state == RESTORED:
                    o.current = changer.read(o.target)  # what is there now, not what was
            return outs
        finally:
            os.close(fd)

    def recover(self, say: SayFn) -> None:
        """Before a run: settings left by a killed run are put back (said so); UserError
        when some cannot be."""
        if self.live and os.geteuid() != 0:
            if self.journal_path().exists():
                say(f"warning: settings of an interrupted run may still be in effect "
                    f"({self.journal_path()}): run `rtlab tune reset` as root")  # fmt: skip
            return
        outs = self.leftover()
        if outs is None:
            return
        left = [o for o in outs if o.state not in (RESTORED, GONE)]
        if left:
            raise UserError(
                f"settings left by an interrupted run could not all be put back "
                f"({', '.join(f'/{o.target}: {o.state}' for o in left[:3])}): see "
                "`rtlab tune status`"
            )
        say(f"settings left by an interrupted run put back ({len(outs)} change(s))")

    # --- applying -----------------------------------------------------------------------

    def trial(self, cases: list[list[SettingWrite]]) -> None:
        """Make each distinct case's writes once and put them back at once: SettingError
        (with nothing left changed) for the first one the kernel refuses."""
        todo = [list(ws) for ws in dict.fromkeys(tuple(ws) for ws in cases if ws)]
        if not todo:
            return
        self._need_root()
        with _locked(self.where, "settings"):
            for ws in todo:
                with self._applying(ws):
                    pass

    @contextlib.contextmanager
    def applied(self, writes: list[SettingWrite]) -> Iterator[list[Outcome]]:
        """WRITES in effect inside the block (journalled first), put back after it, also
        on ^C and errors. SettingError when one is refused (the others put back)."""
        if not writes:
            yield []
            return
        self._need_root()
        with _locked(self.where, "settings"), self._applying(writes) as outs:
            yield outs

    @contextlib.contextmanager
    def _applying(self, writes: list[SettingWrite]) -> Iterator[list[Outcome]]:
        journal = Journal.open_or_create(KIND, _label(self.root), self.where)
        changer = Changer(self.root, journal)
        try:
            outs = [self._write(changer, w) for w in writes]
            yield outs
        finally:
            self._restore(changer)

    def _write(self, changer: Changer, w: SettingWrite) -> Outcome:
        o = changer.file(w.path, w.new, compare=w.compare, check=w.key, why="experiment setting")
        if o.state == REFUSED_NOW:
            raise SettingError(_why(w, o.detail))
        if o.state not in (CHANGED, ALREADY):
            raise SettingError(f"{w.key}: /{w.path} {o.detail}")
        if o.state == CHANGED and normalize(w.compare, o.current) != normalize(w.compare, w.new):
            raise SettingError(_why(w, f"it holds {(o.current or '').strip()!r} instead"))
        return o

    def _restore(self, changer: Changer) -> None:
        outs = changer.reset()
        left = [o for o in outs if o.state not in (RESTORED, GONE)]
        if left:
            raise SettingError(
                "experiment settings not put back: "
                + ", ".join(f"/{o.target} ({o.state}{': ' + o.detail if o.detail else ''})"
                            for o in left[:3])
                + f"; the journal {changer.journal.path} keeps them for `rtlab tune reset`"
            )  # fmt: skip
