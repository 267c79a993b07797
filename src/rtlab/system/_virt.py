"""Whether the measured system runs under a hypervisor, read through its root, and what a
stored result says about it (the fingerprint's `virtualization`).

A guest's latencies include the hypervisor's: a vCPU can be descheduled by the host at any
time, timers and interrupts are delivered through it, and under emulation (QEMU's TCG) every
instruction is translated. What is read (every file through the target's root):

- /proc/cpuinfo: the x86 `hypervisor` flag (X86_FEATURE_HYPERVISOR, CPUID.1:ECX bit 31),
  and the model name QEMU gives its CPU under TCG ("QEMU TCG CPU version 2.5+");
- /sys/hypervisor/type: written by Xen ("xen") and by s390 z/VM;
- /sys/class/dmi/id/sys_vendor and product_name (drivers/firmware/dmi-id.c): the firmware's
  name of the machine, "QEMU", "VMware, Inc.", "Microsoft Corporation" / "Virtual Machine",
  "Xen", "Amazon EC2" ...;
- /sys/devices/system/clocksource/clocksource0/available_clocksource: `kvm-clock` exists
  only under KVM;
- /sys/firmware/devicetree/base/compatible (/proc/device-tree): QEMU's arm and riscv
  `virt` machines are "linux,dummy-virt" and "riscv-virtio" (a board's own name says
  nothing either way: read only as a sign of a hypervisor);
- /proc/stat: steal time, the 8th value of the `cpu` lines (proc_stat(5)): time the host
  ran something else while this system's vCPUs wanted to run.
"""

from __future__ import annotations

from typing import Any

from rtlab.system._root import Root

CPUINFO = "proc/cpuinfo"
TCG_MODEL = "QEMU TCG CPU"  # QEMU's x86 CPU model name under TCG emulation
HYPERVISOR_TYPE = "sys/hypervisor/type"
DMI = "sys/class/dmi/id"
DT_COMPATIBLE = "sys/firmware/devicetree/base/compatible"
DT_VIRT = ("linux,dummy-virt", "riscv-virtio")  # QEMU's virt machines (hw/arm, hw/riscv)
STAT = "proc/stat"
MAX_STAT_CPUS = 8192  # cpuN lines of /proc/stat read at most

# DMI vendor or product words -> the hypervisor's name (lower case); first match wins.
DMI_NAMES = (
    ("qemu", "qemu"),
    ("kvm", "kvm"),
    ("vmware", "vmware"),
    ("virtualbox", "virtualbox"),
    ("innotek", "virtualbox"),
    ("xen", "xen"),
    ("amazon ec2", "amazon-ec2"),
    ("google compute engine", "gce"),
    ("bochs", "bochs"),
    ("parallels", "parallels"),
    ("bhyve", "bhyve"),
    ("cloud hypervisor", "cloud-hypervisor"),
    ("firecracker", "firecracker"),
)
MICROSOFT = "microsoft corporation"  # Hyper-V: this vendor with product "Virtual Machine"

#: Fingerprint schema: 2 added `virtualization`.
FINGERPRINT_SCHEMA = 3
KINDS = ("none", "vm", "unknown")
#: What a result stored before virtualization was recorded says about it.
UNKNOWN: dict[str, Any] = {
    "kind": "unknown",
    "hypervisor": None,
    "accel": None,
    "emulated": None,
    "host_kernel": None,
    "source": "not recorded",
}
HYPERVISOR_WARNING = "latencies include the hypervisor's"
EMULATED_WARNING = (
    "emulated (TCG): latencies are emulation times, not this kernel's on real hardware"
)


def _dmi_name(vendor: str | None, product: str | None) -> str | None:
    v, p = (vendor or "").lower(), (product or "").lower()
    if v == MICROSOFT and "virtual machine" in p:
        return "hyper-v"
    for word, name in DMI_NAMES:
        if word in v or word in p:
            return name
    return None


def _steal(text: str | None) -> tuple[int | None, dict[str, int]]:
    """(steal ticks of the `cpu` line, {cpuN: ticks} of the CPUs with steal) from /proc/stat;
    (None, {}) when the lines have no steal value (kernels before 2.6.11)."""
    total: int | None = None
    per_cpu: dict[str, int] = {}
    for n, line in enumerate((text or "").splitlines()):
        if n > MAX_STAT_CPUS or not line.startswith("cpu"):
            continue
        fields = line.split()
        if len(fields) < 9 or not fields[8].isdigit():
            continue
        ticks = int(fields[8])
        if fields[0] == "cpu":
            total = ticks
        elif ticks and fields[0][3:].isdigit():
            per_cpu[fields[0]] = ticks
    return total, per_cpu


