"""Files under one root, confined to it: every file tune and partition read or write.

A path is relative to the root and made of plain names (``check_rel``): no ``..``,
``.`` or empty component, no leading ``/``, no NUL or control character, at most
MAX_PATH_BYTES. Opening one:

1. its directory is opened (symbolic links on the way are followed: /sys is full of
   them) and where that directory really is, read back from /proc/self/fd, must be
   inside the root: anywhere in a tree; for a write on the live root, under /proc,
   /sys or an allowed cgroup mount only;
2. the last component is opened relative to that directory with O_PATH | O_NOFOLLOW:
   a symbolic link is refused, never followed, and a device is not opened (no driver
   sees an open);
3. it must be a regular file (stat says so for /proc and /sys files too) and, for a
   write in a tree, have no other hard link; only then is it reopened for reading or
   writing, through /proc/self/fd (the same inode, so nothing can be swapped in).

Reads are bounded (MAX_READ_BYTES, or less where the caller says). A write in a tree
truncates, then writes the bytes; on the live root it writes the value at offset 0, as
the kernel takes it. Writes are numbered for crash injection (_crash.py). Every refusal
is an OSError (``Refused``) whose strerror says why, so callers report it like a write
the kernel refused.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from rtlab._input import file_kind
from rtlab.tune import _crash

MAX_PATH_BYTES = 1024
MAX_READ_BYTES = 4 << 20  # a tasks file of 500,000 thread IDs
LIVE_WRITABLE = ("proc", "sys")  # where the live root is written (plus a cgroup mount)


class Refused(OSError):
    """A path or file rtlab does not touch; strerror says why."""

    def __init__(self, why: str) -> None:
        super().__init__(errno.EPERM, why)


def check_rel(rel: object) -> str:
    """REL when it is a relative path of plain names; ValueError saying what is wrong."""
    if not isinstance(rel, str) or not rel:
        raise ValueError("not a path")
    try:
        size = len(os.fsencode(rel))
    except UnicodeError:
        raise ValueError("not a file name (undecodable)") from None
    if size > MAX_PATH_BYTES:
        raise ValueError(f"longer than {MAX_PATH_BYTES} bytes")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in rel):
        raise ValueError("a control character in the path")
    if rel.startswith("/"):
        raise ValueError("an absolute path")
    if any(part in ("", ".", "..") for part in rel.split("/")):
        raise ValueError("a '..', '.' or empty component")
    return rel


def under(rel: str, prefixes: Iterable[str]) -> bool:
    """Whether REL is one of PREFIXES or inside one."""
    return any(rel == p or rel.startswith(p + "/") for p in prefixes)


def kind(mode: int) -> str:
    return file_kind(mode)


def _refusal(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link: not followed"
    return f"{kind(mode)}, not a regular file"


def read_fd(fd: int, limit: int) -> bytes:
    """At most LIMIT bytes of FD, to its end; Refused when it holds more."""
    data = bytearray()
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - len(data)))
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > limit:
            raise Refused(f"larger than {limit} bytes")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        view = view[n:]


class RootFS:
    """ROOT ("/" or a tree) and the prefixes under which it may be written."""

    def __init__(self, root: Path | str, writable: Iterable[str] = ()) -> None:
        self.root = Path(root)
        self.real = os.path.realpath(root)
        self.live = self.real == "/"
        self.writable = tuple(dict.fromkeys([*LIVE_WRITABLE, *writable]))

    def describe(self) -> str:
        return "this system" if self.live else self.real

    # --- opening ------------------------------------------------------------------------

    def _dir(self, rel: str, write: bool) -> tuple[int, str]:
        """(an O_PATH fd of REL's directory, checked to be inside, REL's last name)."""
        try:
            check_rel(rel)
        except ValueError as e:
            raise Refused(f"/{rel}: {e}") from None
        if write and not under(rel, self.writable):
            raise Refused(f"/{rel}: rtlab writes only under "
                          + ", ".join(f"/{p}" for p in self.writable))  # fmt: skip
        parent, _, name = rel.rpartition("/")
        fd = os.open(os.path.join(self.real, parent), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self._check_inside(fd, rel, write)
        except BaseException:
            os.close(fd)
            raise
        return fd, name

    def _check_inside(self, fd: int, rel: str, write: bool) -> None:
        if self.live and not write:
            return  # every file of the live system is inside "/"
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            raise Refused(f"/{rel}: cannot tell where it leads (no /proc/self/fd)") from None
        bases = ["/" + p for p in self.writable] if self.live else [self.real]
        if not any(real == b or real.startswith(b.rstrip("/") + "/") for b in bases):
            raise Refused(f"/{rel}: leads out of {self.describe()} (to {real})")

    def open(self, rel: str, flags: int, write: bool = False) -> int:
        """An fd of the regular file REL opened with FLAGS (see the module's doc)."""
        dfd, name = self._dir(rel, write)
        try:
            pfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        finally:
            os.close(dfd)
        try:
            return _reopen(pfd, flags, f"/{rel}: ", 1 if write and not self.live else 0)
        finally:
            os.close(pfd)

    def open_dir(self, rel: str) -> int:
        """An O_RDONLY fd of the directory REL (for flock), inside the root."""
        dfd, name = self._dir(rel, False)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=dfd)  # fmt: skip
        finally:
            os.close(dfd)
        return fd

    # --- reading ------------------------------------------------------------------------

    def read(self, rel: str, limit: int = MAX_READ_BYTES) -> str:
        """The text of REL (undecodable bytes replaced); OSError when it cannot be read."""
        fd = self.open(rel, os.O_RDONLY)
        try:
            return read_fd(fd, limit).decode("utf-8", errors="replace")
        finally:
            os.close(fd)

    def kind_of(self, rel: str) -> str | None:
        """What REL is: "dir", "file", another kind's name, or None when it does not
        exist (Refused when its directory leads out of the root)."""
        try:
            dfd, name = self._dir(rel, False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        finally:
            os.close(dfd)
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        return "file" if stat.S_ISREG(st.st_mode) else kind(st.st_mode)

    # --- writing ------------------------------------------------------------------------

    def write(self, rel: str, text: str) -> None:
        """Replace REL's value by TEXT (OSError when refused)."""
        data = text.encode()
        n = _crash.begin()
        fd = self.open(rel, os.O_WRONLY, write=True)
        try:
            if not self.live:
                os.ftruncate(fd, 0)
            _crash.at(n, "inside")
            if _crash.torn(n):
                _write_all(fd, data[: len(data) // 2])
                _crash.kill()
            _write_all(fd, data)
        finally:
            os.close(fd)
        _crash.at(n, "after")

    def mkdir(self, rel: str) -> None:
        self._at_dir(rel, lambda name, dfd: os.mkdir(name, 0o777, dir_fd=dfd))

    def rmdir(self, rel: str) -> None:
        self._at_dir(rel, lambda name, dfd: os.rmdir(name, dir_fd=dfd))

    def _at_dir(self, rel: str, op: Callable[[str, int], None]) -> None:
        """OP(name, directory fd) on REL, a write with no inside (a crash point)."""
        n = _crash.begin()
        _crash.atomic(n)
        dfd, name = self._dir(rel, True)
        try:
            op(name, dfd)
        finally:
            os.close(dfd)
        _crash.at(n, "after")


def open_nofollow(path: str | os.PathLike[str], flags: int) -> int:
    """PATH (not a symbolic link, a regular file) opened with FLAGS; never opens a
    device or blocks on a FIFO (see RootFS.open). Refused or another OSError."""
    pfd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return _reopen(pfd, flags, "", 0)
    finally:
        os.close(pfd)


def _reopen(pfd: int, flags: int, name: str, max_links: int) -> int:
    """The O_PATH fd PFD reopened with FLAGS once it is a regular file (with at most
    MAX_LINKS names, when MAX_LINKS is not 0): the same inode, whatever the path is now."""
    st = os.fstat(pfd)
    if not stat.S_ISREG(st.st_mode):
        raise Refused(name + _refusal(st.st_mode))
    if max_links and st.st_nlink > max_links:
        raise Refused(f"{name}has {st.st_nlink - 1} other hard link(s): not written")
    return os.open(f"/proc/self/fd/{pfd}", flags | os.O_NOCTTY | os.O_CLOEXEC)


def read_under(root: Path | str, rel: str, limit: int = MAX_READ_BYTES) -> str | None:
    """The text of ROOT/REL through RootFS, or None when it cannot be read."""
    try:
        return RootFS(root).read(rel, limit)
    except OSError:
        return None
