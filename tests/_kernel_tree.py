"""Debian's 6.1 kernel tree, cut down to what Kconfig reads, for merging config fragments.

The Debian package linux-source-6.1 ships /usr/src/linux-source-6.1.tar.xz. Only the
Kconfig files, scripts/ (merge_config.sh, scripts/kconfig and the helpers Kconfig calls),
the top Makefile and arch/x86's Makefiles are extracted: enough for `make olddefconfig`
(which builds scripts/kconfig/conf with flex, bison and gcc), no kernel build. The tree is
cached under $RTLAB_TEST_CACHE (default ~/.cache/rtlab-tests), keyed by the package's
version, so only the first run pays for the extraction.

The tarball is the tree without the PREEMPT_RT patch set (Debian applies it only to build
linux-image-rt), so x86 does not select ARCH_SUPPORTS_RT there. A second tree, `rt`,
shares every file but arch/x86/Kconfig, which gains the one line of that patch set that
matters to Kconfig: `select ARCH_SUPPORTS_RT` under X86_64 ("x86: Allow to enable RT").
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ._skips import DEBS, need_tool, skip_setup

TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
PACKAGE = DEBS[str(TARBALL)]
TOP = "linux-source-6.1"
MEMBERS = (f"{TOP}/Makefile", f"{TOP}/scripts/*", "*Kconfig*", f"{TOP}/arch/x86/Makefile*")
RT_LINE = "\tselect ARCH_SUPPORTS_RT\n"
ARCH = "x86_64"
STEP_TIMEOUT_S = 600  # one extraction or make run; the first extraction takes ~15 s


@dataclass(frozen=True)
class Tree:
    path: Path
    version: str  # the package's version: the cache key
    extract_s: float | None  # seconds the extraction took in this run, None if cached

    def kconfig_files(self) -> list[Path]:
        return sorted(self.path.rglob("Kconfig*"))


def debian_config(kind: str) -> Path:
    """/boot/config-6.1.0-<n>[-rt]-amd64 of Debian's newest 6.1 kernel of KIND ("generic", "rt")."""
    package = "linux-image-rt-amd64" if kind == "rt" else "linux-image-amd64"
    found = [
        p
        for p in Path("/boot").glob("config-6.1.0-*-amd64")
        if p.name.endswith("-rt-amd64") == (kind == "rt")
    ]
    if not found:
        skip_setup(f"no {kind} 6.1 kernel configuration in /boot ({package}: make debs)")
    return max(found, key=lambda p: int(re.findall(r"\d+", p.name)[3]))


def cache_dir() -> Path:
    base = os.environ.get("RTLAB_TEST_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "rtlab-tests"


def _package_version() -> str:
    r = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", PACKAGE], capture_output=True, text=True
    )
    if r.returncode == 0 and r.stdout:
        return r.stdout
    st = TARBALL.stat()  # not from the package: its size and time stand for a version
    return f"{st.st_size}-{int(st.st_mtime)}"


def _run(args: list[str], cwd: Path | None = None, env: dict | None = None) -> str:
    r = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S
    )
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def _extract(dest: Path) -> None:
    """The Kconfig part of the tarball into DEST, with conf built (make olddefconfig)."""
    tmp = Path(tempfile.mkdtemp(prefix=".extract.", dir=dest.parent))
    try:
        _run(["tar", "-xJf", str(TARBALL), "-C", str(tmp), "--wildcards", *MEMBERS])
        generic = tmp / "generic"
        (tmp / TOP).rename(generic)
        merge(generic, Path("/dev/null"), Path("/dev/null"), tmp / "empty.config")  # builds conf
        shutil.rmtree(generic / "include")  # written by every olddefconfig: not shared
        rt = tmp / "rt"
        _run(["cp", "-al", str(generic), str(rt)])  # hard links: the files are never rewritten
        kconfig = rt / "arch/x86/Kconfig"
        text = kconfig.read_text()
        head = "config X86_64\n\tdef_bool y\n\tdepends on 64BIT\n"
        assert text.count(head) == 1 and "ARCH_SUPPORTS_RT" not in text, "arch/x86/Kconfig moved"
        kconfig.unlink()  # a new file, not the linked one of the generic tree
        kconfig.write_text(text.replace(head, head + RT_LINE))
        (tmp / "empty.config").unlink()
        tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def kernel_trees() -> dict[str, Tree]:
    """{"generic": the tree as packaged, "rt": with ARCH_SUPPORTS_RT on x86_64}."""
    if not TARBALL.is_file():
        skip_setup(f"no {TARBALL} (Debian package {PACKAGE}: make debs)")
    for tool in ("xz", "flex", "bison"):
        need_tool(tool)
    version = _package_version()
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    key = re.sub(r"[^\w.+~-]", "_", version)
    dest = cache / f"{PACKAGE}_{key}"
    took = None
    with open(cache / ".lock", "w") as lock:  # another run extracting waits for it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not dest.is_dir():
            start = time.monotonic()
            _extract(dest)
            took = time.monotonic() - start
    return {kind: Tree(dest / kind, version, took) for kind in ("generic", "rt")}


def merge(tree: Path, base: Path, fragment: Path, out: Path) -> str:
    """`merge_config.sh -m BASE FRAGMENT && make olddefconfig` into OUT, as the fragment's
    header says; returns what both printed."""
    env = {**os.environ, "KCONFIG_CONFIG": str(out), "ARCH": ARCH}
    script = str(tree / "scripts/kconfig/merge_config.sh")
    log = _run(["sh", script, "-m", str(base), str(fragment)], cwd=out.parent, env=env)
    return log + _run(["make", "-s", "-C", str(tree), f"ARCH={ARCH}", "olddefconfig"], env=env)


def read_config(path: Path) -> dict[str, str | None]:
    """CONFIG_X -> value, None for "# CONFIG_X is not set"; absent: not in the file."""
    out: dict[str, str | None] = {}
    for line in path.read_text().splitlines():
        if m := re.fullmatch(r"(CONFIG_\w+)=(.*)", line):
            out[m[1]] = m[2]
        elif m := re.fullmatch(r"# (CONFIG_\w+) is not set", line):
            out[m[1]] = None
    return out


def defined_symbols(tree: Tree) -> dict[str, set[str]]:
    """CONFIG_<NAME> -> the Kconfig files (relative) with `config NAME` or `menuconfig NAME`."""
    out: dict[str, set[str]] = {}
    pattern = re.compile(r"^\s*(?:menu)?config\s+(\w+)\s*$", re.M)
    for path in tree.kconfig_files():
        for name in pattern.findall(path.read_text(errors="replace")):
            out.setdefault(f"CONFIG_{name}", set()).add(str(path.relative_to(tree.path)))
    return out
