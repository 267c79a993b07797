"""What a virtual machine distorts is stated: the hypervisor check on fixture trees, the
fingerprint and manifest records with their migration, no verdict on emulated (TCG) runs,
and comparisons across virtualization without a latency verdict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rtlab.records import MANIFEST_SCHEMA, DamagedRecord, Manifest
from rtlab.store import Store
from rtlab.system import (
    FINGERPRINT_SCHEMA,
    Context,
    SysRoot,
    audit_system,
    migrate_fingerprint,
    read_facts,
    run_audit,
    virt_label,
)

from .conftest import make_root

FLAGS = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr sse2 {extra}\nbogomips\t: 4000\n"
STAT = "cpu  100 0 50 9000 10 0 5 {steal} 0 0\ncpu0 100 0 50 9000 10 0 5 {steal} 0 0\nintr 1 2\n"
DMI = "sys/class/dmi/id"


def audit(tmp_path: Path, files: dict[str, str], virtualization: dict | None = None):
    fingerprint, doc = audit_system(
        SysRoot(make_root(tmp_path, files)), virtualization=virtualization
    )
    found = {f["id"]: f for f in doc["findings"]}
    return fingerprint, found["cpu.hypervisor"], found["cpu.steal"]


@pytest.mark.parametrize(
    ("files", "name", "evidence"),
    [
        ({"proc/cpuinfo": FLAGS.format(extra="hypervisor")}, None, "flag hypervisor"),
        ({"sys/hypervisor/type": "xen\n"}, "xen", "/sys/hypervisor/type: xen"),
        (
            {f"{DMI}/sys_vendor": "QEMU\n", f"{DMI}/product_name": "Standard PC (Q35 + ICH9)\n"},
            "qemu",
            "QEMU",
        ),
        ({f"{DMI}/sys_vendor": "VMware, Inc.\n"}, "vmware", "VMware"),
        (
            {f"{DMI}/sys_vendor": "Microsoft Corporation\n", f"{DMI}/product_name": "Virtual "
             "Machine\n"},
            "hyper-v",
            "Microsoft Corporation",
        ),
        ({f"{DMI}/sys_vendor": "Amazon EC2\n"}, "amazon-ec2", "Amazon EC2"),
        (
            {"sys/devices/system/clocksource/clocksource0/available_clocksource": "kvm-clock tsc"},
            "kvm",
            "kvm-clock",
        ),
    ],
    ids=["cpuinfo-flag", "sys-hypervisor", "dmi-qemu", "dmi-vmware", "dmi-hyperv", "dmi-ec2",
         "kvm-clock"],
)  # fmt: skip
def test_a_hypervisor_is_found_from_each_source(tmp_path, files, name, evidence):
    fingerprint, hyp, _ = audit(tmp_path, files)
    assert hyp["status"] == "WARN", hyp
    assert evidence in hyp["evidence"]
    assert "latencies include the hypervisor's" in hyp["fix"]
    v = fingerprint["virtualization"]
    assert v["kind"] == "vm" and v["hypervisor"] == name
    assert fingerprint["schema"] == FINGERPRINT_SCHEMA


def test_a_bare_machine_is_ok_and_named_bare(tmp_path):
    files = {
        "proc/cpuinfo": FLAGS.format(extra="avx2"),
        f"{DMI}/sys_vendor": "Dell Inc.\n",
        f"{DMI}/product_name": "Precision 3660\n",
        "proc/stat": STAT.format(steal=0),
    }
    fingerprint, hyp, steal = audit(tmp_path, files)
    assert hyp["status"] == "OK" and steal["status"] == "OK"
    assert fingerprint["virtualization"]["kind"] == "none"
    assert virt_label(fingerprint["virtualization"]) == "bare"


def test_steal_time_means_a_shared_host(tmp_path):
    _, _, steal = audit(tmp_path, {"proc/stat": STAT.format(steal=1234)})
    assert steal["status"] == "WARN"
    assert "steal 1234 ticks" in steal["evidence"] and "cpu0 1234" in steal["evidence"]
    _, _, none = audit(tmp_path / "old", {"proc/stat": "cpu  1 2 3 4\n"})  # before 2.6.11
    assert none["status"] == "INFO"


def test_nothing_readable_is_unknown_not_bare(tmp_path):
    fingerprint, hyp, steal = audit(tmp_path, {"proc/cmdline": "quiet\n"})
    assert hyp["status"] == "INFO" and steal["status"] == "INFO"
    assert fingerprint["virtualization"]["kind"] == "unknown"


def test_an_emulated_cpu_is_recognised_from_its_model_name(tmp_path):
    """QEMU names its x86 CPU "QEMU TCG CPU" under TCG (seen in a vm: guest here)."""
    cpuinfo = "model name\t: QEMU TCG CPU version 2.5+\n" + FLAGS.format(extra="hypervisor")
    fingerprint, hyp, _ = audit(tmp_path, {"proc/cpuinfo": cpuinfo})
    assert hyp["status"] == "FAIL" and "model name QEMU TCG CPU" in hyp["evidence"]
    assert fingerprint["virtualization"]["accel"] == "tcg"
    assert fingerprint["virtualization"]["emulated"] is True
    kvm = "model name\t: QEMU Virtual CPU version 2.5+\n" + FLAGS.format(extra="hypervisor")
    fingerprint, hyp, _ = audit(tmp_path / "kvm", {"proc/cpuinfo": kvm})
    assert hyp["status"] == "WARN" and fingerprint["virtualization"]["emulated"] is None


def test_what_the_host_knows_of_an_emulated_guest_fails_the_check(tmp_path):
    host = dict(TCG)  # as a vm: target under TCG records it
    files = {f"{DMI}/sys_vendor": "QEMU\n", "proc/cpuinfo": FLAGS.format(extra="hypervisor")}
    fingerprint, hyp, _ = audit(tmp_path, files, virtualization=host)
    assert hyp["status"] == "FAIL" and "emulation times" in hyp["fix"]
    assert "host: qemu under TCG, host kernel 6.18.1" in hyp["evidence"]
    assert fingerprint["virtualization"]["accel"] == "tcg"
    assert virt_label(fingerprint["virtualization"]) == "tcg"


def test_this_machine_reports_what_it_runs_under():
    """Whatever this machine is, the check judges it and the facts say the same thing."""
    facts = read_facts(SysRoot(Path("/")))
    finding = next(f for f in run_audit(facts, Context()) if f.id == "cpu.hypervisor")
    present = facts.hypervisor["present"]
    assert finding.status == {True: "WARN", False: "OK", None: "INFO"}[present]
    assert facts.virtualization["kind"] == {True: "vm", False: "none", None: "unknown"}[present]


# --- stored records: fingerprint and manifest, with migration -------------------------------


def test_an_old_fingerprint_reads_as_unknown_and_keeps_a_recorded_vm():
    old = migrate_fingerprint({"schema": 1, "hostname": "box"})
    assert old["schema"] == FINGERPRINT_SCHEMA and old["virtualization"]["kind"] == "unknown"
    assert virt_label(old["virtualization"]) == "unknown"
    vm = {"kind": "vm", "hypervisor": "qemu", "accel": "kvm", "emulated": False}
    assert migrate_fingerprint({"schema": 1, "virtualization": vm})["virtualization"] == vm


def _manifest_v3(**extra) -> dict:
    return {"schema": 3, "id": "x", "name": "x", "cases": [], "series": [], **extra}


def test_an_old_manifest_is_migrated():
    m = Manifest.from_dict(_manifest_v3(), "experiment.json")
    assert m.schema == MANIFEST_SCHEMA and m.virtualization["kind"] == "unknown"
    vm = {"kind": "vm", "hypervisor": "qemu", "accel": "tcg", "emulated": True}
    m = Manifest.from_dict(_manifest_v3(target={"name": "vm", "virtualization": vm}), "e.json")
    assert m.virtualization == vm
    assert Manifest.from_dict(m.to_dict(), "again.json").virtualization == vm
    bad = dict(m.to_dict(), virtualization={"kind": "maybe"})
    with pytest.raises(DamagedRecord, match="virtualization kind 'maybe'"):
        Manifest.from_dict(bad, "bad.json")
    with pytest.raises(DamagedRecord, match="'virtualization' must be dict"):
        Manifest.from_dict(dict(m.to_dict(), virtualization="tcg"), "bad.json")


# --- reports and comparisons of real runs, one side made emulated -------------------------

TINY = """
[experiment]
name = "tiny"
[defaults]
loops = 200
interval = "500us"
settle = "0"
policy = "other"
[[series]]
name = "plain"
sweep = { forkcopy = [0] }
"""
TCG = {"kind": "vm", "hypervisor": "qemu", "accel": "tcg", "emulated": True,
       "host_kernel": "6.18.1", "source": "the host that runs the virtual machine"}  # fmt: skip
BARE = {"kind": "none", "hypervisor": None, "accel": None, "emulated": False,
        "host_kernel": None, "source": "detected on the target"}  # fmt: skip


def _set_virtualization(path: Path, v: dict) -> None:
    """What an experiment run under V would have stored (manifest, fingerprint, audit)."""
    for name, keys in (("experiment.json", ()), ("system.json", ()), ("audit.json", ("facts",))):
        data = json.loads((path / name).read_text())
        inner = data
        for k in keys:
            inner = inner[k]
        inner["virtualization"] = v
        (path / name).write_text(json.dumps(data))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One real run here, copied as a bare, an emulated (TCG) and a second bare experiment."""
    from rtlab.cli import main

    base = tmp_path_factory.mktemp("virt")
    (base / "tiny.toml").write_text(TINY)
    results = base / "results"
    assert main(["run", str(base / "tiny.toml"), "--results", str(results), "--json"]) == 0
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    for name, v in (("bare", BARE), ("tcg", TCG), ("bare2", BARE)):
        shutil.copytree(run, results / name)
        _set_virtualization(results / name, v)
    return results


