"""Root file systems for virtual machines of another architecture (vm:KERNEL?arch=arm64).

A guest of this machine's architecture boots on a read-only view of this machine's root
file system; an arm64 guest cannot run x86 programs, so it boots on a Debian root of its
own: `rtlab vm root --arch arm64` builds it once with mmdebstrap (Debian's `minbase`
plus an SSH server, busybox for virtme-ng's DHCP, and Debian's 6.1 PREEMPT_RT and generic
kernels, whose /boot/config-RELEASE the audit reads) and keeps it in the cache,
~/.cache/rtlab/vm-roots/ARCH-HASH, HASH naming its recipe (suite and packages): a new
recipe is a new directory, an old one is never patched. The guest sees it read-only.

Running the foreign architecture's package scripts needs QEMU's user-mode emulation
registered with binfmt_misc (qemu-user-static, binfmt-support). When it is not, the build
(as root) mounts binfmt_misc and enables the interpreter for its run, then puts both back.
The root is built in a temporary directory beside its place and renamed there when
complete: a build that fails or is interrupted leaves nothing half-made.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rtlab.errors import UnsupportedError, UserError
from rtlab.probe import one_line

SUITE = "bookworm"
#: Debian's name of each architecture (virtme-ng's --arch) -> QEMU's user-mode name.
QEMU_USER = {"arm64": "aarch64"}
#: In every root: what virtme-ng's guest init and `--ssh` use (bash, sshd and
#: ssh-keygen, busybox's udhcpc), and ip, modprobe and ps for the guest's console.
BASE_PACKAGES = ("openssh-server", "busybox-static", "iproute2", "kmod", "procps")
#: The kernels, installed by apt inside the root once it is made (INITRD=No: virtme-ng
#: builds its own initramfs; Debian's, made under emulation, would take minutes).
KERNEL_PACKAGES = {"arm64": ("linux-image-rt-arm64", "linux-image-arm64")}
#: Host commands of a build, with their Debian packages.
TOOLS = {
    "mmdebstrap": "mmdebstrap",
    "arch-test": "arch-test",
    "update-binfmts": "binfmt-support",
}
MANIFEST = "rtlab-root.json"  # in the root: its recipe and kernels (written last)
BINFMT = Path("/proc/sys/fs/binfmt_misc")
BUILD_S = 3600  # a build that takes longer is stopped (about 4 minutes on 2 CPUs)
MAX_KERNELS = 64  # releases listed from a root's /boot
RELEASE_RE = re.compile(r"[0-9][A-Za-z0-9.+_-]{0,99}")


def roots_dir() -> Path:
    """$RTLAB_VM_ROOTS, else $XDG_CACHE_HOME/rtlab/vm-roots (~/.cache/rtlab/vm-roots)."""
    env = os.environ.get("RTLAB_VM_ROOTS")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rtlab" / "vm-roots"


def recipe(arch: str) -> dict[str, Any]:
    """What a root of ARCH is made of; UserError for an architecture without roots."""
    if arch not in KERNEL_PACKAGES:
        known = ", ".join(sorted(KERNEL_PACKAGES))
        raise UserError(f"no root file systems for arch={arch} (only for {known})")
    packages = [*BASE_PACKAGES, *KERNEL_PACKAGES[arch]]
    return {"arch": arch, "suite": SUITE, "variant": "minbase", "packages": packages}


def default_root(arch: str) -> Path:
    """Where the root of ARCH's recipe is (built or not)."""
    text = json.dumps(recipe(arch), sort_keys=True).encode()
    return roots_dir() / f"{arch}-{hashlib.sha256(text).hexdigest()[:12]}"


def kernels(root: Path) -> list[str]:
    """The releases of the kernels in ROOT/boot (vmlinuz-RELEASE), oldest name first."""
    try:
        names = sorted(p.name for p in (root / "boot").iterdir())
    except OSError:
        return []
    out = [n.removeprefix("vmlinuz-") for n in names if n.startswith("vmlinuz-")]
    return [r for r in out if RELEASE_RE.fullmatch(r)][:MAX_KERNELS]


def is_root(path: Path) -> bool:
    """PATH is a root rtlab built (its manifest is written last)."""
    return (path / MANIFEST).is_file()


