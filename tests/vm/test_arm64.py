"""An arm64 guest end to end (`make test-arm64`): Debian's 6.1 PREEMPT_RT kernel for arm64
booted under qemu-system-aarch64 (TCG) on the Debian arm64 root of `rtlab vm root`, one
wake-up case measured there by the static aarch64 probe with --explain, a SCHED_FIFO
spinner planted on the measured CPU. The stored fingerprint must say aarch64, and the
explanation must come from the arm64 kernel's own trace lines and name the spinner.

Booting and measuring take about two minutes under emulation, so this runs only with
RTLAB_TEST_ARM64=1 (what `make test-arm64` sets after it installed QEMU for arm64, built
the static probe and the root); there, anything missing is a failure, not a skip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtlab.targets import vmroot
from rtlab.targets._probes import PACKAGE_PROBES

from .conftest import explained_spikes

pytestmark = pytest.mark.skipif(
    os.environ.get("RTLAB_TEST_ARM64") != "1", reason="arm64 guests: make test-arm64"
)
EXPERIMENT = Path(__file__).with_name("arm64-wakeup.toml")
APPEND = "isolcpus=managed_irq,domain,1 nohz_full=1 rcu_nocbs=1"
RUN_S = 1200  # boot (about 1 minute under TCG) and the case, with room for a slow machine


def rt_release(root: Path) -> str:
    rt = [r for r in vmroot.kernels(root) if r.endswith("-rt-arm64")]
    assert rt, f"no PREEMPT_RT kernel in {root}/boot: rtlab vm root --arch arm64 --rebuild"
    return rt[-1]


def test_a_wakeup_case_explained_on_debian_arm64_rt(tmp_path):
    root = vmroot.default_root("arm64")
    assert vmroot.is_root(root), f"no arm64 root at {root}: rtlab vm root --arch arm64"
    assert (PACKAGE_PROBES / "aarch64" / "rtlab-probe").is_file(), "make cross-probe install"
    release = rt_release(root)
    url = f"vm:{release}?arch=arm64&cpus=2&memory=1G&append={APPEND}"
    env = {**os.environ, "RTLAB_RESULTS": str(tmp_path / "results")}
    argv = [sys.executable, "-m", "rtlab.cli", "run", str(EXPERIMENT), "--target", url]
    start = time.monotonic()
    r = subprocess.run(
        [*argv, "--explain", "100us", "--json"], env=env, capture_output=True, timeout=RUN_S
    )
    took_s = time.monotonic() - start
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err[-2000:]
    assert "under TCG" in err  # another architecture never runs under KVM
    exp_id = json.loads(r.stdout)["id"]
    stored = tmp_path / "results" / exp_id
    system = json.loads((stored / "system.json").read_text())
    assert system["machine"] == "aarch64"
    assert (system["kernel_release"], system["realtime"]) == (release, True)
    assert system["kernel_config_found"]  # the root's /boot/config-RELEASE, read in the guest
    assert system["isolated_cpus"] == [1]
    assert system["virtualization"]["accel"] == "tcg"

    (case,) = sorted((stored / "cases").glob("*.json"))
    doc = json.loads(case.read_text())
    spikes = explained_spikes(doc)
    named = [
        c
        for s in spikes
        for c in s["causes"]
        if c["kind"] == "thread" and c["name"] == "rtlab:spin" and c.get("policy") == "fifo"
    ]
    assert named, " | ".join(s["verdict"] for s in spikes)
    print(f"\narm64: {release} booted and measured in {took_s:.0f} s; {len(spikes)} spikes")
