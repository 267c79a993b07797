"""Kernel configuration in the audit: every Kconfig symbol checked against the kernel's own
files, debug options judged with the boot line as the kernel does, and the fragment that
`rtlab audit --kconfig` writes for scripts/kconfig/merge_config.sh."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from rtlab.system import Context, SysRoot, read_facts, run_audit
from rtlab.system._kconfig_debug import DEBUG_OPTIONS, LATENCY_TRACERS, kstrtobool
from rtlab.system._kconfig_fragment import SETTING, kconfig_fragment, settings

from .conftest import make_root
from .test_audit import _sysinfo_doc

HERE = Path(__file__).parent
SYSTEMS = HERE / "fixtures" / "systems"
SYMBOLS = HERE / "fixtures" / "kconfig-symbols.txt"
SRC = HERE.parent / "src" / "rtlab"


def verified() -> dict[str, str]:
    """Symbol -> the kernel Kconfig file it was found in (tests/fixtures/kconfig-symbols.txt)."""
    out: dict[str, str] = {}
    for line in SYMBOLS.read_text().splitlines():
        if line.startswith("CONFIG_"):
            symbol, kconfig, _tree, *_ = line.split("\t")
            assert symbol not in out, f"{symbol} listed twice"
            out[symbol] = kconfig
    return out


def referenced() -> set[str]:
    """Every CONFIG_ symbol in a string of the audit's code (docstrings included)."""
    found: set[str] = set()
    for path in [*sorted((SRC / "system").glob("*.py")), SRC / "cli" / "audit.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.update(
                    m for m in re.findall(r"CONFIG_[A-Z0-9_]+", node.value) if not m.endswith("_")
                )
    return found


def test_every_symbol_the_audit_names_is_a_real_kconfig_symbol():
    known = verified()
    assert len(known) > 60
    missing = sorted(referenced() - set(known))
    assert not missing, f"not found in the kernel's Kconfig files (add with its source): {missing}"
    table = {o.symbol: o.kconfig for o in (*DEBUG_OPTIONS, *LATENCY_TRACERS)}
    wrong = {s: (k, known[s]) for s, k in table.items() if known.get(s) != k}
    assert not wrong, f"the table names another Kconfig file than the list: {wrong}"


def test_symbol_list_rows_name_a_kernel_kconfig_file():
    for symbol, kconfig in verified().items():
        assert re.fullmatch(r"CONFIG_[A-Z0-9_]*[A-Z0-9]", symbol), symbol
        assert re.fullmatch(r"(kernel|init|lib|mm|drivers)/[\w/]*Kconfig[\w.]*", kconfig), kconfig


def test_symbols_the_kernel_does_not_have_stay_out():
    assert "CONFIG_KMEMLEAK" not in referenced() and "CONFIG_KMEMLEAK" not in verified()
    flagged = {o.symbol for o in (*DEBUG_OPTIONS, *LATENCY_TRACERS)}
    # DEFAULT_OFF turns kmemleak off; SCHED_DEBUG and FAULT_INJECTION cost nothing unused.
    assert not flagged & {"CONFIG_DEBUG_KMEMLEAK_DEFAULT_OFF", "CONFIG_SCHED_DEBUG"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        *[("1", True), ("y", True), ("Yes", True), ("on", True)],
        *[("0", False), ("n", False), ("off", False), ("OFF", False)],
        *[("o", None), ("2", None), ("", None), (None, None)],
    ],
)
def test_kstrtobool_reads_values_as_the_kernel_does(text, value):
    assert kstrtobool(text) is value


def _audit(tmp_path: Path, config: str, cmdline: str = "quiet", files: dict | None = None):
    base = {
        "sys/devices/system/cpu/online": "0-3",
        "proc/cmdline": cmdline,
        "proc/sys/kernel/osrelease": "6.6.0",
        "boot/config-6.6.0": config,
        **(files or {}),
    }
    facts = read_facts(SysRoot(make_root(tmp_path, base)))
    return facts, {x.id: x for x in run_audit(facts, Context())}