def test_an_emulated_run_gets_no_verdict(rtlab, runs):
    r = str(runs)
    rc, out, _ = rtlab("show", "bare", "--deadline", "1ns", "--json", "--results", r)
    bare = json.loads(out)
    assert rc == 1 and bare["verdict"] == "FAIL" and bare["no_verdict"] is None
    rc, out, _ = rtlab("show", "tcg", "--deadline", "1ns", "--json", "--results", r)
    tcg = json.loads(out)
    assert rc == 0 and tcg["verdict"] is None and "emulation times" in tcg["no_verdict"]
    assert tcg["virtualization"] == "tcg" and bare["virtualization"] == "bare"
    rc, out, _ = rtlab("show", "tcg", "--deadline", "1ns", "--results", r)
    assert rc == 0 and "NO VERDICT" in out and "FAIL" not in out

    html = runs / "tcg.html"
    rc, out, _ = rtlab("report", "tcg", "--deadline", "1ns", "-o", str(html), "--json",
                       "--results", r)  # fmt: skip
    doc = json.loads(out)
    assert rc == 0 and doc["verdict"] is None and "emulation times" in doc["no_verdict"]["tcg"]
    text = html.read_text()
    assert "Emulated: no verdict" in text and "no verdict: emulated (TCG)" in text
    assert "latencies are emulation times" in text


