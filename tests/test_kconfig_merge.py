"""`rtlab audit --kconfig` against a real kernel tree: the fragment rtlab writes for
Debian's own 6.1 configurations is merged with the kernel's scripts/kconfig/merge_config.sh
and `make olddefconfig` (tests/_kernel_tree.py: Debian's linux-source-6.1, Kconfig part
only). Every setting must keep its value in the resulting .config, or the fragment's own
comment above it must say why it cannot. Every Kconfig symbol the audit names must exist in
that tree, or be listed as version-specific in tests/fixtures/kconfig-symbols.txt."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from rtlab.system import Context, SysRoot, read_facts, run_audit
from rtlab.system._kconfig_fragment import SETTING, kconfig_fragment, settings

from ._kernel_tree import Tree, debian_config, defined_symbols, kernel_trees, merge, read_config
from .conftest import make_root
from .test_audit_kconfig import SYMBOLS, referenced, verified

GENERIC, RT = "generic", "rt"  # Debian's configurations (linux-image-amd64, -rt-amd64)
ISOLATED = "isolcpus=managed_irq,domain,1-3 nohz_full=1-3 rcu_nocbs=1-3"

# Changes to Debian's configuration that make a kernel with what the audit flags; merged and
# resolved by olddefconfig like any fragment, so the base is a configuration Kconfig accepts.
DEBUG = """\
CONFIG_PROVE_LOCKING=y
CONFIG_LOCK_STAT=y
CONFIG_DEBUG_LOCKDEP=y
CONFIG_DEBUG_ATOMIC_SLEEP=y
CONFIG_DEBUG_PREEMPT=y
CONFIG_DEBUG_PLIST=y
CONFIG_DEBUG_PER_CPU_MAPS=y
CONFIG_DEBUG_VM=y
CONFIG_DEBUG_OBJECTS=y
CONFIG_DEBUG_KMEMLEAK=y
CONFIG_DEBUG_PAGEALLOC=y
CONFIG_DEBUG_PAGEALLOC_ENABLE_DEFAULT=y
CONFIG_SLUB_DEBUG_ON=y
CONFIG_KASAN=y
CONFIG_UBSAN=y
CONFIG_UBSAN_SANITIZE_ALL=y
CONFIG_KCOV=y
CONFIG_CONTEXT_TRACKING_USER_FORCE=y
CONFIG_IRQSOFF_TRACER=y
CONFIG_PREEMPT_TRACER=y
# CONFIG_DYNAMIC_FTRACE is not set
# CONFIG_FORTIFY_SOURCE is not set
"""
# A server kernel: no forced preemption, 100 Hz idle tick, no offloaded RCU callbacks,
# no CPU isolation, no configuration in /proc.
SERVER = """\
# CONFIG_PREEMPT_DYNAMIC is not set
CONFIG_PREEMPT_NONE=y
# CONFIG_PREEMPT_VOLUNTARY is not set
CONFIG_HZ_100=y
# CONFIG_HZ_250 is not set
# CONFIG_NO_HZ_FULL is not set
CONFIG_NO_HZ_IDLE=y
# CONFIG_RCU_NOCB_CPU is not set
# CONFIG_CPU_ISOLATION is not set
# CONFIG_HIGH_RES_TIMERS is not set
"""
LOW_RES = {"proc/timer_list": "cpu: 0\n  .hres_active    : 0\n"}  # what that kernel shows
# A desktop's CPUs: schedutil, and C-states up to 133 µs (tickless idle pays their exit).
DEEP_IDLE = {
    f"sys/devices/system/cpu/cpu{c}/{name}": text
    for c in range(4)
    for name, text in (
        ("cpufreq/scaling_governor", "schedutil"),
        ("cpuidle/state1/name", "C1"),
        ("cpuidle/state1/latency", "2"),
        ("cpuidle/state2/name", "C6"),
        ("cpuidle/state2/latency", "133"),
    )
}
PERIODIC = """\
# CONFIG_PREEMPT_DYNAMIC is not set
CONFIG_PREEMPT=y
# CONFIG_PREEMPT_VOLUNTARY is not set
CONFIG_HZ_300=y
# CONFIG_HZ_250 is not set
# CONFIG_NO_HZ_FULL is not set
CONFIG_HZ_PERIODIC=y
# CONFIG_RCU_NOCB_CPU is not set
# CONFIG_RCU_EXPERT is not set
"""


@dataclass(frozen=True)
class Case:
    name: str
    base: str  # Debian's configuration: GENERIC or RT
    edits: str  # merged into it first (the kernel the audit sees)
    cmdline: str
    tree: str  # "generic" (as packaged) or "rt" (x86_64 selects ARCH_SUPPORTS_RT)
    readable: bool = True  # the configuration is in /boot for the audit
    files: dict[str, str] | None = None  # more files of the running kernel, for the audit


CASES = [
    Case("generic", GENERIC, "", "quiet", "generic"),
    Case("generic-rt-tree", GENERIC, "", "quiet", "rt"),
    Case("generic-isolated", GENERIC, "", ISOLATED, "rt"),
    Case("rt", RT, "", "quiet", "rt"),
    Case("rt-isolated", RT, "", ISOLATED, "rt"),
    Case("generic-debug", GENERIC, DEBUG + "CONFIG_PROFILE_ALL_BRANCHES=y\n", "isolcpus=3", "rt"),
    Case("rt-debug", RT, DEBUG + "CONFIG_PROFILE_ANNOTATED_BRANCHES=y\n", ISOLATED, "rt"),
    Case("server-isolated", GENERIC, SERVER, "isolcpus=3 rcu_nocbs=3", "generic", files=LOW_RES),
    Case("server-nohz-full", GENERIC, SERVER, "nohz_full=3", "rt", files=LOW_RES),
    Case("periodic", GENERIC, PERIODIC, "isolcpus=2-3 rcu_nocbs=2-3", "rt"),
    Case("no-config", GENERIC, "", "quiet", "rt", readable=False),
    Case("desktop-deep-idle", GENERIC, "", "quiet", "rt", files=DEEP_IDLE),
]


@pytest.fixture(scope="module")
def trees() -> dict[str, Tree]:
    return kernel_trees()


@pytest.fixture(scope="module")
def merged(trees, tmp_path_factory):
    """The merge of a case by its name, done once per module."""
    done: dict[str, Merged] = {}

    def get(name: str) -> Merged:
        if name not in done:
            case = next(c for c in CASES if c.name == name)
            done[name] = _merge_case(case, trees, tmp_path_factory.mktemp(name))
        return done[name]

    return get


def _audit(tmp_path: Path, config: str | None, cmdline: str, release: str, more=None):
    """(fragment text, {check id: status}) of the audit of a system with CONFIG and CMDLINE."""
    files = {
        "sys/devices/system/cpu/online": "0-3",
        "proc/cmdline": cmdline,
        "proc/sys/kernel/osrelease": release,
        **(more or {}),
    }
    if config is not None:
        files[f"boot/config-{release}"] = config
    root = make_root(tmp_path / "audit" / str(len(list(tmp_path.glob("audit/*")))), files)
    facts = read_facts(SysRoot(root))
    findings = run_audit(facts, Context())
    text = kconfig_fragment(facts, findings, "test", "0")
    return text, {x.id: x.status for x in findings}


def _comment_of(text: str) -> dict[str, str]:
    """Setting line -> the comment lines above it."""
    out: dict[str, str] = {}
    comment: list[str] = []
    for line in text.split("\n\n", 1)[-1].splitlines():
        if SETTING.match(line):
            out[line] = "\n".join(comment)
            comment = []
        else:
            comment.append(line)
    return out


def _line_of(symbol: str, value: str | None) -> str:
    return f"# {symbol} is not set" if value is None else f"{symbol}={value}"


@dataclass
class Merged:
    fragment: str
    findings: dict[str, str]  # check id -> status, of the audit that wrote the fragment
    base: dict[str, str | None]  # the configuration the audit saw
    result: dict[str, str | None]  # after merge_config.sh -m and make olddefconfig
    after: dict[str, str]  # check id -> status, of the audit of the merged configuration
    again: str  # the fragment of that audit


def _merge_case(case: Case, trees: dict[str, Tree], tmp_path: Path) -> Merged:
    tree = trees[case.tree].path
    debian = debian_config(case.base)
    base = tmp_path / "base.config"
    if case.edits:
        (tmp_path / "edits.config").write_text(case.edits)
        merge(tree, debian, tmp_path / "edits.config", base)
        got = read_config(base)
        for line in case.edits.splitlines():  # the kernel this case is about
            symbol, value = _setting(line)
            assert got.get(symbol) == value or (value is None and symbol not in got), line
    else:
        base.write_text(debian.read_text())
    release = debian.name.removeprefix("config-")
    config = base.read_text() if case.readable else None
    text, findings = _audit(tmp_path, config, case.cmdline, release, case.files)
    fragment = tmp_path / "rtlab.config"
    fragment.write_text(text)
    out = tmp_path / "merged" / ".config"
    out.parent.mkdir()
    merge(tree, base, fragment, out)
    again, after = _audit(tmp_path, out.read_text(), case.cmdline, release)  # not run yet
    return Merged(text, findings, read_config(base), read_config(out), after, again)


def _setting(line: str) -> tuple[str, str | None]:
    """(symbol, value) of a setting line; None for "# CONFIG_X is not set"."""
    symbol = re.search(r"CONFIG_\w+", line)[0]
    return symbol, None if line.startswith("#") else line.split("=", 1)[1]


# Settings that cannot survive in the named tree, and the words the fragment's comment must
# use to say why.
CANNOT = {
    ("generic", "CONFIG_PREEMPT_RT=y"): "ARCH_SUPPORTS_RT",
}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_setting_survives_the_merge_or_says_why(case, merged):
    m = merged(case.name)
    comments = _comment_of(m.fragment)
    assert comments, "a fragment without settings tests nothing"
    lost = {}
    for line in comments:
        symbol, value = _setting(line)
        got = m.result.get(symbol)
        if got == value or (value is None and symbol not in m.result):  # n: maybe not written
            continue
        lost[line] = _line_of(symbol, got) if symbol in m.result else "absent"
    unexplained = {
        line: now
        for line, now in lost.items()
        if (case.tree, line) not in CANNOT or CANNOT[(case.tree, line)] not in comments[line]
    }
    assert not unexplained, f"changed by the merge without a reason in the fragment: {unexplained}"
    # What the fragment was for: audited again, the merged kernel asks for nothing new, and
    # the checks judged on the configuration alone pass (others also want boot parameters).
    again = settings(m.again) if case.readable else []  # without it, the audit judged less
    assert not set(again) - set(comments), f"asked for only after the merge: {again}"
    assert all(line in lost or m.result.get(_setting(line)[0]) for line in again), again
    asked = {c for comment in comments.values() for c in comment[2:].split(": ", 1)[0].split(", ")}
    config_only = asked & {"kernel.config", "kernel.debug_options", "kernel.latency_tracers",
                           "timer.hz", "timer.mode"}  # fmt: skip
    still = {c: m.after[c] for c in config_only if m.after[c] != "OK"}
    assert not still, f"still not OK on the merged configuration: {still}"


def test_without_arch_supports_rt_the_comment_says_what_happens(trees, merged):
    """6.1 x86 as packaged: PREEMPT_RT=y is dropped and the model falls to PREEMPT_NONE,
    as the fragment's comment says; with the RT patch set's line it is kept."""
    m = merged("server-isolated")
    comment = _comment_of(m.fragment)["CONFIG_PREEMPT_RT=y"]
    assert "ARCH_SUPPORTS_RT" in comment and "PREEMPT_NONE" in comment
    assert "CONFIG_PREEMPT_RT" not in m.result and m.result["CONFIG_PREEMPT_NONE"] == "y"
    for kind, tree in trees.items():
        kconfig = (tree.path / "arch/x86/Kconfig").read_text()
        assert ("select ARCH_SUPPORTS_RT" in kconfig) == (kind == "rt")


def test_the_model_a_fragment_replaces_is_not_unset(merged):
    """No "# CONFIG_PREEMPT_VOLUNTARY is not set": PREEMPT_RT=y alone wins the 6.1 choice."""
    m = merged("generic-rt-tree")
    assert m.base["CONFIG_PREEMPT_VOLUNTARY"] == "y" and m.base["CONFIG_PREEMPT_DYNAMIC"] == "y"
    assert [s for s in settings(m.fragment) if "PREEMPT" in s] == ["CONFIG_PREEMPT_RT=y"]
    assert m.result["CONFIG_PREEMPT_RT"] == "y"
    assert m.result.get("CONFIG_PREEMPT_VOLUNTARY") is None
    assert "CONFIG_PREEMPT_DYNAMIC" not in m.result  # depends on !PREEMPT_RT in 6.1
    assert m.after["kernel.preempt"] == "OK"


def against_61() -> tuple[dict[str, str], dict[str, str]]:
    """The "since" rows (symbol -> the version that added it) and the "6.1" rows (symbol ->
    its Kconfig file in 6.1) of tests/fixtures/kconfig-symbols.txt."""
    since: dict[str, str] = {}
    moved: dict[str, str] = {}
    for line in SYMBOLS.read_text().splitlines():
        kind, _, rest = line.partition("\t")
        if kind in ("since", "6.1"):
            symbol, where, *_ = rest.split("\t")
            (since if kind == "since" else moved)[symbol] = where
    return since, moved


def test_tickless_idle_with_deep_idle_states_gets_a_periodic_tick_and_performance(merged):
    """No isolated CPU, C-states of 133 µs: the fragment makes the tick periodic (the
    NO_HZ_FULL of Debian's configuration unset) and the performance governor the
    default (schedutil unset), and both survive olddefconfig."""
    m = merged("desktop-deep-idle")
    assert m.findings["timer.mode"] == "INFO" and m.findings["cpu.governor"] == "WARN"
    assert m.base["CONFIG_NO_HZ_FULL"] == "y" and m.base["CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL"]
    lines = settings(m.fragment)
    assert "CONFIG_HZ_PERIODIC=y" in lines and "# CONFIG_NO_HZ_FULL is not set" in lines
    assert "# CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL is not set" in lines
    assert m.result["CONFIG_HZ_PERIODIC"] == "y" and m.result.get("CONFIG_NO_HZ_FULL") is None
    assert m.result["CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE"] == "y"
    assert m.result.get("CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL") is None
    assert m.after["timer.mode"] == "OK"


@pytest.mark.parametrize("variant", ["debug", "production"])
def test_variant_fragments_survive_the_merge(trees, tmp_path, variant):
    """Debian's RT configuration has the three tracers: debug keeps them (and FTRACE),
    production removes them, and olddefconfig keeps what the fragment says."""
    debian = debian_config(RT)
    release = debian.name.removeprefix("config-")
    files = {
        "sys/devices/system/cpu/online": "0-3",
        "proc/cmdline": ISOLATED,
        "proc/sys/kernel/osrelease": release,
        f"boot/config-{release}": debian.read_text(),
    }
    facts = read_facts(SysRoot(make_root(tmp_path / "audit", files)))
    text = kconfig_fragment(facts, run_audit(facts, Context()), "test", "0", variant)
    (tmp_path / "f.config").write_text(text)
    out = tmp_path / "merged" / ".config"
    out.parent.mkdir()
    merge(trees["rt"].path, debian, tmp_path / "f.config", out)
    result = read_config(out)
    for line in settings(text):
        symbol, value = _setting(line)
        assert result.get(symbol) == value or (value is None and symbol not in result), line
    tracers = ("CONFIG_TIMERLAT_TRACER", "CONFIG_OSNOISE_TRACER", "CONFIG_HWLAT_TRACER")
    if variant == "debug":
        assert all(result.get(t) == "y" for t in tracers)
    else:
        assert all(f"# {t} is not set" in settings(text) for t in tracers)
        assert all(result.get(t) is None for t in tracers) and result.get("CONFIG_FTRACE") == "y"


def test_every_symbol_the_audit_names_is_defined_in_the_61_tree(trees):
    defined = defined_symbols(trees["generic"])
    assert len(defined) > 10000 and "CONFIG_PREEMPT_RT" in defined
    since, moved = against_61()
    assert since and moved and not set(since) & set(moved)
    known = verified()
    names = referenced() | set(known)
    missing = sorted(s for s in names if s not in defined and s not in since)
    assert not missing, f"not defined in 6.1 and not listed as newer: {missing}"
    for symbol, version in since.items():
        assert symbol in known and symbol not in defined, symbol
        assert re.fullmatch(r"\d+\.\d+", version) and tuple(map(int, version.split("."))) > (6, 1)
    wrong = {
        s: (known[s], defined[s])
        for s in known
        if s in defined and moved.get(s, known[s]) not in defined[s]
    }
    assert not wrong, f"defined in another Kconfig file in 6.1 (add a 6.1 row): {wrong}"


def test_every_symbol_a_fragment_sets_is_defined_in_the_61_tree(trees):
    """The fragment's symbols come from a few tables; each one is in the 6.1 tree."""
    defined = defined_symbols(trees["generic"])
    source = (Path(__file__).parents[1] / "src/rtlab/system/_kconfig_fragment.py").read_text()
    named = {m for m in re.findall(r"CONFIG_[A-Z0-9_]+", source) if not m.endswith("_")}
    assert {"CONFIG_PREEMPT_RT", "CONFIG_RCU_EXPERT", "CONFIG_BRANCH_PROFILE_NONE"} <= named
    assert not sorted(named - set(defined))
