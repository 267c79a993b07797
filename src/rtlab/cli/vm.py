"""rtlab vm root: the root file system of virtual machines of another architecture."""

from __future__ import annotations

import click

from rtlab.cli._common import print_json
from rtlab.targets import vmroot


@click.group("vm")
def vm_group() -> None:
    """Virtual machines (vm:KERNEL targets)."""


@vm_group.command("root")
@click.option(
    "--arch",
    type=click.Choice(sorted(vmroot.KERNEL_PACKAGES)),
    default="arm64",
    show_default=True,
    help="the guests' architecture",
)
@click.option("--rebuild", is_flag=True, help="build it again even when it is there")
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout: the path and its kernels")
def root_cmd(arch: str, rebuild: bool, as_json: bool) -> None:
    """Build (once) the Debian root file system that vm:KERNEL?arch=ARCH guests boot on,
    with Debian's 6.1 PREEMPT_RT and generic kernels, and print its path and kernels.

    Needs root, mmdebstrap, arch-test, qemu-user-static and binfmt-support (apt); it is
    kept in ~/.cache/rtlab/vm-roots ($RTLAB_VM_ROOTS) and takes a few minutes."""
    path = vmroot.build_root(arch, lambda text: click.echo(f"rtlab: {text}", err=True), rebuild)
    releases = vmroot.kernels(path)
    if as_json:
        print_json({"arch": arch, "root": str(path), "kernels": releases})
        return
    click.echo(str(path))
    for release in releases:
        click.echo(f"  vm:{release}?arch={arch}")
