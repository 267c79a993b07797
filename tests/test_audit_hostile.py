"""Hostile systems to audit: sysinfo documents and --root trees that are forged or damaged
(deep nesting, a gzip bomb as the kernel configuration, CPU numbers no Linux has, FIFOs,
huge directories). Every one is a one-line exit 2 or read within the documented limits,
never a traceback, a hang or memory exhaustion."""

from __future__ import annotations

import base64
import gzip
import json
import os
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtlab.errors import UserError
from rtlab.system import (
    SnapshotRoot,
    SysRoot,
    _root,
    audit_system,
    read_facts,
    snapshot_from_document,
)
from rtlab.system._capture import capture
from rtlab.system._cpus import MAX_CPUS
from rtlab.system._root import MAX_SYSTEM_FILE_BYTES, gunzip_text
from tests.test_ingest_hostile import finishes, open_writer

DESKTOP = Path(__file__).parent / "fixtures" / "systems" / "desktop"
CPU_FILES = (
    "/sys/devices/system/cpu/online",
    "/sys/devices/system/cpu/possible",
    "/sys/devices/system/cpu/isolated",
    "/sys/devices/system/cpu/nohz_full",
    "/sys/devices/system/cpu/cpu0/topology/thread_siblings_list",
    "/proc/sys/kernel/watchdog_cpumask",
)
MASK_FILES = ("/proc/irq/default_smp_affinity", "/sys/devices/virtual/workqueue/cpumask")


def _document(tree: Path = DESKTOP) -> dict:
    """A sysinfo document of the files of TREE, as rtlab-probe sysinfo writes it."""
    files, binary = {}, {}
    for p in sorted(tree.rglob("*")):
        if p.is_file():
            name = "/" + str(p.relative_to(tree))
            data = p.read_bytes()
            if name.endswith(".gz"):
                binary[name] = base64.b64encode(data).decode()
            else:
                files[name] = data.decode()
    return {"schema": 1, "kind": "sysinfo", "files": files, "base64": binary, "uname": {}}