def test_a_hypervisor_run_keeps_its_verdict_with_the_warning(rtlab, runs, tmp_path):
    kvm = {"kind": "vm", "hypervisor": "kvm", "accel": "kvm", "emulated": False}
    shutil.copytree(runs / "bare", tmp_path / "kvm")
    _set_virtualization(tmp_path / "kvm", kvm)
    rc, out, _ = rtlab("show", str(tmp_path / "kvm"), "--deadline", "1ns", "--json")
    doc = json.loads(out)
    assert rc == 1 and doc["verdict"] == "FAIL"
    assert "latencies include the hypervisor's" in doc["virtualization_warning"]


def test_a_comparison_across_virtualization_warns_and_judges_nothing(rtlab, runs):
    r = str(runs)
    rc, out, err = rtlab("compare", "bare", "tcg", "--fail-if", "max>0.01x", "--results", r)
    assert rc == 0, err
    assert err.index("WARNING") < err.index("NO VERDICT")
    assert "different virtualization" in err and "FAIL" not in err
    assert "bare" in out and "tcg" in out  # the setup names say it
    rc, out, _ = rtlab("compare", "bare", "tcg", "--fail-if", "max>0.01x", "--json",
                       "--results", r)  # fmt: skip
    doc = json.loads(out)
    assert rc == 0 and doc["failures"] == [] and doc["not_judged"]
    assert doc["virtualization"] == ["bare", "tcg"] and "different virtualization" in doc["warning"]
    assert doc["setups"][0].endswith("bare") and doc["setups"][1].endswith("tcg")
    # the same virtualization on both sides: judged as before
    rc, out, _ = rtlab("compare", "bare", "bare2", "--fail-if", "max>0.01x", "--json",
                       "--results", r)  # fmt: skip
    doc = json.loads(out)
    assert rc == 1 and doc["failures"] and doc["warning"] is None


def test_a_report_of_both_warns_first_and_gives_no_verdict(rtlab, runs):
    html = runs / "both.html"
    rc, out, _err = rtlab("report", "bare", "tcg", "--deadline", "1ns", "-o", str(html),
                         "--json", "--results", str(runs))  # fmt: skip
    doc = json.loads(out)
    assert rc == 0 and doc["verdict"] is None and "different virtualization" in doc["no_verdict"]
    text = html.read_text()
    assert "Different virtualization: no verdict" in text
    headline = text[text.index('role="status"') :]
    assert headline.index("different virtualization") < headline.index("emulation times")


def test_old_experiments_read_as_unknown(runs, tmp_path):
    """A directory stored before virtualization was recorded: schema 3 manifest, schema 1
    fingerprint, facts without it."""
    old = tmp_path / "old"
    shutil.copytree(runs / "bare", old)
    m = json.loads((old / "experiment.json").read_text())
    del m["virtualization"]
    m["schema"] = 3
    (old / "experiment.json").write_text(json.dumps(m))
    s = json.loads((old / "system.json").read_text())
    del s["virtualization"]
    s["schema"] = 1
    (old / "system.json").write_text(json.dumps(s))
    rec = Store(tmp_path).open("old")
    assert rec.manifest.virtualization["kind"] == "unknown"
    assert rec.system()["virtualization"]["kind"] == "unknown"
