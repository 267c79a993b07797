"""The compiled passes over int64 samples (src/scan/scan.c, ``librtlabscan.so``).

`Scanner` holds the sample arrays and runs the passes of the exact statistics in C, in
up to `MAX_THREADS` threads (ctypes releases the GIL during the call). One pass gives
the `Moments` (count, min, max, exact sum and sum of squares, samples above a deadline,
the probe's bucket histogram) and the sub-bin counts of a few value intervals, or only
the latter (`Scanner.scan`, `Scanner.moments`, `Scanner.refine`); `Scanner.pilot` reads
runs of samples spread over the case. A read-only ``np.memmap`` is read in place and its
pages are dropped from the process after each block, so memory stays bounded whatever
the file size. Without the library (rtlab run from its source tree, not installed) the
exact statistics are refused in one line.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from rtlab.analysis._hist import NBUCKETS
from rtlab.errors import InternalError, UnsupportedError

LIBRARY = "librtlabscan.so"
MAX_THREADS = 8  # memory bandwidth, not the CPU count, bounds the speed
MIN_PER_THREAD = 1 << 20  # samples: fewer are not worth a thread
MAX_SUBBINS = 1 << 16  # a refined interval is split into at most this many sub-bins
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


class _Seg(ctypes.Structure):
    _fields_ = (("data", ctypes.c_void_p), ("count", ctypes.c_int64), ("release", ctypes.c_int64))


class _Moments(ctypes.Structure):
    _fields_ = (
        ("count", ctypes.c_int64),
        ("min", ctypes.c_int64),
        ("max", ctypes.c_int64),
        ("sum", ctypes.c_uint64 * 2),
        ("sumsq", ctypes.c_uint64 * 3),
        ("above", ctypes.c_int64),
        ("hist", ctypes.c_uint64 * (NBUCKETS + 1)),
    )


class _Cell(ctypes.Structure):
    _fields_ = (
        ("lo", ctypes.c_int64),
        ("hi", ctypes.c_int64),
        ("bucket", ctypes.c_int32),
        ("shift", ctypes.c_int32),
        ("counts", ctypes.c_void_p),
    )


@cache
def _library() -> ctypes.CDLL:
    path = Path(__file__).with_name(LIBRARY)
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise UnsupportedError(
            f"exact statistics need {path}, built with rtlab ({e}): reinstall rtlab"
        ) from None
    lib.scan_pass.argtypes = [
        ctypes.POINTER(_Seg),
        ctypes.c_int,
        ctypes.c_int64,
        ctypes.c_int,
        ctypes.c_int64,
        ctypes.POINTER(_Moments),
        ctypes.POINTER(_Cell),
        ctypes.c_int,
    ]
    lib.scan_pass.restype = ctypes.c_int
    return lib


def _releasable(a: np.ndarray) -> bool:
    """True when A lies in a read-only shared file mapping (np.memmap mode "r"), whose
    pages can be dropped after reading and fault back in from the page cache."""
    mm = getattr(a, "_mmap", None)
    return isinstance(a, np.memmap) and isinstance(mm, mmap.mmap) and a.mode == "r"


def _threads(total: int) -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_THREADS, total // MIN_PER_THREAD))


@dataclass(frozen=True)
class Moments:
    """What one pass over every sample gives (`Scanner.moments`)."""

    count: int
    min: int
    max: int
    sum: int  # exact
    sum_squares: int  # exact
    above: int  # samples > the deadline
    hist: np.ndarray  # int64 counts by probe bucket index, NBUCKETS = overflow


@dataclass(frozen=True)
class Interval:
    """A closed value interval [lo, hi] inside probe bucket ``bucket``, to split into
    sub-bins of 2^shift ns (at most `MAX_SUBBINS` of them)."""

    lo: int
    hi: int
    bucket: int

    @property
    def shift(self) -> int:
        return max(0, (self.hi - self.lo).bit_length() - MAX_SUBBINS.bit_length() + 1)

    @property
    def bins(self) -> int:
        return ((self.hi - self.lo) >> self.shift) + 1


class Scanner:
    """The samples of one case (one array or several pooled) and the passes over them.

    Arrays that are not contiguous, aligned, native int64 are converted once, whole,
    here; the raw files of `rtlab.rawfile.open_samples` never are (their header is 64
    bytes). ``block`` is the number of
    samples each thread reads between two page releases; ``threads`` defaults to the
    CPUs this process may use (at most `MAX_THREADS`, one per `MIN_PER_THREAD` samples).
    """

    def __init__(
        self, arrays: Sequence[np.ndarray], block: int = 1 << 20, threads: int | None = None
    ) -> None:
        if block < 1:
            raise ValueError("block must be >= 1")
        self._arrays: list[np.ndarray] = []  # contiguous native int64, read by C
        self._sources: list[np.ndarray] = []  # the same, as given (np.memmap kept)
        release: list[bool] = []
        for given in arrays:
            mapped = _releasable(given)
            a = np.asarray(given).reshape(-1)
            if a.dtype != np.int64 or not (a.flags.c_contiguous and a.flags.aligned):
                a, mapped = np.array(a, dtype=np.int64, order="C"), False  # a copy, aligned
            if a.size:
                self._arrays.append(a)
                self._sources.append(given.reshape(-1) if mapped else a)
                release.append(mapped)
        self.count = sum(a.size for a in self._arrays)
        segs = (_Seg * max(1, len(self._arrays)))()
        for seg, a, r in zip(segs, self._arrays, release, strict=False):
            seg.data, seg.count, seg.release = a.ctypes.data, a.size, int(r)
        self._segs = segs
        self._block = int(min(block, 1 << 40))
        self.threads = _threads(self.count) if threads is None else max(1, int(threads))

    def _pass(self, deadline: int, m: _Moments | None, intervals: Sequence[Interval]) -> list:
        order = sorted(range(len(intervals)), key=lambda i: (intervals[i].bucket, intervals[i].lo))
        counts = [np.zeros(iv.bins, np.uint64) for iv in intervals]
        cells = (_Cell * max(1, len(intervals)))()
        for cell, i in zip(cells, order, strict=False):
            iv = intervals[i]
            cell.lo, cell.hi, cell.bucket, cell.shift = iv.lo, iv.hi, iv.bucket, iv.shift
            cell.counts = counts[i].ctypes.data
        rc = _library().scan_pass(
            self._segs,
            len(self._arrays),
            self._block,
            min(self.threads, MAX_THREADS),
            deadline,
            None if m is None else ctypes.byref(m),
            cells,
            len(intervals),
        )
        if rc == -errno.ENOMEM:
            raise MemoryError("scan_pass: out of memory")
        if rc:
            raise InternalError(f"scan_pass failed: {os.strerror(-rc)}")
        return counts

    def scan(
        self, deadline_ns: int | None, intervals: Sequence[Interval] = ()
    ) -> tuple[Moments, list[np.ndarray]]:
        """One pass over every sample: its `Moments` (samples > DEADLINE_NS counted) and
        the sub-bin counts (int64) of each of the disjoint INTERVALS, in the order given."""
        m = _Moments()
        dl = I64_MAX if deadline_ns is None else min(max(int(deadline_ns), I64_MIN), I64_MAX)
        counts = self._pass(dl, m, intervals)
        above = int(m.above)
        if deadline_ns is not None and deadline_ns < I64_MIN:
            above = int(m.count)
        s = int(m.sum[0]) | int(m.sum[1]) << 64
        mom = Moments(
            count=int(m.count),
            min=int(m.min),
            max=int(m.max),
            sum=s - (1 << 128) if s >> 127 else s,
            sum_squares=int(m.sumsq[0]) | int(m.sumsq[1]) << 64 | int(m.sumsq[2]) << 128,
            above=above,
            hist=np.ctypeslib.as_array(m.hist).astype(np.int64),
        )
        return mom, [c.astype(np.int64) for c in counts]

    def moments(self, deadline_ns: int | None) -> Moments:
        """One pass over every sample: its `Moments`, samples > DEADLINE_NS counted."""
        return self.scan(deadline_ns)[0]

    def refine(self, intervals: Sequence[Interval]) -> list[np.ndarray]:
        """One pass over every sample: the sub-bin counts (int64) of each of the disjoint
        INTERVALS, in the order given."""
        return [c.astype(np.int64) for c in self._pass(I64_MAX, None, intervals)]

    def pilot(self, samples: int, runs: int) -> np.ndarray:
        """The bucket histogram of about SAMPLES samples read as RUNS runs spread evenly
        over all samples (in one thread; the runs' pages are dropped after)."""
        run = max(1, samples // runs)
        if self.count <= run * runs:
            return self.moments(None).hist
        ends = np.cumsum([a.size for a in self._arrays])
        parts = []
        for start in np.linspace(0, self.count - run, runs).astype(np.int64).tolist():
            i = int(np.searchsorted(ends, start, side="right"))
            off = start - (int(ends[i - 1]) if i else 0)
            parts.append(self._sources[i][off : off + run])
        return Scanner(parts, block=run, threads=1).moments(None).hist