def read_hypervisor(root: Root, clocksources: list[str]) -> dict[str, Any]:
    """What the system's own files say of a hypervisor: {"present": True/False/None (nothing
    readable), "name", "evidence": [file: value], "steal_ticks", "steal_cpus"}."""
    evidence: list[str] = []
    readable = False
    name: str | None = None
    cpuinfo = (root.read(CPUINFO) or "").splitlines()
    flags = next((ln for ln in cpuinfo if ln.split(":")[0].strip() == "flags"), None)
    model = next((ln for ln in cpuinfo if ln.split(":")[0].strip() == "model name"), "")
    if flags is not None:
        readable = True
        if "hypervisor" in flags.split(":", 1)[-1].split():
            evidence.append("/proc/cpuinfo: flag hypervisor")
    emulated = TCG_MODEL in model
    if emulated:
        readable = True
        name = "qemu"
        evidence.append(f"/proc/cpuinfo: model name {model.split(':', 1)[-1].strip()}")
    hyp_type = root.read(HYPERVISOR_TYPE)
    if hyp_type:
        readable = True
        name = hyp_type.strip().lower()
        evidence.append(f"/{HYPERVISOR_TYPE}: {hyp_type.strip()}")
    vendor, product = root.read(f"{DMI}/sys_vendor"), root.read(f"{DMI}/product_name")
    if vendor is not None or product is not None:
        readable = True
        dmi = _dmi_name(vendor, product)
        if dmi:
            name = name or dmi
            evidence.append(f"/{DMI}/sys_vendor, product_name: {vendor or '-'}, {product or '-'}")
    compatible = (root.read(DT_COMPATIBLE) or "").replace("\0", " ")
    virt = next((c for c in DT_VIRT if c in compatible.split()), None)
    if virt:
        readable = True
        name = name or "qemu"
        evidence.append(f"/{DT_COMPATIBLE}: {virt}")
    if "kvm-clock" in clocksources:
        readable = True
        name = name or "kvm"
        evidence.append("clocksource kvm-clock available")
    steal, steal_cpus = _steal(root.read(STAT))
    return {
        "present": bool(evidence) if readable else None,
        "name": name,
        "emulated": emulated,
        "evidence": evidence,
        "steal_ticks": steal,
        "steal_cpus": steal_cpus,
    }


def detected_virtualization(hypervisor: dict[str, Any] | None) -> dict[str, Any]:
    """The fingerprint's `virtualization` of a system judged from its own files."""
    h = hypervisor or {}
    present = h.get("present")
    kind = "unknown" if present is None else ("vm" if present else "none")
    tcg = bool(present) and h.get("emulated") is True
    kvm = bool(present) and not tcg and h.get("name") == "kvm"
    return {
        "kind": kind,
        "hypervisor": h.get("name") if present else None,
        "accel": "tcg" if tcg else "kvm" if kvm else None,
        "emulated": True if tcg else False if kind == "none" or kvm else None,
        "host_kernel": None,
        "source": "detected on the target",
    }


def virtualization_of(doc: dict[str, Any] | None) -> dict[str, Any]:
    """The `virtualization` of a fingerprint or audit facts, UNKNOWN when not recorded."""
    v = (doc or {}).get("virtualization")
    if not isinstance(v, dict) or v.get("kind") not in KINDS:
        return dict(UNKNOWN)
    return v


def is_emulated(v: dict[str, Any]) -> bool:
    return v.get("emulated") is True or v.get("accel") == "tcg"


def virt_label(v: dict[str, Any]) -> str:
    """One word for a setup name: "tcg", "kvm", the hypervisor, "bare" or "unknown"."""
    if is_emulated(v):
        return "tcg"
    if v.get("kind") == "none":
        return "bare"
    if v.get("kind") == "vm":
        return str(v.get("accel") or v.get("hypervisor") or "vm")
    return "unknown"


def virt_warning(v: dict[str, Any]) -> str | None:
    """What a result measured there must say, None on bare metal or when not known."""
    if is_emulated(v):
        return EMULATED_WARNING
    if v.get("kind") == "vm":
        return f"virtual machine ({virt_label(v)}): {HYPERVISOR_WARNING}"
    return None


def migrate_fingerprint(data: dict[str, Any]) -> dict[str, Any]:
    """A stored system.json brought to FINGERPRINT_SCHEMA: 1 -> 2 adds `virtualization`
    ("unknown" unless a vm: target recorded it already); 2 -> 3 adds `board`, unknown
    (the board of such an experiment is named by its manifest's target and its host name,
    rtlab.system._board.board_identity)."""
    from rtlab.system._board import UNKNOWN_BOARD

    schema = data.get("schema")
    if isinstance(schema, int) and schema >= FINGERPRINT_SCHEMA:
        return data
    out = dict(data, schema=FINGERPRINT_SCHEMA)
    if not isinstance(schema, int) or schema < 2:
        out["virtualization"] = virtualization_of(data)
    if not isinstance(out.get("board"), dict):
        out["board"] = {**UNKNOWN_BOARD, "dmi": {}}
    return out