@pytest.mark.parametrize(
    ("config", "cmdline", "active"),
    [
        ("DEBUG_KMEMLEAK", "quiet", ["CONFIG_DEBUG_KMEMLEAK"]),
        ("DEBUG_KMEMLEAK DEBUG_KMEMLEAK_DEFAULT_OFF", "quiet", []),
        ("DEBUG_KMEMLEAK DEBUG_KMEMLEAK_DEFAULT_OFF", "kmemleak=on", ["CONFIG_DEBUG_KMEMLEAK"]),
        ("DEBUG_KMEMLEAK DEBUG_KMEMLEAK_DEFAULT_OFF", "kmemleak=on kmemleak=off", []),
        ("DEBUG_KMEMLEAK", "kmemleak=off", []),
        ("DEBUG_PAGEALLOC", "quiet", []),
        ("DEBUG_PAGEALLOC", "debug_pagealloc=on", ["CONFIG_DEBUG_PAGEALLOC"]),
        ("DEBUG_PAGEALLOC DEBUG_PAGEALLOC_ENABLE_DEFAULT", "quiet", ["CONFIG_DEBUG_PAGEALLOC"]),
        ("DEBUG_PAGEALLOC DEBUG_PAGEALLOC_ENABLE_DEFAULT", "debug_pagealloc=0", []),
        ("PAGE_POISONING", "quiet", []),
        ("PAGE_POISONING", "page_poison=1", ["CONFIG_PAGE_POISONING"]),
        ("SLUB_DEBUG SLUB_DEBUG_ON", "quiet", ["CONFIG_SLUB_DEBUG_ON"]),
        ("SLUB_DEBUG SLUB_DEBUG_ON", "slub_debug=-", []),
        ("SLUB_DEBUG SLUB_DEBUG_ON", "slab_debug=-", []),
        ("DEBUG_OBJECTS", "quiet", ["CONFIG_DEBUG_OBJECTS"]),
        ("DEBUG_OBJECTS", "no_debug_objects", []),
        ("DEBUG_OBJECTS DEBUG_OBJECTS_ENABLE_DEFAULT=0", "quiet", []),
        ("DEBUG_OBJECTS DEBUG_OBJECTS_ENABLE_DEFAULT=0", "debug_objects", ["CONFIG_DEBUG_OBJECTS"]),
        ("KASAN KASAN_GENERIC", "kasan=off", ["CONFIG_KASAN"]),
        ("KASAN KASAN_HW_TAGS", "kasan=off", []),
        ("UBSAN UBSAN_BOUNDS", "quiet", ["CONFIG_UBSAN"]),  # 6.9+: the whole kernel
        ("UBSAN ARCH_HAS_UBSAN_SANITIZE_ALL", "quiet", []),  # older: opt-in files only
        ("UBSAN ARCH_HAS_UBSAN_SANITIZE_ALL UBSAN_SANITIZE_ALL", "quiet", ["CONFIG_UBSAN"]),
        ("KCOV", "quiet", []),
        ("KCOV KCOV_INSTRUMENT_ALL", "quiet", ["CONFIG_KCOV"]),
        (
            "PROVE_LOCKING LOCKDEP DEBUG_LOCK_ALLOC DEBUG_SPINLOCK",
            "quiet",
            [
                "CONFIG_PROVE_LOCKING",
                "CONFIG_LOCKDEP",
                "CONFIG_DEBUG_LOCK_ALLOC",
                "CONFIG_DEBUG_SPINLOCK",
            ],
        ),
        ("KCSAN KMSAN DEBUG_VM", "quiet", ["CONFIG_DEBUG_VM", "CONFIG_KCSAN", "CONFIG_KMSAN"]),
        ("SCHED_DEBUG SCHEDSTATS FAULT_INJECTION KFENCE DEBUG_KERNEL SLUB_DEBUG", "quiet", []),
    ],
)
def test_debug_options_are_judged_with_the_boot_line(tmp_path, config, cmdline, active):
    lines = [f"CONFIG_{w}" if "=" in w else f"CONFIG_{w}=y" for w in config.split()]
    facts, got = _audit(tmp_path, "\n".join(lines) + "\n", cmdline)
    assert facts.debug_options == active
    finding = got["kernel.debug_options"]
    assert finding.status == ("FAIL" if active else "OK")
    for symbol in active:
        assert f"{symbol}=y" in finding.evidence
    off = [s for s in facts.debug_options_off if s not in active]
    for symbol in off:  # built in but off: said so, with the reason
        assert "built in but off: " in finding.evidence and symbol in finding.evidence