def _bomb(inflated: int) -> bytes:
    """gzip data of INFLATED zero bytes (about a thousandth of that in size)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [z.compress(bytes(1 << 20)) for _ in range(inflated >> 20)]
    return b"".join([*parts, z.compress(bytes(inflated % (1 << 20))), z.flush()])


def _audit_from(rtlab, tmp_path: Path, doc: dict | str) -> tuple[int, str, str]:
    path = tmp_path / "si.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return rtlab("audit", "--from", str(path))


def _one_line_exit_2(rc: int, err: str, *words: str) -> None:
    assert rc == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err
    for w in words:
        assert w in err, err


def test_the_document_of_a_tree_audits_like_the_tree(rtlab, tmp_path):
    rc, out, _ = _audit_from(rtlab, tmp_path, _document())
    rc2, out2, _ = rtlab("audit", "--root", str(DESKTOP))
    assert rc == rc2 and rc in (0, 1) and out.splitlines()[1:] == out2.splitlines()[1:]


@pytest.mark.parametrize("depth", [65, 950, 100_000])
def test_deeply_nested_documents_are_one_line_exit_2(rtlab, tmp_path, depth):
    text = '{"kind": "sysinfo", "schema": 1, "files": ' + "[" * depth + "]" * depth + "}"
    rc, _, err = _audit_from(rtlab, tmp_path, text)
    _one_line_exit_2(rc, err, "si.json", "nested deeper than 64 levels")


def test_a_document_with_too_many_values_is_refused_before_parsing(rtlab, tmp_path):
    many = "[" + "0," * _root.MAX_SYSINFO_VALUES + "0]"
    rc, _, err = _audit_from(rtlab, tmp_path, '{"kind": "sysinfo", "files": ' + many + "}")
    _one_line_exit_2(rc, err, f"more than {_root.MAX_SYSINFO_VALUES} JSON values")


def test_a_gzip_bomb_as_the_kernel_configuration_is_exit_2(rtlab, tmp_path):
    doc = _document()
    doc["base64"]["/proc/config.gz"] = base64.b64encode(_bomb(MAX_SYSTEM_FILE_BYTES + 1)).decode()
    rc, _, err = _audit_from(rtlab, tmp_path, doc)
    _one_line_exit_2(rc, err, "/proc/config.gz: inflates to more than 16 MiB")
    tree = tmp_path / "tree"
    (tree / "proc").mkdir(parents=True)
    (tree / "proc" / "config.gz").write_bytes(_bomb(64 << 20))
    rc, _, err = rtlab("audit", "--root", str(tree))
    _one_line_exit_2(rc, err, "/proc/config.gz: inflates to more than 16 MiB")


@settings(max_examples=30)
@given(st.binary(min_size=1, max_size=3000), st.integers(min_value=1, max_value=4))
def test_gzip_members_inflate_like_gzip_and_garbage_is_none(data, members):
    """Concatenated members, as gzip writes them, are one text; what is no gzip is None."""
    size = max(1, len(data) // members)
    chunks = [data[i : i + size] for i in range(0, len(data), size)]
    packed = b"".join(gzip.compress(c) for c in chunks)
    assert gunzip_text(packed, "x") == data.decode(errors="replace")
    assert gunzip_text(packed[:-1], "x") is None or len(packed) < 2
    assert gunzip_text(data, "x") is None or data.startswith(b"\x1f\x8b")


@pytest.mark.parametrize("name", CPU_FILES)
def test_a_cpu_no_linux_has_is_one_line_exit_2(rtlab, tmp_path, name):
    doc = _document()
    doc["files"][name] = "0-999999999\n"
    doc["files"]["/sys/devices/system/cpu/isolated"] = "1\n"  # the task lists are read too
    rc, _, err = _audit_from(rtlab, tmp_path, doc)
    if name == "/sys/devices/system/cpu/isolated":  # the isolation guess ignores garbage
        assert rc in (0, 1, 2) and "Traceback" not in err
        return
    _one_line_exit_2(rc, err, f"{name}:", "CPU 999999999 is beyond 8191")


@pytest.mark.parametrize("name", MASK_FILES)
def test_a_mask_with_a_cpu_no_linux_has_is_one_line_exit_2(rtlab, tmp_path, name):
    doc = _document()
    doc["files"][name] = "1" + "0" * 5000 + "\n"  # CPU 20000
    rc, _, err = _audit_from(rtlab, tmp_path, doc)
    _one_line_exit_2(rc, err, f"{name}: CPU 20000 is beyond 8191")


CPU_TEXT = st.text(alphabet=st.sampled_from("0123456789-,:/ fx\n"), max_size=40) | st.sampled_from(
    [f"0-{MAX_CPUS - 1}", f"{MAX_CPUS}", "0-999999999", "f" * 3000, "", "(null)"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(CPU_FILES + MASK_FILES), CPU_TEXT, min_size=1))
def test_generated_cpu_files_give_facts_or_one_user_error(contents):
    doc = _document()
    doc["files"].update(contents)
    root = snapshot_from_document(doc, "si.json")
    try:
        _, audit = audit_system(root)
    except UserError as e:
        assert str(e).startswith("si.json: /") and "beyond 8191" in str(e)
    else:
        facts = audit["facts"]
        for key in ("cpus_online", "cpus_possible", "rt_cpus", "nohz_full_cpus"):
            assert all(0 <= c < MAX_CPUS for c in facts[key] or [])


def test_fifo_and_devices_in_a_tree_read_as_absent_without_blocking(tmp_path):
    tree = tmp_path / "tree"
    (tree / "proc").mkdir(parents=True)
    os.mkfifo(tree / "proc" / "cmdline")
    (tree / "sys/devices/system/cpu").mkdir(parents=True)
    os.symlink("/dev/zero", tree / "sys/devices/system/cpu/online")
    root = SysRoot(tree)
    facts = finishes(lambda: read_facts(root), open_writer(tree / "proc" / "cmdline"))
    assert facts.cmdline is None and facts.cpus_online == []
    dest = tmp_path / "copy"
    finishes(lambda: capture(root, dest), open_writer(tree / "proc" / "cmdline"))
    assert not (dest / "proc" / "cmdline").exists()


def test_system_files_are_cut_at_their_limit(monkeypatch):
    monkeypatch.setattr(_root, "MAX_SYSTEM_FILE_BYTES", 16)
    assert len(SysRoot().read("proc/self/status") or "") <= 16


def test_directories_list_their_first_entries(tmp_path, monkeypatch):
    for i in range(10):
        (tmp_path / f"{i:02}").mkdir()
    monkeypatch.setattr(_root, "MAX_DIR_ENTRIES", 3)
    listed = SysRoot(tmp_path).listdir("")
    assert listed is not None and len(listed) == 3 and listed == sorted(listed)


def test_snapshot_uname_keeps_scalars_only():
    doc = _document()
    doc["uname"] = {"release": "6.1", "deep": [[["x"]]], "n": 3}
    root = snapshot_from_document(doc, "si.json")
    assert isinstance(root, SnapshotRoot) and root.uname == {"release": "6.1", "n": "3"}


def test_odd_process_irq_and_state_names_are_skipped():
    """ "²" is a digit to str.isdigit but no int; 5000 digits are beyond int's limit."""
    doc = _document()
    for name in ("²", "٣", "1" * 5000):
        doc["files"][f"/proc/irq/{name}/smp_affinity_list"] = "0"
        doc["files"][f"/proc/{name}/stat"] = "1 (x) S" + " 0" * 50
        doc["files"][f"/proc/{name}/status"] = "Cpus_allowed_list:\t0\n"
        doc["files"][f"/sys/devices/system/cpu/cpu0/cpuidle/state{name}/name"] = "C1"
    _, audit = audit_system(snapshot_from_document(doc, "si.json"))
    assert all(k.isascii() and k.isdigit() for k in audit["facts"]["irqs"])


def test_cpu_numbers_kept_in_all_are_bounded(monkeypatch):
    """A million short lists ("0-8191") must not expand to billions of CPU numbers."""
    from rtlab.system import _facts

    monkeypatch.setattr(_facts, "MAX_KEPT_CPUS", 1000)
    doc = _document()
    for irq in range(3):
        doc["files"][f"/proc/irq/{irq}/smp_affinity_list"] = "0-511"
    with pytest.raises(UserError, match=r"si\.json: thread siblings and IRQ affinities name more"):
        audit_system(snapshot_from_document(doc, "si.json"))