def check_root(path: Path, where: str) -> Path:
    """PATH as a guest's root: a directory with bin/sh and usr/sbin/sshd; else UserError."""
    try:
        ok = path.is_dir() and (path / "usr/sbin/sshd").exists() and (path / "bin/sh").exists()
    except OSError:
        ok = False
    if not ok:
        raise UserError(
            f"{where}: root {one_line(str(path))}: not a root file system with an SSH "
            f"server (usr/sbin/sshd): build one with `rtlab vm root --arch ARCH`"
        )
    return path.resolve()


def find_tool(name: str) -> str:
    found = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
    if not found:
        raise UnsupportedError(f"building a root needs {name}: apt-get install {TOOLS[name]}")
    return found


def build_root(arch: str, say: Callable[[str], None], rebuild: bool = False) -> Path:
    """The root of ARCH's recipe, built when missing (or REBUILD): its path."""
    path = default_root(arch)
    if is_root(path) and not rebuild:
        return path
    if os.geteuid() != 0:
        raise UnsupportedError("building a root file system needs root (mmdebstrap's root mode)")
    tools = {name: find_tool(name) for name in TOOLS}
    rec = recipe(arch)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    start = time.monotonic()
    try:
        with _binfmt(arch, tools["update-binfmts"], say):
            _check_emulation(arch, tools["arch-test"])
            say(f"building the {arch} root in {path} (mmdebstrap, a few minutes) ...")
            _mmdebstrap(tools["mmdebstrap"], rec, tmp)
        found = kernels(tmp)
        if not found:
            raise UnsupportedError(f"the {arch} root has no kernel in /boot after its build")
        built_s = round(time.monotonic() - start, 1)
        manifest = {**rec, "kernels": found, "build_s": built_s, "built": int(time.time())}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"{arch} root built in {built_s:.0f} s: {path} (kernels: {', '.join(found)})")
    return path


def _mmdebstrap(mmdebstrap: str, rec: dict[str, Any], target: Path) -> None:
    kernels_cmd = (
        'chroot "$1" env INITRD=No DEBIAN_FRONTEND=noninteractive '
        "apt-get install -y -q --no-install-recommends " + " ".join(KERNEL_PACKAGES[rec["arch"]])
    )
    cmd = [
        mmdebstrap,
        f"--arch={rec['arch']}",
        f"--variant={rec['variant']}",
        f"--include={','.join(BASE_PACKAGES)}",
        f"--customize-hook={kernels_cmd}",
        rec["suite"],
        str(target),
    ]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=BUILD_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UnsupportedError(f"mmdebstrap did not finish within {BUILD_S} s") from None
    if r.returncode != 0:
        tail = [one_line(x) for x in r.stderr.decode(errors="replace").splitlines() if x.strip()]
        raise UnsupportedError(
            f"mmdebstrap failed (exit {r.returncode}): {' | '.join(tail[-3:]) or 'no output'}"
        )


def _check_emulation(arch: str, arch_test: str) -> None:
    """arch-test runs a program of ARCH: the chroot's package scripts will run."""
    r = subprocess.run([arch_test, arch], capture_output=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise UnsupportedError(
            f"this machine cannot run {arch} programs (arch-test {arch}: "
            f"{one_line(r.stdout.decode(errors='replace').strip()) or r.returncode}): "
            f"apt-get install qemu-user-static binfmt-support"
        )


@contextlib.contextmanager
def _binfmt(arch: str, update_binfmts: str, say: Callable[[str], None]) -> Iterator[None]:
    """QEMU's ARCH interpreter registered for the block; what was changed is undone."""
    name = f"qemu-{QEMU_USER[arch]}"
    mounted = enabled = False
    try:
        if not (BINFMT / "register").exists():
            subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)], check=True)
            mounted = True
            say(f"mounted binfmt_misc on {BINFMT} for the build")
        entry = BINFMT / name
        if not entry.exists() or "enabled" not in entry.read_text():
            r = subprocess.run([update_binfmts, "--enable", name], capture_output=True)
            if r.returncode != 0:
                raise UnsupportedError(
                    f"update-binfmts --enable {name} failed: install qemu-user-static"
                )
            enabled = True
            say(f"enabled {name} in binfmt_misc for the build")
        yield
    except subprocess.CalledProcessError as e:
        raise UnsupportedError(f"cannot mount binfmt_misc ({e})") from None
    finally:
        if enabled:
            subprocess.run([update_binfmts, "--disable", name], capture_output=True)
        if mounted:
            subprocess.run(["umount", str(BINFMT)], capture_output=True)