def test_boot_switched_options_say_which_parameter_and_how_to_turn_them_off(tmp_path):
    config = "CONFIG_DEBUG_KMEMLEAK=y\nCONFIG_DEBUG_KMEMLEAK_DEFAULT_OFF=y\nCONFIG_DEBUG_VM=y\n"
    _, got = _audit(tmp_path, config, "kmemleak=on")
    x = got["kernel.debug_options"]
    assert "CONFIG_DEBUG_KMEMLEAK=y (kmemleak=on overrides" in x.evidence
    assert x.fix.startswith("rebuild without CONFIG_DEBUG_VM, CONFIG_DEBUG_KMEMLEAK")
    assert x.fix.endswith("until then boot with kmemleak=off")


@pytest.mark.parametrize(
    ("config", "status", "evidence"),
    [
        ("CONFIG_FUNCTION_TRACER=y\nCONFIG_DYNAMIC_FTRACE=y\n", "OK", "none set"),
        ("CONFIG_FUNCTION_TRACER=y\n", "WARN", "no CONFIG_DYNAMIC_FTRACE"),
        ("CONFIG_IRQSOFF_TRACER=y\n", "WARN", "CONFIG_IRQSOFF_TRACER=y"),
        ("CONFIG_PROFILE_ALL_BRANCHES=y\n", "WARN", "CONFIG_PROFILE_ALL_BRANCHES=y"),
    ],
)
def test_latency_tracers(tmp_path, config, status, evidence):
    _, got = _audit(tmp_path, config)
    assert got["kernel.latency_tracers"].status == status
    assert evidence in got["kernel.latency_tracers"].evidence


@pytest.mark.parametrize(
    ("config", "cmdline", "status"),
    [
        ("CONFIG_RT_GROUP_SCHED=y\n", "quiet", "INFO"),
        ("CONFIG_RT_GROUP_SCHED=y\n", "rt_group_sched=0", "OK"),
        ("CONFIG_RT_GROUP_SCHED=y\nCONFIG_RT_GROUP_SCHED_DEFAULT_DISABLED=y\n", "quiet", "OK"),
        (
            "CONFIG_RT_GROUP_SCHED=y\nCONFIG_RT_GROUP_SCHED_DEFAULT_DISABLED=y\n",
            "rt_group_sched=1",
            "INFO",
        ),
    ],
)
def test_rt_group_sched_default_disabled(tmp_path, config, cmdline, status):
    _, got = _audit(tmp_path, config, cmdline)
    assert got["kernel.rt_group_sched"].status == status


# Checks that apply to every CPU warn without real-time CPUs instead of going quiet.

CPU = "sys/devices/system/cpu"
EVERY_CPU_TREE = {
    f"{CPU}/smt/active": "1",
    **{f"{CPU}/cpu{c}/topology/thread_siblings_list": f"{c % 2},{c % 2 + 2}" for c in range(4)},
    **{f"{CPU}/cpu{c}/cpufreq/scaling_governor": "powersave" for c in range(4)},
    **{f"{CPU}/cpu{c}/cpuidle/state1/name": "C6" for c in range(4)},
    **{f"{CPU}/cpu{c}/cpuidle/state1/latency": "170" for c in range(4)},
    **{f"{CPU}/cpu{c}/cpuidle/state1/disable": "0" for c in range(4)},
}


