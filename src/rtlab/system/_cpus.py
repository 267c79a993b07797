"""CPU lists in the kernel's syntax ("0-3,5,8-15:2")."""

from __future__ import annotations

from rtlab.errors import UserError


def parse_cpulist(text: str) -> list[int]:
    """Ascending, de-duplicated CPU numbers; UserError on bad syntax."""
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return []
    for part in text.split(","):
        part = part.strip()
        rng, _, stride_s = part.partition(":")
        lo_s, dash, hi_s = rng.partition("-")
        try:
            lo = int(lo_s)
            hi = int(hi_s) if dash else lo
            stride = int(stride_s) if stride_s else 1
        except ValueError:
            raise UserError(f'"{text}": "{part}" is not a CPU list entry') from None
        if lo < 0 or hi < lo or stride < 1:
            raise UserError(f'"{text}": "{part}" is not a valid range')
        cpus.update(range(lo, hi + 1, stride))
    return sorted(cpus)


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
