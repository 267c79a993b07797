"""CPU lists ("0-3,5,8-15:2") and CPU masks ("ff,ffffffff"): the one parser of each.

Every CPU list rtlab reads (options, experiment and targets files, boot parameters, sysfs
and procfs files, sysinfo documents) goes through `parse_cpulist`. Its syntax is the
kernel's (lib/bitmap-str.c, bitmap_parselist): "N" and "A-B" entries separated by commas,
a range optionally "A-B:USED/GROUP" (the first USED CPUs of every GROUP), plus rtlab's
"A-B:STRIDE" (every STRIDE-th CPU, "A-B:1/STRIDE"). The kernel's "N" (the last CPU) and
"all" need the running kernel's CPU count and are not accepted.

Limits: CPU numbers are below MAX_CPUS (8192, the largest NR_CPUS Linux can be built
with: x86-64 MAXSMP, powerpc), a list is at most MAX_CPULIST_CHARS characters, and only
ASCII digits are numbers. So no list costs more than 8192 CPUs of memory and time.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rtlab.errors import UserError

#: CPU numbers are below this: the largest NR_CPUS of any architecture's Kconfig.
MAX_CPUS = 8192
#: Characters of a CPU list or mask (the kernel prints at most ~40 KiB for 8192 CPUs).
MAX_CPULIST_CHARS = 1 << 16

_ENTRY = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+)(?:/([0-9]+))?)?)?")
_MASK = re.compile(r"[0-9a-fA-F,]*")


class CpuNumberError(UserError):
    """A CPU number no Linux system has (at least MAX_CPUS)."""


def _number(digits: str, text: str) -> int:
    """A CPU number, below MAX_CPUS."""
    digits = digits.lstrip("0") or "0"
    if len(digits) > 5 or int(digits) >= MAX_CPUS:
        shown = digits if len(digits) <= 12 else digits[:12] + "..."
        raise CpuNumberError(
            f'"{_short(text)}": CPU {shown} is beyond {MAX_CPUS - 1}, the largest CPU number '
            "Linux supports"
        )
    return int(digits)


def _count(digits: str) -> int:
    """A group size or stride: any size selects at most the range's CPUs."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 9 else 10**9


def _short(text: str) -> str:
    text = text if text.isprintable() else repr(text)[1:-1]
    return text if len(text) <= 60 else text[:60] + "..."


def parse_cpulist(text: str) -> list[int]:
    """Ascending, de-duplicated CPU numbers; UserError on bad syntax, CpuNumberError on a
    CPU number of MAX_CPUS or more."""
    if len(text) > MAX_CPULIST_CHARS:
        raise UserError(f"a CPU list of {len(text)} characters (at most {MAX_CPULIST_CHARS})")
    return list(_parse(text.strip()))


@lru_cache(maxsize=256)  # the lists of a system repeat (every task's "0-4095")
def _parse(text: str) -> tuple[int, ...]:
    if not text:
        return ()
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = _ENTRY.fullmatch(part)
        if m is None:
            raise UserError(f'"{_short(text)}": "{_short(part)}" is not a CPU list entry')
        lo = _number(m.group(1), text)
        hi = lo if m.group(2) is None else _number(m.group(2), text)
        used, group = 1, 1
        if m.group(4) is not None:  # the kernel's A-B:USED/GROUP
            used, group = _count(m.group(3)), _count(m.group(4))
        elif m.group(3) is not None:  # rtlab's A-B:STRIDE
            group = _count(m.group(3))
        if hi < lo or group < 1 or used > group:
            raise UserError(f'"{_short(text)}": "{_short(part)}" is not a valid range')
        if used == group:
            cpus.update(range(lo, hi + 1))
        else:  # at most MAX_CPUS groups
            for first in range(lo, min(lo + used, hi + 1)):
                cpus.update(range(first, hi + 1, group))
    return tuple(sorted(cpus))


def cpulist_or_none(text: str) -> list[int] | None:
    """The CPUs of TEXT, or None when it is no valid CPU list (as the kernel ignores a
    boot parameter it cannot parse)."""
    try:
        return parse_cpulist(text)
    except UserError:
        return None


def system_cpulist(text: str | None, where: str) -> list[int] | None:
    """A CPU list read from the system file WHERE: None when absent or garbled, but
    UserError naming WHERE when it holds a CPU number no Linux has: the file (a sysinfo
    document, a tree) is forged or damaged, and no fact read from it can be trusted."""
    if text is None:
        return None
    try:
        return parse_cpulist(text)
    except CpuNumberError as e:
        raise CpuNumberError(f"{where}: {e}") from None
    except UserError:
        return None


def parse_cpumask(text: str | None, where: str = "CPU mask") -> list[int] | None:
    """A hex CPU mask ("ff,ffffffff") as CPU numbers; None when absent or unparsable,
    CpuNumberError when it sets a CPU of MAX_CPUS or more."""
    if text is None or len(text) > MAX_CPULIST_CHARS:
        return None
    text = text.strip()
    if not _MASK.fullmatch(text):
        return None
    digits = text.replace(",", "")
    value = int(digits, 16) if digits else 0
    if value.bit_length() > MAX_CPUS:
        raise CpuNumberError(
            f"{where}: CPU {value.bit_length() - 1} is beyond {MAX_CPUS - 1}, the largest "
            "CPU number Linux supports"
        )
    return [i for i in range(value.bit_length()) if value >> i & 1]


def format_cpulist(cpus: list[int] | set[int]) -> str:
    """Compact form: [0,1,2,5] -> "0-2,5"."""
    out: list[str] = []
    items = sorted(set(cpus))
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out)
