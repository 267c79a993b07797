"""What a target is: `ssh://[user@]host[:port]`, `labgrid:PLACE`, or a name from a targets
file (~/.config/rtlab/targets.toml, or a farm file of the same form)."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from rtlab._input import read_regular, size_text
from rtlab.errors import UserError
from rtlab.probe import one_line
from rtlab.system import parse_cpulist

SSH, LABGRID, VM = "ssh", "labgrid", "vm"
KINDS = (SSH, LABGRID, VM)
#: A target's name: it names experiments (their id) and the boards of a farm report.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_HOST_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*|\[?[0-9A-Fa-f:.]+(%[A-Za-z0-9._-]+)?\]?")
_USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\$?")
#: Keys of a target's table, with the type each takes.
KEYS: dict[str, type | tuple[type, ...]] = {
    "host": str,
    "user": str,
    "port": int,
    "identity": str,
    "known_hosts": str,
    "probe": str,
    "target_probe": str,
    "rt_cpus": (str, int),
    "labgrid": str,
    "vm": str,
    "append": str,
    "cpus": int,
    "memory": str,
    "accel": str,
    "arch": str,
    "root": str,
}
#: Keys that say what kind of target a table is (exactly one of them).
KIND_KEYS = {"host": SSH, "labgrid": LABGRID, "vm": VM}
#: Keys of a `vm` table in targets.toml (and of the options after `vm:KERNEL?`).
VM_OPTIONS = ("append", "cpus", "memory", "accel", "arch", "root")
#: Limits of a targets file (docs/targets.md, "Limits"), and of the files it names: they
#: must be regular files (a FIFO or a device would hang or flood the SSH client).
MAX_FILE_BYTES = 1 << 20
MAX_TARGETS = 4096
FILE_KEYS = {"identity": 1 << 20, "known_hosts": 64 << 20, "probe": 256 << 20}


@dataclass(frozen=True)
class TargetSpec:
    """Where to run and how to get there. `name` is what outputs call it."""

    name: str
    kind: str = SSH  # one of KINDS
    host: str = ""  # a host name, an address or a ~/.ssh/config alias
    user: str | None = None  # default: ~/.ssh/config, else the local user
    port: int | None = None  # default: ~/.ssh/config, else 22
    identity: str | None = None  # private key file (default: ~/.ssh/config, ~/.ssh/id_*, agent)
    known_hosts: str | None = None  # default: ~/.ssh/known_hosts (and ~/.ssh/config's)
    probe: str | None = None  # a probe binary on this host to copy there
    target_probe: str | None = None  # a probe already on the target: nothing is copied
    rt_cpus: str | None = None  # the real-time CPUs, for the audit
    place: str | None = None  # labgrid: the place or the target of $LG_ENV
    kernel: str | None = None  # vm: the kernel image booted (targets/_vm.py)
    append: str | None = None  # vm: added to the kernel command line
    vm_cpus: int | None = None  # vm: virtual CPUs
    memory: str | None = None  # vm: "1G"
    accel: str | None = None  # vm: auto, kvm or tcg
    arch: str | None = None  # vm: x86_64 or arm64
    root: str | None = None  # vm: the guest's root file system (another arch: targets/vmroot.py)

    @property
    def url(self) -> str:
        if self.kind == LABGRID:
            return f"labgrid:{self.place}"
        if self.kind == VM:
            from rtlab.targets._vm import vm_url

            return vm_url(self)
        host = self.host if ":" not in self.host or self.host.startswith("[") else f"[{self.host}]"
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"ssh://{user}{host}{port}"

    @property
    def short(self) -> str:
        """A short name for ids and labels: the table's name, else host[:port] or the place."""
        if "://" not in self.name and not self.name.startswith("labgrid:"):
            return self.name
        if self.kind == LABGRID:
            return self.place or self.name
        return f"{self.host}:{self.port}" if self.port else self.host

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> TargetSpec:
        """A spec recorded by to_dict (an experiment's manifest)."""
        names = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or not set(data) <= names or "name" not in data:
            raise UserError(f"{where}: not a target description")
        try:
            spec = cls(**data)
        except TypeError as e:
            raise UserError(f"{where}: not a target description ({e})") from None
        if spec.kind not in KINDS:
            raise UserError(f"{where}: unknown target kind {spec.kind!r}")
        return spec