def test_every_cpu_checks_warn_without_real_time_cpus(tmp_path):
    facts, got = _audit(tmp_path, "CONFIG_HZ=1000\n", "quiet", EVERY_CPU_TREE)
    assert facts.rt_cpus_source.startswith("all online")
    for check in ("cpu.smt", "cpu.governor", "cpu.idle_latency"):
        assert got[check].status == "WARN", (check, got[check])
    assert "siblings 0,2 1,3" in got["cpu.smt"].evidence and "nosmt" in got["cpu.smt"].fix
    for check in ("cpu.governor", "cpu.idle_latency"):
        assert "CPUs 0-3 (all online: no real-time CPUs isolated or given)" in got[check].evidence
    assert "for c in 0 1 2 3;" in got["cpu.governor"].fix
    assert "for c in 0 1 2 3;" in got["cpu.idle_latency"].fix


def test_every_cpu_checks_judge_only_the_real_time_cpus_when_isolated(tmp_path):
    _, got = _audit(tmp_path, "CONFIG_HZ=1000\n", "isolcpus=3", EVERY_CPU_TREE)
    assert "on CPUs 3:" in got["cpu.governor"].evidence and "(all online" not in str(got)
    assert "for c in 3;" in got["cpu.governor"].fix


# The workqueue check with isolcpus: judged, and a missing file named as such.

WQ = "sys/devices/virtual/workqueue/cpumask"
WB = "sys/bus/workqueue/devices/writeback/cpumask"
ISOLATING = [
    "isolcpus=3",
    "isolcpus=domain,managed_irq,3",
    "isolcpus=nohz,domain,managed_irq,3 nohz_full=3 rcu_nocbs=3",
    "nohz_full=3",
]


@pytest.mark.parametrize("cmdline", ISOLATING)
@pytest.mark.parametrize(("mask", "status"), [("f", "WARN"), ("00000000,00000007", "OK")])
def test_workqueue_masks_are_judged_with_isolcpus(tmp_path, cmdline, mask, status):
    facts, got = _audit(tmp_path, "", cmdline, {WQ: mask, WB: mask})
    assert facts.isolated_cpus == [3]
    for check in ("workqueue.cpumask", "workqueue.writeback"):
        assert got[check].status == status, (check, got[check])
        assert "no isolated" not in got[check].evidence


@pytest.mark.parametrize("cmdline", ISOLATING)
def test_missing_mask_file_is_named_not_blamed_on_isolation(tmp_path, cmdline):
    _, got = _audit(tmp_path, "", cmdline)
    assert got["workqueue.cpumask"].evidence == f"/{WQ} not readable"
    assert got["workqueue.writeback"].evidence == f"/{WB} not readable"
    assert got["irq.default_affinity"].evidence == "/proc/irq/default_smp_affinity not readable"


def test_without_isolation_the_mask_checks_say_so(tmp_path):
    _, got = _audit(tmp_path, "", "quiet", {WQ: "f"})
    assert got["workqueue.cpumask"].status == "INFO"
    assert "no isolated or given real-time CPUs" in got["workqueue.cpumask"].evidence


@pytest.mark.parametrize(
    ("cmdline", "status"),
    [
        ("isolcpus=3", "OK"),
        ("isolcpus=managed_irq,domain,3", "OK"),
        ("isolcpus=managed_irq,3", "WARN"),
        ("isolcpus=nohz,3", "WARN"),
    ],
)
def test_isolcpus_flags_without_domain_do_not_isolate_from_the_scheduler(tmp_path, cmdline, status):
    _, got = _audit(tmp_path, "CONFIG_CPU_ISOLATION=y\n", cmdline)
    assert got["boot.isolcpus"].status == status
    assert ("has no domain flag" in got["boot.isolcpus"].evidence) == (status == "WARN")


