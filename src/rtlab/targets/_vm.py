"""A virtual machine as a target: a kernel booted with virtme-ng and QEMU on a read-only
view of this machine's root file system, measured over SSH like a board.

`vm:KERNEL[?append=...&cpus=N&memory=SIZE&accel=kvm|tcg|auto&arch=x86_64|arm64&root=DIR]`
on the command line, or a targets.toml table with `vm = "KERNEL"` and those keys. KERNEL
is a kernel image, or the release of a kernel installed in /boot. A guest of another
architecture (arch=arm64 on x86) boots on a root file system of its own (`root=DIR`,
default: the one `rtlab vm root --arch ARCH` built, targets/vmroot.py) under TCG, and
KERNEL is then a release in that root's /boot. The machine is booted once
when the target is opened (once per experiment) and powered off when it is closed;
virtme-ng starts an SSH server in the guest (`vng --ssh`), reached on a port of
127.0.0.1 with a key and host keys made for this machine only, and from there on the
target is an SSH target: the same session, probe copy, checks and case runs.

Where KVM cannot be used (no /dev/kvm, or a guest that does not come up within
KVM_BOOT_S, as when a nested guest hangs after the boot loader), `accel=auto` boots under
QEMU's TCG emulation and says so; `accel=kvm` that fails is exit 3. What a VM distorts is
recorded: the fingerprint's `virtualization` says `kvm` or `tcg` and the host's kernel.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from rtlab.errors import UnsupportedError, UserError
from rtlab.probe import one_line
from rtlab.targets import vmroot
from rtlab.targets._remote import Remote
from rtlab.targets._spec import NAME_RE, SSH, VM, VM_OPTIONS, TargetSpec

ACCELS = ("auto", "kvm", "tcg")
#: `arch=` spellings -> (virtme-ng's --arch, QEMU's system emulator)
ARCHS = {
    "x86_64": ("x86_64", "qemu-system-x86_64"),
    "amd64": ("x86_64", "qemu-system-x86_64"),
    "arm64": ("arm64", "qemu-system-aarch64"),
    "aarch64": ("arm64", "qemu-system-aarch64"),
}
MAX_CPUS = 64  # virtual CPUs of one guest
MAX_APPEND = 4096  # characters added to the kernel command line
MEMORY_RE = re.compile(r"([1-9][0-9]{0,6})([MG]?)")
DEFAULT_CPUS, DEFAULT_MEMORY = 2, "1G"
PORT_TRIES = 5  # ports tried for a guest's sshd
#: What QEMU says when the port for the guest's sshd is taken.
PORT_IN_USE = b"Could not set up host forwarding rule"
KVM_BOOT_S = 60  # a guest under KVM answers SSH within seconds; not then: it hangs
TCG_BOOT_S = 600  # under emulation a boot takes 20-60 s on a 2-CPU machine
STOP_S = 10
HOME_PREFIX = "rtlab-vm-"  # a guest's home for virtme-ng, in the temporary directory
BOOT = Path("/boot")  # where a release's image is: BOOT/vmlinuz-RELEASE
#: Typed on the guest's console once its shell is up: the guest's address for QEMU's
#: user network (10.0.2.15) on every interface, when virtme-ng's DHCP did not configure
#: one (the host's udev rules may rename eth0 under it, e.g. to enp0s4).
NETWORK = (
    b'for d in /sys/class/net/*; do n=${d##*/}; [ "$n" = lo ] && continue; '
    b'ip link set "$n" up; ip -4 addr show dev "$n" | grep -q inet || '
    b'ip addr add 10.0.2.15/24 dev "$n"; done 2>/dev/null\n'
)
PROMPT = b"@virtme-ng:"  # the guest's shell has started (its prompt)
#: The guard of a guest: its stdin is a pipe from rtlab; at its end (rtlab gone, even by
#: SIGKILL) it stops the guest's process group ($1), which rtlab made for it.
GUARD = 'read _ ; kill -TERM "-$1"; sleep 5; kill -KILL "-$1"'


def host_arch() -> str:
    return ARCHS.get(platform.machine(), (platform.machine(), ""))[0]


# --- the target's description ---------------------------------------------------------------


def parse_vm_url(text: str) -> TargetSpec:
    """`vm:KERNEL[?key=value&...]`; UserError (exit 2) for anything else."""
    body = text.removeprefix("vm:")
    kernel, _, query = body.partition("?")
    options: dict[str, Any] = {}
    for item in filter(None, query.split("&")):
        key, eq, value = item.partition("=")
        if not eq:
            raise _bad(text, f"{key!r}: options are key=value, joined by &")
        if key in options:
            raise _bad(text, f"{key!r} is given twice")
        options[key] = unquote(value)
    if "cpus" in options:
        if not options["cpus"].isdigit():
            raise _bad(text, f"cpus={options['cpus']!r} is not a number")
        options["cpus"] = int(options["cpus"])
    return vm_spec(_name_of(unquote(kernel)), unquote(kernel), options, f"--target {text!r}")


def vm_spec(name: str, kernel: str, options: dict[str, Any], where: str) -> TargetSpec:
    """The spec of a VM target, every option checked (the kernel must exist)."""
    unknown = sorted(set(options) - set(VM_OPTIONS))
    if unknown:
        raise UserError(f"{where}: unknown option {unknown[0]!r} ({', '.join(VM_OPTIONS)})")
    if not kernel:
        raise UserError(f"{where}: no kernel: vm:KERNEL takes an image or a release in /boot")
    arch = str(options.get("arch") or host_arch())
    if arch not in ARCHS:
        raise UserError(f"{where}: arch={arch!r} is not one of {', '.join(sorted(ARCHS))}")
    accel = str(options.get("accel") or "auto")
    if accel not in ACCELS:
        raise UserError(f"{where}: accel={accel!r} is not one of {', '.join(ACCELS)}")
    if ARCHS[arch][0] != host_arch() and accel == "kvm":
        raise UserError(f"{where}: accel=kvm runs only guests of this machine's architecture")
    cpus = options.get("cpus", DEFAULT_CPUS)
    if isinstance(cpus, bool) or not isinstance(cpus, int) or not 1 <= cpus <= MAX_CPUS:
        raise UserError(f"{where}: cpus must be a number from 1 to {MAX_CPUS}")
    memory = str(options.get("memory") or DEFAULT_MEMORY)
    m = MEMORY_RE.fullmatch(memory)
    if not m or int(m.group(1)) * (1024 if m.group(2) == "G" else 1) < 256:
        raise UserError(f"{where}: memory={memory!r}: a size such as 512M or 2G, at least 256M")
    append = str(options.get("append") or "")
    if len(append) > MAX_APPEND or any(not c.isprintable() for c in append):
        raise UserError(f"{where}: append: at most {MAX_APPEND} printable characters")
    root = guest_root(ARCHS[arch][0], options.get("root"), where)
    return TargetSpec(
        name=name,
        kind=VM,
        kernel=str(resolve_kernel(kernel, where, root)),
        root=str(root) if root else None,
        append=append or None,
        vm_cpus=cpus,
        memory=memory,
        accel=accel,
        arch=ARCHS[arch][0],
    )


def guest_root(arch: str, root: Any, where: str) -> Path | None:
    """The guest's own root file system: ROOT, else for another architecture the root
    built for it; None for this machine's root (a guest of its architecture)."""
    if root:
        return vmroot.check_root(Path(str(root)), where)
    if arch == host_arch():
        return None
    path = vmroot.default_root(arch) if arch in vmroot.KERNEL_PACKAGES else None
    if path is None or not vmroot.is_root(path):
        raise UserError(
            f"{where}: arch={arch} boots on a root file system of its own: build it with "
            f"`rtlab vm root --arch {arch}` (once, a few minutes) or give root=DIR"
        )
    return path


