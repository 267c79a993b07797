"""vm:KERNEL targets without booting anything: their syntax, their targets.toml tables,
what they record, and the refusals (exit 2 for bad input, exit 3 for what this machine
cannot run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtlab.errors import UnsupportedError, UserError
from rtlab.targets import TargetSpec, _vm, parse_target, read_targets
from rtlab.targets._vm import host_arch, parse_vm_url, vm_url


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    image = tmp_path / "boot" / "vmlinuz-6.1.0-99-rt-amd64"
    image.parent.mkdir()
    image.write_bytes(b"not really a kernel")
    return image


def test_an_image_with_options(kernel):
    spec = parse_target(f"vm:{kernel}?cpus=3&memory=2G&accel=tcg&append=isolcpus=1 nohz_full=1")
    assert (spec.kind, spec.name, spec.kernel) == ("vm", "vm-6.1.0-99-rt-amd64", str(kernel))
    assert (spec.vm_cpus, spec.memory, spec.accel, spec.arch) == (3, "2G", "tcg", host_arch())
    assert spec.append == "isolcpus=1 nohz_full=1"
    assert parse_target(spec.url) == spec  # the URL it records names the same machine
    assert TargetSpec.from_dict(spec.to_dict(), "manifest") == spec


def test_defaults_and_percent_escapes(kernel):
    spec = parse_vm_url(f"vm:{kernel}?append=quiet%26loud")
    assert (spec.vm_cpus, spec.memory, spec.accel) == (2, "1G", "auto")
    assert spec.append == "quiet&loud"
    assert vm_url(spec).startswith(f"vm:{kernel}?")


def test_a_release_is_looked_up_in_boot(monkeypatch, kernel):
    monkeypatch.setattr(_vm, "BOOT", kernel.parent)
    assert parse_target("vm:6.1.0-99-rt-amd64").kernel == str(kernel)
    with pytest.raises(UserError, match="is the kernel package installed"):
        parse_target("vm:6.1.0-0-none")


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ("cpus=0", "cpus must be a number from 1 to 64"),
        ("cpus=65", "cpus must be a number from 1 to 64"),
        ("cpus=two", "is not a number"),
        ("memory=12", "at least 256M"),
        ("memory=1T", "a size such as"),
        ("accel=hvf", "is not one of auto, kvm, tcg"),
        ("arch=riscv64", "is not one of"),
        ("speed=fast", "unknown option 'speed'"),
        ("cpus=2&cpus=3", "given twice"),
        ("cpus", "options are key=value"),
        ("append=a%0Ab", "printable"),
    ],
)
def test_bad_options_are_one_line_exit_2(kernel, options, why, rtlab):
    with pytest.raises(UserError, match=why):
        parse_target(f"vm:{kernel}?{options}")
    rc, _, err = rtlab("audit", "--target", f"vm:{kernel}?{options}")
    assert rc == 2 and why.split("'")[0] in err and len(err.strip().splitlines()) == 1


def test_a_missing_kernel_is_exit_2(tmp_path, rtlab):
    rc, _, err = rtlab("audit", "--target", f"vm:{tmp_path}/vmlinuz-none")
    assert rc == 2 and "not a file" in err
    rc, _, err = rtlab("audit", "--target", "vm:")
    assert rc == 2 and "no kernel" in err


def test_kvm_for_another_architecture_is_refused(kernel):
    other = "arm64" if host_arch() == "x86_64" else "x86_64"
    with pytest.raises(UserError, match="only guests of this machine's architecture"):
        parse_target(f"vm:{kernel}?arch={other}&accel=kvm")


def test_targets_file_tables(tmp_path, kernel):
    f = tmp_path / "kernels.toml"
    f.write_text(
        f'[rt]\nvm = "{kernel}"\nappend = "isolcpus=1"\ncpus = 2\nrt_cpus = "1"\n'
        f'[generic]\nvm = "{kernel}"\naccel = "tcg"\n'
    )
    targets = read_targets(f)
    assert targets["rt"].kind == "vm" and targets["rt"].name == "rt"
    assert (targets["rt"].append, targets["rt"].rt_cpus) == ("isolcpus=1", "1")
    assert targets["generic"].accel == "tcg"


@pytest.mark.parametrize(
    ("table", "why"),
    [
        ('vm = "{k}"\nhost = "board"\n', "give one of host"),
        ('vm = "{k}"\nuser = "root"\n', "not for a vm target"),
        ('host = "board"\ncpus = 2\n', "only for a vm = KERNEL target"),
        ('vm = "{k}"\ncpus = "2"\n', "'cpus' must be a number"),
        ('vm = "{k}"\nmemory = "1K"\n', "a size such as"),
    ],
)
def test_bad_vm_tables(tmp_path, kernel, table, why):
    f = tmp_path / "t.toml"
    f.write_text("[x]\n" + table.format(k=kernel))
    with pytest.raises(UserError, match=why):
        read_targets(f)


def test_kvm_asked_where_it_cannot_open_is_exit_3(kernel, monkeypatch):
    monkeypatch.setattr(_vm, "kvm_usable", lambda: "/dev/kvm: Permission denied")
    monkeypatch.setattr(_vm, "find_tool", lambda name, package: name)
    spec = parse_target(f"vm:{kernel}?accel=kvm")
    with pytest.raises(UnsupportedError, match="accel=kvm: /dev/kvm: Permission denied"):
        _vm.boot(spec, lambda text: None)


def test_missing_tools_are_exit_3(kernel, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(_vm.sys, "executable", "/nonexistent/python")
    spec = parse_target(f"vm:{kernel}?accel=tcg")
    with pytest.raises(UnsupportedError, match="vm targets need qemu-system"):
        _vm.boot(spec, lambda text: None)


def test_a_port_taken_at_boot_is_chosen_again(monkeypatch):
    """Two guests booting at once (a farm) can be given the same free port: the one whose
    QEMU cannot listen on it boots again on another port."""
    from rtlab.targets import _vm

    tried: list[int] = []
    ports = iter([40001, 40002, 40003])

    def start_once(spec, accel, deadline_s, say, port):
        tried.append(port)
        if len(tried) < 3:
            raise _vm.PortTaken(f"port {port} taken")
        return "machine"

    monkeypatch.setattr(_vm, "_free_port", lambda: next(ports))
    monkeypatch.setattr(_vm, "_start_once", start_once)
    assert _vm._start(None, "tcg", 1.0, print) == "machine"
    assert tried == [40001, 40002, 40003]


def test_ports_are_tried_a_bounded_number_of_times(monkeypatch):
    from rtlab.targets import _vm

    def start_once(spec, accel, deadline_s, say, port):
        raise _vm.PortTaken("taken")

    monkeypatch.setattr(_vm, "_start_once", start_once)
    with pytest.raises(_vm.PortTaken):
        _vm._start(None, "tcg", 1.0, print)