# rtlab audit --kconfig


def _fragment(tmp_path: Path, config: str, cmdline: str = "quiet") -> tuple[str, dict]:
    facts, got = _audit(tmp_path, config, cmdline)
    return kconfig_fragment(facts, list(got.values()), "test", "0"), got


def assert_well_formed(text: str, findings: dict) -> None:
    """Comments and settings only; each setting after a comment naming non-OK checks."""
    known = verified()
    last_comment = None
    for line in text.splitlines():
        if SETTING.match(line):
            assert last_comment, line
            ids = last_comment[2:].split(": ", 1)[0].split(", ")
            assert all(findings[i].status != "OK" for i in ids), (line, ids)
            assert re.search(r"CONFIG_[A-Z0-9_]+", line)[0] in known, line
            last_comment = None
        elif line.startswith("# ") and not line.startswith("#   "):
            last_comment = line
        else:
            assert line == "" or line.startswith("#   "), line


@pytest.mark.parametrize("system", ["desktop", "rt-board", "this-vm"])
def test_fragment_syntax_on_every_fixture(rtlab, system):
    rc, text, err = rtlab("audit", "--root", str(SYSTEMS / system), "--kconfig", "-")
    _, doc = rtlab("audit", "--root", str(SYSTEMS / system), "--json")[:2]
    findings = {f["id"]: SimpleNamespace(**f) for f in json.loads(doc)["findings"]}
    assert err == "" and text.endswith("\n")
    assert rc == (1 if system == "desktop" else 0)  # this-vm: no FAIL without a deadline
    for line in text.splitlines():
        assert line == "" or line.startswith("#") or SETTING.match(line), line
        if not line.startswith("#") and line:
            assert re.fullmatch(r'CONFIG_[A-Z0-9_]+=(y|m|n|[0-9]+|".*")', line)
    assert_well_formed(text, findings)


def test_clean_kernel_gets_the_header_only(rtlab):
    _, text, _ = rtlab("audit", "--root", str(SYSTEMS / "rt-board"), "--kconfig", "-")
    assert settings(text) == []
    assert all(line.startswith("# ") for line in text.splitlines())
    assert "an OK finding adds nothing" in text and "nothing to set" in text


def test_desktop_fragment(rtlab):
    _, text, _ = rtlab("audit", "--root", str(SYSTEMS / "desktop"), "--kconfig", "-")
    assert settings(text) == [
        "CONFIG_EXPERT=y",
        "CONFIG_PREEMPT_RT=y",
        "# CONFIG_DEBUG_KMEMLEAK is not set",
        "CONFIG_HZ_1000=y",
        "# CONFIG_HZ_250 is not set",
        "CONFIG_HZ=1000",
        "CONFIG_HZ_PERIODIC=y",  # no isolated CPU: periodic, not full dynticks
        "# CONFIG_NO_HZ_IDLE is not set",
        "CONFIG_CPU_ISOLATION=y",
        "CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE=y",
        "CONFIG_FTRACE=y",
        "CONFIG_HWLAT_TRACER=y",
    ]
    assert "# kernel.preempt: fully preemptible kernel (now dynamic:voluntary)" in text
    assert "# kernel.debug_options: traces every allocation" in text


LOCKDEP_DYNAMIC = """\
CONFIG_PREEMPT_BUILD=y
CONFIG_PREEMPT_VOLUNTARY=y
CONFIG_PREEMPT_DYNAMIC=y
CONFIG_HZ_1000=y
CONFIG_HZ=1000
CONFIG_NO_HZ_FULL=y
CONFIG_RCU_NOCB_CPU=y
CONFIG_CPU_ISOLATION=y
CONFIG_PROVE_LOCKING=y
CONFIG_LOCKDEP=y
CONFIG_DEBUG_LOCK_ALLOC=y
CONFIG_DEBUG_SPINLOCK=y
CONFIG_DEBUG_MUTEXES=y
CONFIG_DEBUG_RT_MUTEXES=y
CONFIG_FUNCTION_TRACER=y
CONFIG_DYNAMIC_FTRACE=y
CONFIG_TIMERLAT_TRACER=y
CONFIG_OSNOISE_TRACER=y
CONFIG_HWLAT_TRACER=y
"""