def resolve_kernel(kernel: str, where: str, root: Path | None = None) -> Path:
    """KERNEL as an image: a path, or BOOT/vmlinuz-RELEASE (ROOT/boot for a guest with a
    root of its own); UserError when there is none."""
    boot = root / "boot" if root else BOOT
    path = Path(kernel) if "/" in kernel else boot / f"vmlinuz-{kernel}"
    try:
        ok = path.is_file()
    except (OSError, ValueError):
        ok = False
    if not ok:
        hint = ""
        if "/" not in kernel:
            there = f"; there: {', '.join(vmroot.kernels(root)) or 'none'}" if root else ""
            hint = f" (no {path}: is the kernel package installed?{there})"
        raise UserError(f"{where}: kernel {one_line(kernel)}: not a file{hint}")
    return path.resolve()


def _name_of(kernel: str) -> str:
    """vm-RELEASE for /boot/vmlinuz-RELEASE (or a release), a target's name."""
    base = Path(kernel).name
    release = base.split("-", 1)[1] if base.startswith("vmlinuz-") else base
    name = "vm-" + re.sub(r"[^A-Za-z0-9._-]+", "-", release).strip("-")
    return name[:64] if NAME_RE.fullmatch(name[:64]) else "vm"


def _bad(text: str, why: str) -> UserError:
    return UserError(f"--target {one_line(text)!r}: {why}")