def targets_file() -> Path:
    """~/.config/rtlab/targets.toml (or under $XDG_CONFIG_HOME)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "rtlab" / "targets.toml"


def _bad(text: str, why: str) -> UserError:
    return UserError(f"--target {text!r}: {why}")


def parse_ssh_url(text: str, name: str | None = None) -> TargetSpec:
    """`ssh://[user@]host[:port]`; UserError (exit 2) for anything else."""
    if any(not c.isprintable() or c.isspace() for c in text):
        raise _bad(text, "spaces or control characters in a target")
    try:
        u = urlsplit(text)
        port = u.port
    except ValueError as e:
        raise _bad(text, f"not ssh://[user@]host[:port] ({e})") from None
    if u.scheme != "ssh" or not u.netloc:
        raise _bad(text, "not ssh://[user@]host[:port]")
    if u.password is not None:
        raise _bad(text, "no passwords on the command line: use a key or the SSH agent")
    if u.path not in ("", "/") or u.query or u.fragment:
        raise _bad(text, "ssh://[user@]host[:port] has no path, query or fragment")
    host = u.netloc.rpartition("@")[2]
    host = host[: host.rindex("]") + 1] if host.startswith("[") else host.partition(":")[0]
    if not _HOST_RE.fullmatch(host):
        raise _bad(text, f"{host!r} is not a host name or address")
    user = unquote(u.username) if u.username is not None else None
    if user is not None and not _USER_RE.fullmatch(user):
        raise _bad(text, f"{user!r} is not a user name")
    if port == 0:
        raise _bad(text, "port 0")
    return TargetSpec(name or text, SSH, host.strip("[]"), user, port)


def parse_target(text: str, file: Path | None = None) -> TargetSpec:
    """A target given on the command line: an ssh:// URL, labgrid:PLACE, or a name from
    FILE (default: targets_file())."""
    if text.startswith("ssh:") or "://" in text:
        return parse_ssh_url(text)
    if text.startswith("vm:"):
        from rtlab.targets._vm import parse_vm_url

        return parse_vm_url(text)
    if text.startswith("labgrid:"):
        place = text.removeprefix("labgrid:")
        if not NAME_RE.fullmatch(place):
            raise _bad(text, "labgrid:PLACE needs a place name (letters, digits, . _ -)")
        return TargetSpec(text, LABGRID, place=place)
    if not NAME_RE.fullmatch(text):
        raise _bad(
            text, "not ssh://[user@]host[:port], labgrid:PLACE, vm:KERNEL or a target's name"
        )
    path = file or targets_file()
    targets = read_targets(path) if file or path.exists() else {}
    if text not in targets:
        known = ", ".join(targets) or "none"
        raise _bad(
            text,
            f"no target of that name in {path} (known: {known}); write ssh://{text} for a host",
        )
    return targets[text]


def read_targets(path: Path) -> dict[str, TargetSpec]:
    """The targets of a targets file: one table per target, named by its key."""
    label = one_line(str(path))
    try:
        data = read_regular(path, MAX_FILE_BYTES)
    except UserError as e:
        raise UserError(f"{label}: {e}") from None
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"{label}: not a TOML file ({one_line(str(e))})") from None
    except RecursionError:
        raise UserError(f"{label}: arrays or tables nested too deeply for a targets file") from None
    if len(doc) > MAX_TARGETS:
        raise UserError(f"{label}: more than {MAX_TARGETS} targets")
    out = {}
    for name, table in doc.items():
        where = f"{label}: [{one_line(name)}]"
        if not NAME_RE.fullmatch(name):
            raise UserError(f"{where}: a target's name is letters, digits, '.', '_' and '-'")
        if not isinstance(table, dict):
            raise UserError(f"{where}: a target is a table ([{name}] with host = ...)")
        out[name] = _table(name, table, where)
    if not out:
        raise UserError(f"{label}: no target in it ([NAME] tables with host = ...)")
    return out


def _table(name: str, t: dict[str, Any], where: str) -> TargetSpec:
    for key, value in t.items():
        if key not in KEYS:
            raise UserError(f"{where}: unknown key {key!r} (keys: {', '.join(KEYS)})")
        want = KEYS[key]
        if isinstance(value, bool) or not isinstance(value, want):
            raise UserError(f"{where}: {key!r} must be a {_type_name(want)}")
        if isinstance(value, str) and any(not c.isprintable() for c in value):
            raise UserError(f"{where}: {key!r} has control characters")
    kinds = [KIND_KEYS[k] for k in t if k in KIND_KEYS]
    if len(kinds) != 1:
        raise UserError(f"{where}: give one of host = ... (SSH), labgrid = PLACE or vm = KERNEL")
    if kinds[0] == VM:
        return _vm_table(name, t, where)
    vm_only = sorted(set(t) & set(VM_OPTIONS))
    if vm_only:
        raise UserError(f"{where}: {', '.join(vm_only)}: only for a vm = KERNEL target")
    port = t.get("port")
    if port is not None and not 0 < port < 65536:
        raise UserError(f"{where}: port {port} is out of range (1..65535)")
    rt = _rt_cpus(t, where)
    if "labgrid" in t:
        if not NAME_RE.fullmatch(t["labgrid"]):
            raise UserError(f"{where}: labgrid: a place name is letters, digits, . _ -")
        extra = set(t) - {"labgrid", "identity", "probe", "target_probe", "rt_cpus"}
        if extra:
            keys = ", ".join(sorted(extra))
            raise UserError(
                f"{where}: {keys}: not for a labgrid target (labgrid says how to reach it)"
            )
        kind, host = LABGRID, ""
    else:
        kind, host = SSH, t["host"]
        if not _HOST_RE.fullmatch(host):
            raise UserError(f"{where}: host {host!r} is not a host name, address or alias")
    user = t.get("user")
    if user is not None and not _USER_RE.fullmatch(user):
        raise UserError(f"{where}: user {user!r} is not a user name")
    for key, max_bytes in FILE_KEYS.items():
        _check_file(key, _path(t.get(key)), max_bytes, where)
    return TargetSpec(
        name=name,
        kind=kind,
        host=host.strip("[]"),
        user=user,
        port=port,
        identity=_path(t.get("identity")),
        known_hosts=_path(t.get("known_hosts")),
        probe=_path(t.get("probe")),
        target_probe=t.get("target_probe"),
        rt_cpus=rt,
        place=t.get("labgrid"),
    )


def _rt_cpus(t: dict[str, Any], where: str) -> str | None:
    """A table's rt_cpus (a CPU list: UserError naming it otherwise), None when not given."""
    rt = t.get("rt_cpus")
    if rt is None:
        return None
    try:
        parse_cpulist(str(rt))
    except UserError as e:
        raise UserError(f"{where}: rt_cpus: {e}") from None
    return str(rt)