def test_fragment_for_a_preempt_dynamic_kernel_with_lockdep(tmp_path):
    text, got = _fragment(tmp_path, LOCKDEP_DYNAMIC)
    assert settings(text) == [
        "CONFIG_EXPERT=y",
        "CONFIG_PREEMPT_RT=y",  # it replaces VOLUNTARY: that one is not unset
        "# CONFIG_PROVE_LOCKING is not set",  # LOCKDEP has no prompt: its selectors go
        "# CONFIG_DEBUG_LOCK_ALLOC is not set",
        "# CONFIG_DEBUG_SPINLOCK is not set",
        "# CONFIG_DEBUG_MUTEXES is not set",
        "# CONFIG_DEBUG_RT_MUTEXES is not set",
    ]
    assert "LOCKDEP" in text and "# CONFIG_LOCKDEP is not set" not in text
    assert "it selects LOCKDEP" in text
    assert_well_formed(text, got)


def test_fragment_tracers_nocb_and_branch_profiling(tmp_path):
    config = "CONFIG_HZ=1000\nCONFIG_NO_HZ_IDLE=y\nCONFIG_FUNCTION_TRACER=y\n"
    config += "CONFIG_PROFILE_ALL_BRANCHES=y\nCONFIG_IRQSOFF_TRACER=y\nCONFIG_TIMERLAT_TRACER=y\n"
    text, got = _fragment(tmp_path, config, "isolcpus=3")
    lines = settings(text)
    for expected in (
        "CONFIG_DYNAMIC_FTRACE=y",
        "CONFIG_BRANCH_PROFILE_NONE=y",
        "# CONFIG_IRQSOFF_TRACER is not set",
        "CONFIG_NO_HZ_FULL=y",
        "# CONFIG_NO_HZ_IDLE is not set",
        "CONFIG_RCU_NOCB_CPU=y",
        "CONFIG_OSNOISE_TRACER=y",
        "CONFIG_HWLAT_TRACER=y",
    ):
        assert expected in lines, expected
    assert "CONFIG_TIMERLAT_TRACER=y" not in lines  # built in already: OK adds nothing
    assert "CONFIG_RCU_EXPERT=y" not in lines  # NO_HZ_FULL satisfies RCU_NOCB_CPU's depends
    assert_well_formed(text, got)


def test_fragment_without_a_readable_config_asks_for_one(tmp_path):
    base = {"sys/devices/system/cpu/online": "0-1", "proc/cmdline": "quiet"}
    facts = read_facts(SysRoot(make_root(tmp_path, base)))
    findings = run_audit(facts, Context())
    text = kconfig_fragment(facts, findings, "test", "0")
    assert "CONFIG_IKCONFIG=y" in settings(text) and "CONFIG_IKCONFIG_PROC=y" in settings(text)
    assert "CONFIG_PREEMPT_RT=y" not in settings(text)  # no evidence of the model


def test_kconfig_file_is_written_atomically_beside_the_human_report(rtlab, tmp_path):
    target = tmp_path / "rt.config"
    target.write_text("old\n")
    rc, out, err = rtlab("audit", "--root", str(SYSTEMS / "desktop"), "--kconfig", str(target))
    assert rc == 1 and err == ""
    assert f"kernel config fragment: 12 settings written to {target}" in out
    _, stdout_text, _ = rtlab("audit", "--root", str(SYSTEMS / "desktop"), "--kconfig", "-")
    assert target.read_text() == stdout_text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rt.config"]