# --- the machine ----------------------------------------------------------------------------


@dataclass
class Machine:
    """A guest booted by virtme-ng, its SSH port and the files that reach it."""

    proc: subprocess.Popen[bytes]
    guard: subprocess.Popen[bytes]  # stops the guest if rtlab dies
    port: int
    accel: str  # "kvm" or "tcg", what it runs under
    home: Path  # virtme-ng's HOME: its keys and caches, removed with the machine
    notes: list[str] = field(default_factory=list)

    @property
    def ssh_dir(self) -> Path:
        return self.home / ".cache" / "virtme-ng" / ".ssh"

    def ssh_spec(self, spec: TargetSpec) -> TargetSpec:
        """How the SSH layer reaches the guest: its port here, its key, its host keys."""
        known = self.home / "known_hosts"
        with known.open("w") as f:
            for pub in sorted((self.ssh_dir / "etc" / "ssh").glob("ssh_host_*_key.pub")):
                words = pub.read_text().split()[:2]
                f.write(f"[127.0.0.1]:{self.port} {' '.join(words)}\n")
        return TargetSpec(
            name=spec.name,
            kind=SSH,
            host="127.0.0.1",
            user="root",
            port=self.port,
            identity=str(self.ssh_dir / "id_virtme"),
            known_hosts=str(known),
            probe=spec.probe,
            rt_cpus=spec.rt_cpus,
        )

    def console_has(self, text: bytes) -> bool:
        try:
            return text in (self.home / "console.log").read_bytes()
        except OSError:
            return False

    def type(self, text: bytes) -> None:
        """TEXT typed on the guest's console (its shell reads it)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.write(text)
                self.proc.stdin.flush()

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = (self.home / "console.log").read_bytes()[-8192:].decode(errors="replace")
        except OSError:
            return ""
        text = text.replace("\0", "")
        tail = [one_line(x.strip()) for x in text.splitlines() if x.strip()][-lines:]
        return " | ".join(tail)

    def stop(self) -> None:
        """Power the guest off (SIGTERM to QEMU's process group, then SIGKILL)."""
        _end(self.guard)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        with contextlib.suppress(ProcessLookupError):  # QEMU outlived virtme-ng's own end
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        shutil.rmtree(self.home, ignore_errors=True)


class BootFailed(UnsupportedError):
    """The virtual machine ended before its SSH server answered."""


class PortTaken(BootFailed):
    """QEMU could not listen on the port chosen for the guest's sshd."""


def _end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def find_tool(name: str, package: str) -> str:
    """NAME beside this Python (the venv), else on PATH; UnsupportedError naming PACKAGE."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name, path=_path())
    if found:
        return found
    raise UnsupportedError(f"vm targets need {name}: install {package}")


def _path() -> str:
    """PATH with the venv and the sbin directories (virtme-ng runs depmod)."""
    parts = [str(Path(sys.executable).parent), *os.environ.get("PATH", "").split(os.pathsep)]
    parts += ["/usr/sbin", "/sbin"]
    return os.pathsep.join(dict.fromkeys(p for p in parts if p))


def kvm_usable() -> str | None:
    """None when /dev/kvm can be opened, else why not."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        return f"/dev/kvm: {e.strerror}"
    os.close(fd)
    return None


def _alive(pid: int) -> bool:
    """PID runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] not in (["Z"], ["X"])


def _remove_stale_homes() -> None:
    """The homes of guests whose rtlab died (their guards stopped the guests)."""
    for home in Path(tempfile.gettempdir()).glob(f"{HOME_PREFIX}*"):
        try:
            owner = int((home / "owner").read_text().strip())
        except (OSError, ValueError):
            continue
        if owner != os.getpid() and not _alive(owner):
            shutil.rmtree(home, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ssh_answers(port: int) -> bool:
    """The guest's sshd has sent its banner (QEMU accepts the connection before)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.settimeout(5)
            return s.recv(8).startswith(b"SSH-")
    except OSError:
        return False


def _command(vng: str, spec: TargetSpec, port: int, accel: str) -> list[str]:
    assert spec.kernel is not None
    cmd = [vng, "--run", spec.kernel, "--user", "root", "--ssh", str(port), "--ssh-tcp"]
    cmd += ["--cpus", str(spec.vm_cpus or DEFAULT_CPUS), "--memory", spec.memory or DEFAULT_MEMORY]
    if accel == "tcg":
        cmd.append("--disable-kvm")
    if spec.append:
        cmd += ["--append", spec.append]
    if spec.arch and spec.arch != host_arch():
        cmd += ["--arch", spec.arch]
    if spec.root:
        cmd += ["--root", spec.root]
    return cmd


def _start(spec: TargetSpec, accel: str, deadline_s: float, say: Any) -> Machine:
    """Boot SPEC under ACCEL; the machine once its sshd answers, else UnsupportedError.
    A port taken between its choice and QEMU's bind (another guest booting at the same
    time, as in a farm) is chosen again."""
    for attempt in range(PORT_TRIES):
        try:
            return _start_once(spec, accel, deadline_s, say, _free_port())
        except PortTaken:
            if attempt == PORT_TRIES - 1:
                raise
    raise AssertionError("unreachable")


def _start_once(spec: TargetSpec, accel: str, deadline_s: float, say: Any, port: int) -> Machine:
    vng = find_tool("vng", "virtme-ng (pip install virtme-ng)")
    _remove_stale_homes()
    home = Path(tempfile.mkdtemp(prefix=HOME_PREFIX))
    (home / "owner").write_text(f"{os.getpid()}\n")
    env = {**os.environ, "HOME": str(home), "PATH": _path()}
    log = (home / "console.log").open("wb")
    proc = subprocess.Popen(
        _command(vng, spec, port, accel),
        stdin=subprocess.PIPE,  # the guest's console: held open while it runs
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=home,
        start_new_session=True,
    )
    log.close()
    # if rtlab dies, even by SIGKILL, the guard's stdin ends and it stops the guest's group
    guard = subprocess.Popen(
        ["sh", "-c", GUARD, "guard", str(proc.pid)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    machine = Machine(proc, guard, port, accel, home)
    say(f"{spec.name}: booting {spec.kernel} under {accel.upper()} ...")
    start, typed = time.monotonic(), False
    try:
        while not _ssh_answers(port):
            if not typed and time.monotonic() - start > 5 and machine.console_has(PROMPT):
                machine.type(NETWORK)
                typed = True
            if proc.poll() is not None:
                if machine.console_has(PORT_IN_USE):
                    raise PortTaken(f"{spec.name}: port {port} taken")
                raise BootFailed(
                    f"{spec.name}: the virtual machine ended at boot under {accel.upper()} "
                    f"(exit {proc.returncode}): {machine.log_tail() or 'no output'}"
                )
            if time.monotonic() - start > deadline_s:
                raise TimeoutError
            time.sleep(1)
    except BaseException:
        machine.stop()
        raise
    say(f"{spec.name}: up after {time.monotonic() - start:.0f} s ({accel.upper()})")
    return machine


def boot(spec: TargetSpec, say: Any) -> Machine:
    """Boot SPEC as its accel asks; auto tries KVM (when usable) and falls back to TCG."""
    find_tool(ARCHS[spec.arch or host_arch()][1], "qemu-system-x86 or qemu-system-arm (apt)")
    why = kvm_usable() if (spec.arch or host_arch()) == host_arch() else "another architecture"
    if spec.accel == "kvm" and why:
        raise UnsupportedError(f"{spec.name}: accel=kvm: {why}")
    if spec.accel == "tcg" or why:
        machine = _start(spec, "tcg", TCG_BOOT_S, say)
        if spec.accel == "auto":
            machine.notes.append(f"TCG emulation: KVM is not usable ({why})")
        return machine
    try:
        return _start(spec, "kvm", KVM_BOOT_S, say)
    except TimeoutError:
        failed = f"the guest did not answer within {KVM_BOOT_S} s under KVM"
    except BootFailed as e:
        failed = str(e).removeprefix(f"{spec.name}: ")
    if spec.accel == "kvm":
        raise UnsupportedError(f"{spec.name}: accel=kvm: {failed}")
    say(f"{spec.name}: {failed}: booting under TCG emulation instead")
    machine = _start(spec, "tcg", TCG_BOOT_S, say)
    machine.notes.append(f"TCG emulation: {failed}")
    return machine


# --- the target -----------------------------------------------------------------------------


class VmTarget(Remote):
    """A kernel booted in a virtual machine for the time the target is open."""

    def __init__(
        self, spec: TargetSpec, accept_new_host_key: bool = False, farm: str | None = None,
        say: Any = None,
    ) -> None:  # fmt: skip
        say = say or (lambda text: print(f"rtlab: {text}", file=sys.stderr))
        try:
            self.machine = boot(spec, say)
        except TimeoutError:
            raise UnsupportedError(
                f"{spec.name}: the guest did not answer within {TCG_BOOT_S} s"
            ) from None
        try:
            super().__init__(self.machine.ssh_spec(spec), False, farm)
        except BaseException:
            self.machine.stop()
            raise
        self.vm_spec = spec
        self.name = spec.short

    @property
    def virtualization(self) -> dict[str, Any]:
        """What the measurements include: the hypervisor, its acceleration, the host (the
        audit's hypervisor check and the fingerprint take it from here)."""
        uname = platform.uname()
        return {
            "kind": "vm",
            "hypervisor": "qemu",
            "accel": self.machine.accel,
            "emulated": self.machine.accel == "tcg",
            "host_kernel": uname.release,
            "source": "the host that runs the virtual machine",
            "host_machine": uname.machine,
            "host_name": uname.node,
            "notes": list(self.machine.notes),
        }

    def record(self) -> dict[str, Any]:
        out = super().record()
        out.update(url=vm_url(self.vm_spec), spec=self.vm_spec.to_dict())
        out["virtualization"] = self.virtualization
        return out

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.machine.stop()


def vm_url(spec: TargetSpec) -> str:
    options = {
        "append": spec.append,
        "cpus": spec.vm_cpus,
        "memory": spec.memory,
        "accel": spec.accel,
        "arch": spec.arch,
        "root": spec.root,
    }
    query = "&".join(f"{k}={v}" for k, v in options.items() if v not in (None, ""))
    return f"vm:{spec.kernel}" + (f"?{query}" if query else "")


def with_defaults(spec: TargetSpec) -> TargetSpec:
    """SPEC with its unset VM options at their defaults."""
    return replace(
        spec,
        vm_cpus=spec.vm_cpus or DEFAULT_CPUS,
        memory=spec.memory or DEFAULT_MEMORY,
        accel=spec.accel or "auto",
        arch=spec.arch or host_arch(),
    )
