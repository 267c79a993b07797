"""The audit on arm64: what it advises must exist there (boot parameters of x86 drivers
do not), read from a fake root tree with arm64's files."""

from __future__ import annotations

import pytest

from rtlab.system import SysRoot
from rtlab.system._audit import Context
from rtlab.system._checks_kernel import CstateLimit
from rtlab.system._facts import read_facts

from .conftest import make_root


@pytest.mark.parametrize(
    ("arch", "fix"),
    [("aarch64", "cpuidle.off=1"), ("x86_64", "intel_idle.max_cstate=1")],
)
def test_the_idle_state_limit_advised_is_the_architectures(tmp_path, arch, fix):
    """arm64 has neither intel_idle nor ACPI C-states: the advice there is cpuidle.off=1,
    and a kernel booted with it has its idle states limited."""
    files = {"proc/sys/kernel/arch": arch + "\n", "proc/cmdline": "quiet\n"}
    facts = read_facts(SysRoot(make_root(tmp_path, files)))
    value, evidence = CstateLimit().read(facts)
    status, advice = CstateLimit().advice(value, facts, Context())
    assert (value, status) == (False, "INFO") and advice.startswith(f"boot with {fix}")
    assert ("intel_idle" in advice) == (arch == "x86_64")
    files["proc/cmdline"] = "quiet cpuidle.off=1\n"
    facts = read_facts(SysRoot(make_root(tmp_path / "off", files)))
    value, evidence = CstateLimit().read(facts)
    assert value and "cpuidle.off=1" in evidence