def test_kconfig_with_json_keeps_stdout_json(rtlab, tmp_path):
    target = tmp_path / "rt.config"
    rc, out, _ = rtlab(
        "audit", "--root", str(SYSTEMS / "desktop"), "--json", "--kconfig", str(target)
    )
    _, plain, _ = rtlab("audit", "--root", str(SYSTEMS / "desktop"), "--json")
    assert rc == 1 and json.loads(out) == json.loads(plain)
    assert "CONFIG_PREEMPT_RT=y" in target.read_text()


def test_kconfig_from_a_sysinfo_document_matches_the_tree(rtlab, tmp_path):
    doc = tmp_path / "si.json"
    doc.write_text(json.dumps(_sysinfo_doc(SYSTEMS / "desktop")))
    _, a, _ = rtlab("audit", "--from", str(doc), "--kconfig", "-")
    _, b, _ = rtlab("audit", "--root", str(SYSTEMS / "desktop"), "--kconfig", "-")
    assert settings(a) == settings(b) and settings(a)


def test_failed_write_leaves_the_old_file_and_no_temporary(rtlab, tmp_path, monkeypatch):
    target = tmp_path / "rt.config"
    target.write_text("old\n")

    def refuse(*_args):
        raise OSError(28, "No space left on device")

    module = importlib.import_module("rtlab.cli.audit")  # the package's `audit` is the command
    monkeypatch.setattr(module.os, "replace", refuse)
    rc, out, err = rtlab("audit", "--root", str(SYSTEMS / "desktop"), "--kconfig", str(target))
    assert rc == 2 and out == "" and err.count("\n") == 1 and "No space left" in err
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["rt.config"]


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("/nonexistent/dir/rt.config", "no such directory /nonexistent/dir"),
        ("{tmp}", "is a directory"),
        ("/dev/null", "not a regular file"),
    ],
)
def test_unwritable_kconfig_path_is_refused_first(rtlab, tmp_path, where, message):
    path = where.format(tmp=tmp_path)
    # Checked before anything else: a bad --root behind it is not even looked at.
    rc, out, err = rtlab("audit", "--kconfig", path, "--root", "/nonexistent/tree")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert f"--kconfig {path}: {message}" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only directory")
def test_read_only_directory_is_refused(rtlab, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        rc, out, err = rtlab("audit", "--root", str(SYSTEMS / "desktop"), "--kconfig", f"{ro}/x")
    finally:
        ro.chmod(0o700)
    assert rc == 2 and out == "" and "cannot create files in" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--kconfig", "-", "--json"), "both write to standard output"),
        (("--kconfig", "x.config", "--capture", "dir"), "exclude each other"),
    ],
)
def test_kconfig_option_conflicts(rtlab, args, message):
    rc, out, err = rtlab("audit", "--root", str(SYSTEMS / "desktop"), *args)
    assert rc == 2 and out == "" and message in err and err.count("\n") == 1


def test_docs_example_is_the_desktop_fragment(rtlab):
    doc = (HERE.parent / "docs" / "audit.md").read_text()
    example = doc.split("For the desktop fixture:\n\n```\n", 1)[1].split("```", 1)[0]
    _, text, _ = rtlab("audit", "--root", str(SYSTEMS / "desktop"), "--kconfig", "-")
    assert text.split("\n\n", 1)[1] == example


def test_directory_without_write_permission_is_refused(rtlab, tmp_path, monkeypatch):
    """The same refusal where root would be allowed: os.access is what the check asks."""
    module = importlib.import_module("rtlab.cli.audit")
    monkeypatch.setattr(module.os, "access", lambda path, mode: Path(path) != tmp_path)
    rc, out, err = rtlab("audit", "--kconfig", f"{tmp_path}/x.config")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert f"cannot create files in {tmp_path}" in err
