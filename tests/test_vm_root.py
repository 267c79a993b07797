"""Guests of another architecture (vm:KERNEL?arch=arm64) without booting anything: the
root file system they boot on (`rtlab vm root`, targets/vmroot.py), how a release is
found in it, the virtme-ng command, and the refusals (exit 2) when there is none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtlab.errors import UserError
from rtlab.targets import TargetSpec, _vm, parse_target, vmroot
from rtlab.targets._vm import host_arch

RELEASE = "6.1.0-99-rt-arm64"
OTHER = "arm64" if host_arch() != "arm64" else "x86_64"


def make_root(path: Path, manifest: bool = True) -> Path:
    """A directory shaped like a root `rtlab vm root` built (no real programs in it)."""
    for rel in ("usr/sbin/sshd", "bin/sh", f"boot/vmlinuz-{RELEASE}", "boot/config-" + RELEASE):
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(b"")
    if manifest:
        (path / vmroot.MANIFEST).write_text(json.dumps(vmroot.recipe("arm64")))
    return path


@pytest.fixture
def roots(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RTLAB_VM_ROOTS", str(tmp_path / "roots"))
    return tmp_path / "roots"


@pytest.mark.skipif(host_arch() == "arm64", reason="arm64 is this machine's architecture")
def test_a_release_is_found_in_the_built_root(roots):
    root = make_root(vmroot.default_root("arm64"))
    assert root.parent == roots and root.name.startswith("arm64-")
    spec = parse_target(f"vm:{RELEASE}?arch=aarch64")
    assert (spec.arch, spec.root) == ("arm64", str(root.resolve()))
    assert spec.kernel == str(root / "boot" / f"vmlinuz-{RELEASE}")
    assert parse_target(spec.url) == spec and TargetSpec.from_dict(spec.to_dict(), "m") == spec
    cmd = _vm._command("vng", spec, 2222, "tcg")
    assert cmd[cmd.index("--arch") + 1] == "arm64" and cmd[cmd.index("--root") + 1] == spec.root
    assert "--disable-kvm" in cmd


@pytest.mark.skipif(host_arch() == "arm64", reason="arm64 is this machine's architecture")
def test_no_root_built_is_exit_2_naming_the_command(roots, rtlab):
    with pytest.raises(UserError, match=r"rtlab vm root --arch arm64"):
        parse_target(f"vm:{RELEASE}?arch=arm64")
    make_root(vmroot.default_root("arm64"), manifest=False)  # an unfinished build
    rc, _, err = rtlab("audit", "--target", f"vm:{RELEASE}?arch=arm64")
    assert rc == 2 and "rtlab vm root --arch arm64" in err and len(err.strip().splitlines()) == 1


def test_an_explicit_root(tmp_path, roots, rtlab):
    root = make_root(tmp_path / "r", manifest=False)
    spec = parse_target(f"vm:{RELEASE}?arch={OTHER}&root={root}")
    assert spec.root == str(root.resolve())
    rc, _, err = rtlab("audit", "--target", f"vm:6.1.0-0-none?arch={OTHER}&root={root}")
    assert rc == 2 and f"there: {RELEASE}" in err  # the kernels it has are named
    rc, _, err = rtlab("audit", "--target", f"vm:{RELEASE}?root={tmp_path}")
    assert rc == 2 and "not a root file system with an SSH server" in err


def test_the_recipe_names_the_directory(roots, monkeypatch):
    before = vmroot.default_root("arm64")
    monkeypatch.setattr(vmroot, "BASE_PACKAGES", (*vmroot.BASE_PACKAGES, "strace"))
    assert vmroot.default_root("arm64") != before  # a new recipe is a new root
    with pytest.raises(UserError, match="only for arm64"):
        vmroot.recipe("riscv64")


def test_a_built_root_is_not_built_again(roots, rtlab):
    root = make_root(vmroot.default_root("arm64"))
    rc, out, _ = rtlab("vm", "root", "--arch", "arm64", "--json")
    assert rc == 0 and json.loads(out) == {"arch": "arm64", "root": str(root), "kernels": [RELEASE]}
    rc, _, err = rtlab("vm", "root", "--arch", "mips")
    assert rc == 2 and len(err.strip().splitlines()) == 1


def test_kernels_lists_only_releases(tmp_path):
    make_root(tmp_path)
    (tmp_path / "boot" / "vmlinuz- bad").write_bytes(b"")
    assert vmroot.kernels(tmp_path) == [RELEASE]
    assert vmroot.kernels(tmp_path / "none") == []
