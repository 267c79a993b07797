"""The system fingerprint stored with every experiment (system.json)."""

from __future__ import annotations

import os
import platform

from rtlab.system._facts import read_facts
from rtlab.system._root import LIVE_ROOT, Root
from rtlab.system._virt import FINGERPRINT_SCHEMA, virtualization_of


def fingerprint_from_facts(facts: dict, live: bool = False) -> dict:
    """system.json from the audit's facts (schema 2 added `virtualization`, 3 `board`: the
    machine-ID hash, DMI strings, device-tree model and, set by the target, its name)."""
    uname = platform.uname() if live else None
    online = facts.get("cpus_online") or []
    return {
        "schema": FINGERPRINT_SCHEMA,
        "hostname": facts.get("hostname") or (uname.node if uname else None),
        "kernel_release": facts.get("kernel_release") or (uname.release if uname else ""),
        "kernel_version": facts.get("kernel_version") or (uname.version if uname else ""),
        "machine": facts.get("arch") or (uname.machine if uname else None),
        "cmdline": facts.get("cmdline"),
        "cpus_online": online,
        "cpu_count": len(online) or (os.cpu_count() if live else None),
        "realtime": bool(facts.get("realtime")),
        "preempt_model": facts.get("preempt_model"),
        "hz": facts.get("hz"),
        "timer_mode": facts.get("timer_mode"),
        "kernel_config_found": facts.get("config_source") is not None,
        "isolated_cpus": facts.get("isolated_cpus") or [],
        "isolation_source": facts.get("isolation_source"),
        "isolation_partition": facts.get("isolation_partition"),
        "nohz_full_cpus": facts.get("nohz_full_cpus") or [],
        "rcu_nocbs_cpus": facts.get("rcu_nocbs_cpus") or [],
        "smt_active": facts.get("smt_active"),
        "governors": facts.get("governors") or {},
        "virtualization": virtualization_of(facts),
        "board": {
            "machine_id": facts.get("machine_id"),
            "dmi": facts.get("dmi") or {},
            "dt_model": facts.get("dt_model"),
            "target": None,
        },
    }


def collect_fingerprint(root: Root = LIVE_ROOT) -> dict:
    """Facts about the system a result depends on; every file read through ROOT."""
    return fingerprint_from_facts(read_facts(root).to_dict(), live=root.live)


def audit_system(
    root: Root = LIVE_ROOT,
    deadline_ns: int | None = None,
    rt_cpus: list[int] | None = None,
    virtualization: dict | None = None,
) -> tuple[dict, dict]:
    """The fingerprint (system.json) and the audit (audit.json) from one reading of ROOT;
    RT_CPUS: the real-time CPUs when known (default: the isolated ones); VIRTUALIZATION:
    what the host knows of a virtual machine it runs (else what ROOT's files say)."""
    from rtlab.system._audit import Context, audit_document, run_audit

    facts = read_facts(root, rt_cpus)
    if virtualization is not None:
        facts.virtualization = virtualization
    doc = audit_document(facts, run_audit(facts, Context(deadline_ns=deadline_ns)))
    return fingerprint_from_facts(doc["facts"], live=root.live), doc
