"""The kernel command line as the kernel parses it (kernel/params.c, next_arg())."""

from __future__ import annotations

from dataclasses import dataclass

from rtlab.system._cpus import cpulist_or_none


def _norm(name: str) -> str:
    # The kernel treats '-' and '_' in parameter names alike.
    return name.replace("-", "_")


def split_cmdline(text: str) -> list[tuple[str, str | None]]:
    """(name, value or None) per parameter, in order; stops at "--" (the rest is for init).

    Double quotes group spaces ("a=\\"x y\\"" or "\\"a=x y\\"") and are removed, as the
    kernel does. Never raises: every input has a parse.
    """
    out: list[tuple[str, str | None]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        word: list[str] = []
        quoted = False
        while i < n and (quoted or not text[i].isspace()):
            if text[i] == '"':
                quoted = not quoted
            else:
                word.append(text[i])
            i += 1
        arg = "".join(word)
        if arg == "--" and not quoted:
            break
        name, eq, value = arg.partition("=")
        out.append((_norm(name), value if eq else None))
    return out


@dataclass(frozen=True)
class Cmdline:
    text: str
    params: tuple[tuple[str, str | None], ...]

    @classmethod
    def parse(cls, text: str | None) -> Cmdline:
        text = text or ""
        return cls(text, tuple(split_cmdline(text)))

    def has(self, name: str) -> bool:
        return any(k == _norm(name) for k, _ in self.params)

    def get(self, name: str) -> str | None:
        """Value of the last NAME= (the kernel keeps the last); "" for a bare flag."""
        found: str | None = None
        for k, v in self.params:
            if k == _norm(name):
                found = "" if v is None else v
        return found

    def cpus(self, name: str) -> list[int] | None:
        """CPU list of NAME=LIST, None when absent or unparsable."""
        value = self.get(name)
        if value is None:
            return None
        return cpulist_or_none(value)

    def isolcpus(self) -> tuple[list[str], list[int]] | None:
        """isolcpus=[flag,...,]LIST as (flags, cpus); None when absent."""
        value = self.get("isolcpus")
        if value is None:
            return None
        return parse_isolcpus(value)


ISOLCPUS_FLAGS = ("nohz", "domain", "managed_irq")


def parse_isolcpus(value: str) -> tuple[list[str], list[int]]:
    """isolcpus=[flag,...,]LIST: flags are words (nohz, domain, managed_irq); then the CPUs.

    Without flags the kernel applies "domain". An unparsable list gives no CPUs.
    """
    flags: list[str] = []
    parts = value.split(",")
    i = 0
    while i < len(parts) and parts[i] and parts[i][0].isalpha():
        flags.append(parts[i])
        i += 1
    cpus = cpulist_or_none(",".join(parts[i:])) or []
    return flags, cpus