def _vm_table(name: str, t: dict[str, Any], where: str) -> TargetSpec:
    from rtlab.targets._vm import vm_spec

    extra = sorted(set(t) - {"vm", "rt_cpus", "probe", *VM_OPTIONS})
    if extra:
        raise UserError(f"{where}: {', '.join(extra)}: not for a vm target (virtme-ng reaches it)")
    rt = _rt_cpus(t, where)
    _check_file("probe", _path(t.get("probe")), FILE_KEYS["probe"], where)
    options = {k: t[k] for k in VM_OPTIONS if k in t}
    spec = vm_spec(name, t["vm"], options, where)
    return replace(spec, rt_cpus=rt, probe=_path(t.get("probe")))


def _path(value: str | None) -> str | None:
    return None if value is None else os.path.expanduser(value)


def _check_file(key: str, path: str | None, max_bytes: int, where: str) -> None:
    """PATH, when it exists, must be a regular file of at most MAX_BYTES (stat only:
    nothing is opened, so a FIFO does not block)."""
    if path is None:
        return
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return  # not there (yet): the SSH client or the copy says so when it is used
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{where}: {key} {one_line(path)} is not a regular file")
    if st.st_size > max_bytes:
        raise UserError(f"{where}: {key} {one_line(path)} is larger than {size_text(max_bytes)}")


def _type_name(want: type | tuple[type, ...]) -> str:
    types = want if isinstance(want, tuple) else (want,)
    return " or ".join({"str": "string", "int": "number"}[t.__name__] for t in types)
