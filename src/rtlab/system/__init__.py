"""What the measured system is: facts, fingerprint, CPU isolation and the readiness audit."""

from rtlab.system._audit import (
    FAIL,
    INFO,
    OK,
    STATUSES,
    WARN,
    Context,
    Finding,
    audit_document,
    exit_status,
    run_audit,
)
from rtlab.system._board import BoardId, board_identity, read_board
from rtlab.system._cmdline import Cmdline, parse_isolcpus, split_cmdline
from rtlab.system._cpus import MAX_CPUS, format_cpulist, parse_cpulist, parse_cpumask
from rtlab.system._facts import Facts, parse_task_stat, read_facts
from rtlab.system._fingerprint import audit_system, collect_fingerprint, fingerprint_from_facts
from rtlab.system._isolation import Isolation, isolated_cpus
from rtlab.system._kernel import kernel_config, preempt_model
from rtlab.system._root import (
    LIVE_ROOT,
    RecordingRoot,
    Root,
    SnapshotRoot,
    SysRoot,
    load_snapshot,
    snapshot_from_bytes,
    snapshot_from_document,
)
from rtlab.system._virt import (
    EMULATED_WARNING,
    FINGERPRINT_SCHEMA,
    is_emulated,
    migrate_fingerprint,
    virt_label,
    virt_warning,
    virtualization_of,
)
from rtlab.system._virt import KINDS as VIRTUALIZATION_KINDS
from rtlab.system._virt import UNKNOWN as UNKNOWN_VIRTUALIZATION

__all__ = [
    "EMULATED_WARNING",
    "FAIL",
    "FINGERPRINT_SCHEMA",
    "INFO",
    "LIVE_ROOT",
    "MAX_CPUS",
    "OK",
    "STATUSES",
    "UNKNOWN_VIRTUALIZATION",
    "VIRTUALIZATION_KINDS",
    "WARN",
    "BoardId",
    "Cmdline",
    "Context",
    "Facts",
    "Finding",
    "Isolation",
    "RecordingRoot",
    "Root",
    "SnapshotRoot",
    "SysRoot",
    "audit_document",
    "audit_system",
    "board_identity",
    "collect_fingerprint",
    "exit_status",
    "fingerprint_from_facts",
    "format_cpulist",
    "is_emulated",
    "isolated_cpus",
    "kernel_config",
    "load_snapshot",
    "migrate_fingerprint",
    "parse_cpulist",
    "parse_cpumask",
    "parse_isolcpus",
    "parse_task_stat",
    "preempt_model",
    "read_board",
    "read_facts",
    "run_audit",
    "snapshot_from_bytes",
    "snapshot_from_document",
    "split_cmdline",
    "virt_label",
    "virt_warning",
    "virtualization_of",
]
