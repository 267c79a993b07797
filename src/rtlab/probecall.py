"""A probe call: what one case asks of `rtlab-probe`, as a typed value, and the one
function that turns it into the probe's command line (`probe_argv`).

Experiment expansion builds a `ProbeCall` from the case keys (every option under its
canonical name, with the case key it came from); what rtlab adds for a run (the
experiment's deadline, `--explain`, a partition's cgroups) is added to the value with
`ProbeCall.adding`, and where the probe writes is an `Outputs` value. Nobody edits or
parses a rendered command line: the stored manifest keeps the call itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from rtlab.errors import UserError

#: The option of every --load spec.
LOAD = "load"


@dataclass(frozen=True)
class Option:
    """One probe option: `--NAME VALUE`, or `--NAME` when VALUE is None (a flag)."""

    name: str  # canonical, without "--": "dma-latency"
    value: str | None = None
    key: str = ""  # the case key it came from ("interval", "probe_args", "explain", ...)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "key": self.key}


@dataclass(frozen=True)
class Outputs:
    """Where the probe writes, as paths it understands (on the target)."""

    document: str  # --json
    raw: str | None = None  # --raw: every sample
    progress: str | None = "-"  # --progress: JSON lines on stdout
    stop_on_eof: bool = False  # the target's channel closing stops the probe


@dataclass(frozen=True)
class ProbeCall:
    """A meter and its options, in the order they are given to the probe."""

    meter: str
    options: tuple[Option, ...] = field(default_factory=tuple)
    command: tuple[str, ...] = ()  # a program the probe starts and observes (`-- CMD ARGS`)

    def has(self, *names: str) -> bool:
        return any(o.name in names for o in self.options)

    def value(self, name: str) -> str | None:
        """The last value given to option NAME (the one the probe keeps), None if absent."""
        values = self.values(name)
        return values[-1] if values else None

    def values(self, name: str) -> list[str]:
        return [o.value for o in self.options if o.name == name and o.value is not None]

    @property
    def loads(self) -> list[str]:
        """The --load specs, in order."""
        return self.values(LOAD)

    def option_from(self, name: str, value: str | None) -> Option | None:
        """The option NAME that gave VALUE (or the last NAME when no value matches)."""
        named = [o for o in self.options if o.name == name]
        return next((o for o in reversed(named) if o.value == value), None) or (
            named[-1] if named else None
        )

    def adding(self, *options: Option) -> ProbeCall:
        """This call with OPTIONS after its own."""
        return replace(self, options=self.options + tuple(options))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"meter": self.meter, "options": [o.to_dict() for o in self.options]}
        if self.command:  # absent before application cases: no schema step
            out["command"] = list(self.command)
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> ProbeCall:
        """A stored call; UserError naming WHERE when it is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("meter"), str):
            raise UserError(f"{where}: 'probe' must be an object with a string 'meter'")
        options = data.get("options", [])
        if not isinstance(options, list):
            raise UserError(f"{where}: 'probe.options' must be a list")
        out = []
        for i, o in enumerate(options):
            if not isinstance(o, dict):
                raise UserError(f"{where}: probe.options[{i}] is not an object")
            name, value, key = o.get("name"), o.get("value"), o.get("key", "")
            if not isinstance(name, str) or not name or name.startswith("-"):
                raise UserError(f"{where}: probe.options[{i}].name must be an option name")
            if value is not None and not isinstance(value, str):
                raise UserError(f"{where}: probe.options[{i}].value must be a string or null")
            if not isinstance(key, str):
                raise UserError(f"{where}: probe.options[{i}].key must be a string")
            out.append(Option(name, value, key))
        command = data.get("command", [])
        if not isinstance(command, list) or not all(isinstance(w, str) for w in command):
            raise UserError(f"{where}: 'probe.command' must be a list of strings")
        return cls(data["meter"], tuple(out), tuple(command))


def probe_argv(
    call: ProbeCall, outputs: Outputs | None = None, *, check: bool = False
) -> list[str]:
    """The probe's command line for CALL (without the executable): the meter, its options,
    then where it writes (OUTPUTS) or `--check`, then `-- CMD ARGS` when CALL starts a
    program. The only place a command line is made."""
    args = [call.meter]
    for o in call.options:
        args += [f"--{o.name}"] if o.value is None else [f"--{o.name}", o.value]
    if check:
        args.append("--check")
    if outputs is not None:
        args += ["--json", outputs.document]
        if outputs.raw is not None:
            args += ["--raw", outputs.raw]
        if outputs.progress is not None:
            args += ["--progress", outputs.progress]
        args.append("--quiet")
        if outputs.stop_on_eof:
            args.append("--stop-on-eof")
    if call.command:
        args += ["--", *call.command]
    return args


def call_from_words(meter: str, words: Iterable[tuple[str, str | None]], key: str) -> ProbeCall:
    """A call of METER with (name, value) options all from case key KEY (imports, tests)."""
    return ProbeCall(meter, tuple(Option(n, v, key) for n, v in words))
