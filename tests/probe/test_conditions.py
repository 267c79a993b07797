"""The run's conditions read by the real probe (docs/result-format.md, "Conditions"):
interrupts on the measured CPUs between the start and the end of measuring, the kernel
log records written meanwhile (a neutral marker written by the test, never a kernel
symptom), and the policy, affinity, locked memory and /dev/cpu_dma_latency target read
back at the end. Structure and invariants only: no rate is asserted."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import uuid
from pathlib import Path

import pytest

from .conftest import is_root, online_cpus, wait_measuring
from .test_wakeup import as_nobody, shared_dir  # noqa: F401  (a fixture)

needs_root = pytest.mark.skipif(not is_root(), reason="needs root for real-time policies")
needs_cpu1 = pytest.mark.skipif(1 not in online_cpus(), reason="needs CPU 1 online")
X86 = platform.machine() in ("x86_64", "i686", "i386")
METERS = ["wakeup", "periodic", "response", "noise", "pagefault", "alloc", "preempt", "worker",
          "pipeline"]  # fmt: skip


def check_interrupts(doc: dict, cpus: list[int], sleeper: bool = False) -> None:
    """Invariants of "interrupts" for a run of DOC over CPUS; a SLEEPER meter's timer
    wake-ups are local timer interrupts on its CPU."""
    irq = doc["conditions"]["interrupts"]
    assert irq["error"] is None, irq["error"]
    assert irq["truncated"] is False
    # read before the threads start measuring and after they all ended: around the window
    assert irq["elapsed_ns"] >= doc["elapsed_ns"] > 0
    assert [p["cpu"] for p in irq["per_cpu"]] == cpus
    for p in irq["per_cpu"]:
        counts = [i["count"] for i in p["irqs"]]
        assert len(counts) <= 32 and all(c > 0 for c in counts)
        assert counts == sorted(counts, reverse=True)
        assert p["total"] >= sum(counts)
        if X86:
            assert p["timer"]["name"] == "LOC"
        if X86 and sleeper:  # the local APIC timer: the meter's own wake-ups at least
            loc = [i for i in p["irqs"] if i["irq"] == "LOC"]
            assert loc and loc[0]["device"] is False and loc[0]["count"] == p["timer"]["count"]
        for i in p["irqs"]:
            assert not i["device"] or i["irq"].isdigit()  # a device has an IRQ number
            assert isinstance(i["name"], str) and len(i["name"]) <= 1000


def run_doc(run_probe, tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "r.json"
    cp = run_probe(*args, "--quiet", "--json", str(out))
    assert cp.returncode == 0, cp.stderr
    return json.loads(out.read_text())


@needs_root
@needs_cpu1
def test_pinned_run_reads_back_policy_affinity_memory_and_interrupts(run_probe, tmp_path):
    doc = run_doc(run_probe, tmp_path, "wakeup", "--cpus", "1", "--duration", "1s", "--policy",
                  "fifo:80")  # fmt: skip
    cond = doc["conditions"]
    check_interrupts(doc, [1], sleeper=True)
    applied = cond["applied"]
    assert applied["error"] is None
    (t,) = applied["threads"]
    assert t == {"index": 0, "tid": doc["threads"][0]["tid"], "policy": "fifo:80",
                 "cpus_allowed": "1"}  # fmt: skip
    assert t["policy"] == doc["params"]["policy"]
    assert doc["mlocked"] is True
    assert applied["vm_rss_kb"] > 0 and applied["vm_locked_kb"] >= applied["vm_rss_kb"] // 2
    assert applied["dma_latency_us"] is None  # no --dma-latency


@needs_root
def test_dma_latency_target_is_read_back(run_probe, tmp_path):
    doc = run_doc(run_probe, tmp_path, "wakeup", "--loops", "50", "--dma-latency", "0us")
    # the effective target is the smallest request held: ours, 0, is the smallest there is
    assert doc["params"]["dma_latency_us"] == 0
    assert doc["conditions"]["applied"]["dma_latency_us"] == 0


def test_unpinned_threads_follow_every_cpu_they_may_run_on(run_probe, tmp_path):
    doc = run_doc(run_probe, tmp_path, "wakeup", "--threads", "2", "--duration", "300ms",
                  "--allow-fallback")  # fmt: skip
    allowed = sorted(set(os.sched_getaffinity(0)) & set(online_cpus()))[:64]
    check_interrupts(doc, allowed)
    threads = doc["conditions"]["applied"]["threads"]
    assert [t["index"] for t in threads] == [0, 1]
    assert [t["tid"] for t in threads] == [t["tid"] for t in doc["threads"]]


@needs_root
@needs_cpu1
@pytest.mark.parametrize("meter", METERS)
def test_every_meter_records_its_conditions(run_probe, tmp_path, meter):
    doc = run_doc(run_probe, tmp_path, meter, "--cpus", "1", "--duration", "300ms")
    cond = doc["conditions"]
    check_interrupts(doc, [1])
    assert cond["kmsg"]["error"] is None
    assert [(t["policy"], t["cpus_allowed"]) for t in cond["applied"]["threads"]] == [
        (doc["params"]["policy"], "1")
    ]


def write_kmsg(text: str) -> None:
    with open("/dev/kmsg", "w") as f:  # one write is one record
        f.write(text)


@needs_root
@needs_cpu1
def test_kernel_log_records_written_while_measuring_and_only_those(probe, tmp_path):
    tag = uuid.uuid4().hex
    before, during, after = (f"rtlab-test: marker {tag} {w}" for w in ("before", "during", "after"))
    write_kmsg(f"<4>{before}\n")
    out, progress = tmp_path / "r.json", tmp_path / "progress.jsonl"
    proc = subprocess.Popen(
        [str(probe), "wakeup", "--cpus", "1", "--duration", "3s", "--quiet", "--json", str(out),
         "--progress", str(progress)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_measuring(progress, proc)
        write_kmsg(f"<4>{during}\n")
        assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    write_kmsg(f"<4>{after}\n")
    kmsg = json.loads(out.read_text())["conditions"]["kmsg"]
    assert kmsg["error"] is None
    mine = [m for m in kmsg["messages"] if tag in m["text"]]
    # written by user space: facility 1 (LOG_USER), the level it asked for
    assert mine == [{"t_us": mine[0]["t_us"], "level": 4, "facility": 1, "text": during}]
    assert kmsg["lost"] >= 0 and len(kmsg["messages"]) <= 256


@needs_root
def test_unprivileged_fallback_reads_back_the_policy_really_used(probe, shared_dir):  # noqa: F811
    out = shared_dir / "r.json"
    cp = subprocess.run(
        as_nobody([str(probe), "wakeup", "--policy", "fifo:80", "--loops", "20",
                   "--allow-fallback", "--quiet", "--json", str(out)]),
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    (t,) = doc["conditions"]["applied"]["threads"]
    assert doc["params"]["policy"] == "fifo:80"
    assert t["policy"].startswith("other:") and t["tid"] == doc["threads"][0]["tid"]
    kmsg = doc["conditions"]["kmsg"]
    if Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() == "1":
        assert kmsg["error"] == "/dev/kmsg: Operation not permitted"
        assert kmsg["messages"] == []
