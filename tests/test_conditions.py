"""The judgement of a case's conditions (rtlab.analysis.judge_conditions) over synthetic
result documents: each reason a run's conditions are not met, each warning, the verdict
and its exit status, the document check of `conditions`."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rtlab.analysis import SYMPTOMS, irq_label, judge_conditions, symptom_of
from rtlab.cli._common import EXIT_CONDITIONS, EXIT_THRESHOLD, verdict, verdict_fields
from rtlab.errors import UserError
from rtlab.resultdoc import check_document
from rtlab.results import CaseConditions, isolated_cpus_of
from rtlab.targets._farm import worst_exit

ELAPSED_NS = 10_000_000_000  # 10 s between the two reads of /proc/interrupts


def doc(
    meter: str = "wakeup",
    policy: str = "fifo:99",
    cpu: int | None = 1,
    count: int = 10_000,
    **params: Any,
) -> dict[str, Any]:
    """A schema-6 document of one thread whose conditions are all as asked."""
    return {
        "schema": 6,
        "meter": meter,
        "complete": True,
        "elapsed_ns": ELAPSED_NS,
        "params": {"policy": policy, "mlock": True, "dma_latency_us": None, **params},
        "mlocked": True,
        "loads": [],
        "threads": [
            {
                "index": 0,
                "cpu": cpu,
                "count": count,
                "min_ns": 2_000,
                "max_ns": 40_000,
                "mean_ns": 5_000.0,
                "policy": {"name": "fifo", "priority": 99, "nice": 0},
                "policy_fallback": False,
            }
        ],
        "conditions": {
            "interrupts": {
                "error": None,
                "elapsed_ns": ELAPSED_NS,
                "truncated": False,
                "per_cpu": [
                    {
                        "cpu": 1 if cpu is None else cpu,
                        "total": 10_020,
                        "timer": {"name": "LOC", "count": 10_010},
                        "irqs": [
                            {
                                "irq": "LOC",
                                "name": "Local timer interrupts",
                                "device": False,
                                "count": 10_010,
                            },
                            {
                                "irq": "RES",
                                "name": "Rescheduling interrupts",
                                "device": False,
                                "count": 10,
                            },
                        ],
                    }
                ],
            },
            "kmsg": {"error": None, "messages": [], "lost": 0},
            "applied": {
                "error": None,
                "threads": [
                    {
                        "index": 0,
                        "tid": 1234,
                        "policy": policy,
                        "cpus_allowed": "0-1" if cpu is None else str(cpu),
                    }
                ],
                "vm_locked_kb": 20_000,
                "vm_rss_kb": 20_100,
                "dma_latency_us": None,
            },
        },
    }


def test_a_run_as_asked_meets_its_conditions_without_warnings():
    c = judge_conditions(doc(), isolated={1}, nohz_full={1})
    assert c.recorded and c.met and c.not_met == [] and c.warnings == []
    (cpu,) = c.cpus
    assert cpu["cpu"] == 1 and cpu["isolated"] and cpu["nohz_full"]
    assert cpu["timer_per_s"] == pytest.approx(1001.0)
    assert cpu["ticks_per_s"] == pytest.approx(1.0)  # the meter's 1000 wake-ups/s taken off


def test_the_policy_read_back_differs_from_the_one_asked_for():
    d = doc()
    d["conditions"]["applied"]["threads"][0]["policy"] = "other:0"
    c = judge_conditions(d)
    assert c.not_met == ["T0 ran other:0, not fifo:99"]


def test_a_policy_fallback_is_not_met_with_its_reason():
    d = doc()
    t = d["threads"][0]
    t.update(policy_fallback=True, policy_fallback_reason="Operation not permitted")
    d["conditions"]["applied"]["threads"][0]["policy"] = "other:0"
    (reason,) = judge_conditions(d).not_met
    assert reason == "T0 ran other:0, not fifo:99 (fell back: Operation not permitted)"


def test_a_migrated_document_with_a_fallback_is_not_met_though_not_recorded():
    d = doc()
    d["schema"], d["conditions"] = 6, None  # as a schema-5 document migrates
    d["threads"][0].update(
        policy={"name": "other", "priority": 0, "nice": 0},
        policy_fallback=True,
        policy_fallback_reason="SCHED_FIFO needs CAP_SYS_NICE",
    )
    c = judge_conditions(d)
    assert not c.recorded and not c.met
    assert c.not_met == ["T0 ran other:0, not fifo:99 (fell back: SCHED_FIFO needs CAP_SYS_NICE)"]
    assert c.cpus == [] and c.messages == [] and c.applied is None


def test_a_migrated_document_without_fallback_is_met():
    d = doc()
    d["conditions"] = None
    c = judge_conditions(d)
    assert not c.recorded and c.met and c.warnings == []


@pytest.mark.parametrize(
    ("allowed", "reason"),
    [
        ("0-1", "T0 may run on CPUs 0-1, not only on CPU 1"),
        ("0", "T0 may run on CPUs 0, not only on CPU 1"),
        ("garbage", "T0 may run on CPUs 'garbage', not only on CPU 1"),
        ("1", None),
    ],
)
def test_a_pinned_thread_allowed_elsewhere_is_not_met(allowed, reason):
    d = doc()
    d["conditions"]["applied"]["threads"][0]["cpus_allowed"] = allowed
    assert judge_conditions(d).not_met == ([reason] if reason else [])


def test_an_unpinned_thread_may_run_anywhere():
    assert judge_conditions(doc(cpu=None)).met


def test_memory_not_locked():
    d = doc()
    d["mlocked"], d["mlock_error"] = False, "mlockall failed (Cannot allocate memory)"
    assert judge_conditions(d).not_met == [
        "memory not locked (mlockall failed (Cannot allocate memory))"
    ]
    d = doc()
    d["conditions"]["applied"]["vm_locked_kb"] = 4_000  # of 20,100 kB resident
    assert judge_conditions(d).not_met == ["memory not locked: 4,000 of 20,100 kB resident locked"]
    d["params"]["mlock"] = False  # --no-mlock: nothing asked, nothing judged
    assert judge_conditions(d).met


def test_the_pagefault_meter_locks_memory_only_when_its_protection_says_so():
    d = doc(meter="pagefault", protect="none")  # it undoes the runner's mlockall by design
    d["conditions"]["applied"]["vm_locked_kb"] = 0
    assert judge_conditions(d).met
    d["params"]["protect"] = "mlock+prefault"
    assert judge_conditions(d).not_met == ["memory not locked: 0 of 20,100 kB resident locked"]


def test_the_deadline_mechanism_runs_sched_deadline_by_design():
    d = doc(meter="periodic", mechanism="deadline")  # params.policy stays the default fifo:99
    d["conditions"]["applied"]["threads"][0]["policy"] = "deadline:100us/1ms/1ms"
    assert judge_conditions(d).met
    d["conditions"]["applied"]["threads"][0]["policy"] = "other:0"
    assert judge_conditions(d).not_met == ["T0 ran other:0, not deadline"]


@pytest.mark.parametrize(
    ("held", "reason"),
    [
        (100, "/dev/cpu_dma_latency at 100 µs, above the 10 µs asked for"),
        (None, "/dev/cpu_dma_latency 10 µs not held"),
        (10, None),
        (0, None),  # another process holds a tighter target: still within ours
    ],
)
def test_dma_latency_not_held(held, reason):
    d = doc(dma_latency_us=10)
    d["conditions"]["applied"]["dma_latency_us"] = held
    assert judge_conditions(d).not_met == ([reason] if reason else [])


def test_settings_not_read_back_are_not_judged_but_said():
    d = doc(dma_latency_us=0)
    d["conditions"]["applied"] = {"error": "/proc/self/status: Permission denied",
                                  "threads": [], "vm_locked_kb": None, "vm_rss_kb": None,
                                  "dma_latency_us": None}  # fmt: skip
    c = judge_conditions(d)
    assert c.met
    assert c.warnings == [
        "evidence incomplete: applied settings not read back: /proc/self/status: Permission denied"
    ]


def _device(d: dict[str, Any], count: int, irq: str = "36") -> None:
    d["conditions"]["interrupts"]["per_cpu"][0]["irqs"].insert(
        0, {"irq": irq, "name": "PCI-MSI 512000-edge virtio0-input.0", "device": True,
            "count": count}
    )  # fmt: skip


def test_device_interrupts_on_an_isolated_measured_cpu_warn():
    d = doc()
    _device(d, 1204)
    c = judge_conditions(d, isolated={1})
    assert c.met
    assert c.warnings == ["IRQ 36 virtio0-input.0 fired 1,204 times on CPU 1 (isolated)"]
    assert judge_conditions(d, isolated={0}).warnings == []  # CPU 1 is not isolated


def test_many_device_interrupts_are_counted_after_the_first_rows():
    d = doc()
    for n in range(5):
        _device(d, 10 - n, irq=str(40 + n))
    warnings = judge_conditions(d, isolated={1}).warnings
    assert len(warnings) == 4 and warnings[-1] == "2 more device IRQs on CPU 1 (isolated)"


def test_ticks_on_a_nohz_full_cpu_running_a_sleeping_meter():
    d = doc()
    d["conditions"]["interrupts"]["per_cpu"][0]["timer"]["count"] = 12_500  # 1250/s
    c = judge_conditions(d, isolated={1}, nohz_full={1})
    assert c.cpus[0]["ticks_per_s"] == pytest.approx(250.0)
    assert c.warnings == [
        "CPU 1 (nohz_full) ticked about 250 times/s (local timer interrupts 1,250/s, less "
        "the meter's own 1,000/s wake-ups; about 1/s expected)"
    ]
    assert judge_conditions(d, isolated={1}).warnings == []  # not nohz_full: a tick is due


def test_ticks_on_a_nohz_full_cpu_running_a_busy_meter():
    d = doc(meter="noise", count=3)  # noise counts noise events, not activations
    d["conditions"]["interrupts"]["per_cpu"][0]["timer"]["count"] = 1_000
    c = judge_conditions(d, nohz_full={1})
    assert c.cpus[0]["ticks_per_s"] == pytest.approx(100.0)
    assert len(c.warnings) == 1 and "ticked about 100 times/s" in c.warnings[0]
    d["conditions"]["interrupts"]["per_cpu"][0]["timer"]["count"] = 12  # 1.2/s: working
    assert judge_conditions(d, nohz_full={1}).warnings == []


def test_no_tick_estimate_for_unpinned_or_event_driven_meters():
    for d in (doc(cpu=None), doc(meter="response")):
        d["conditions"]["interrupts"]["per_cpu"][0]["timer"]["count"] = 50_000
        c = judge_conditions(d, nohz_full={1})
        assert c.cpus[0]["ticks_per_s"] is None and c.warnings == []
        assert c.cpus[0]["timer_per_s"] == pytest.approx(5000.0)


def test_a_cpu_without_a_local_timer_row_has_no_rate():
    d = doc()
    d["conditions"]["interrupts"]["per_cpu"][0]["timer"] = None
    c = judge_conditions(d, nohz_full={1})
    assert c.cpus[0]["timer_per_s"] is None and c.cpus[0]["ticks_per_s"] is None


#: A kernel line for each symptom, as the kernel prints it.
KERNEL_LINES = {
    "RT throttling": "sched: RT throttling activated",
    "deadline replenish lagged": "sched: DL replenish lagged too much",
    "RCU stall": "rcu: INFO: rcu_preempt self-detected stall on CPU",
    "soft lockup": "watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [spin:123]",
    "hung task": "INFO: task kworker/1:2:88 blocked for more than 120 seconds.",
    "NOHZ tick-stop error": "NOHZ tick-stop error: local softirq work is pending, handler #08!!!",
    "spurious IRQ": 'irq 36: nobody cared (try booting with the "irqpoll" option)',
    "clocksource unstable": "clocksource: timekeeping watchdog on CPU1: Marking clocksource "
    "'tsc' as unstable because the skew is too large:",
    "perf interrupt too long": "perf: interrupt took too long (2503 > 2500), lowering "
    "kernel.perf_event_max_sample_rate to 79000",
}


def test_every_symptom_has_a_kernel_line():
    assert set(KERNEL_LINES) == {name for name, _ in SYMPTOMS}
    assert symptom_of("rcu: INFO: rcu_sched detected stalls on CPUs/tasks:") == "RCU stall"
    assert symptom_of("e1000e: eth0 NIC Link is Up 1000 Mbps Full Duplex") is None


@pytest.mark.parametrize(("name", "text"), sorted(KERNEL_LINES.items()))
def test_kernel_log_symptoms_warn(name, text):
    d = doc()
    d["conditions"]["kmsg"]["messages"] = [
        {"t_us": 5, "level": 6, "facility": 0, "text": "virtio_net virtio0 eth0: link up"},
        {"t_us": 9, "level": 4, "facility": 0, "text": text},
    ]
    c = judge_conditions(d)
    assert c.met and c.warnings == [f"kernel log: {name}: {text!r}"]
    assert [m["symptom"] for m in c.messages] == [None, name]


def test_a_symptom_logged_by_user_space_is_labelled_so():
    d = doc()
    d["conditions"]["kmsg"]["messages"] = [
        {"t_us": 9, "level": 4, "facility": 1, "text": "sched: RT throttling activated"}
    ]
    c = judge_conditions(d)
    assert c.warnings == [
        "kernel log: RT throttling: 'sched: RT throttling activated' (logged by user space)"
    ]
    assert c.messages[0]["user_space"] is True


def test_evidence_not_read_is_said():
    d = doc()
    d["conditions"]["interrupts"] = {
        "error": "/proc/interrupts: Permission denied",
        "elapsed_ns": None,
        "truncated": False,
        "per_cpu": [],
    }
    d["conditions"]["kmsg"] = {"error": None, "messages": [], "lost": 3}
    c = judge_conditions(d)
    assert c.met and c.cpus == []
    assert c.warnings == [
        "evidence incomplete: interrupts not read: /proc/interrupts: Permission denied",
        "evidence incomplete: kernel log: 3 records lost (overwritten or cut)",
    ]


@pytest.mark.parametrize(
    ("irq", "name", "label"),
    [
        ("36", "PCI-MSI 512000-edge virtio0-input.0", "IRQ 36 virtio0-input.0"),
        ("1", "IO-APIC 1-edge i8042", "IRQ 1 i8042"),
        ("11", "GICv3 27 Level arch_timer", "IRQ 11 arch_timer"),
        ("9", "IO-APIC 9-fasteoi acpi", "IRQ 9 acpi"),
        ("LOC", "Local timer interrupts", "LOC (Local timer interrupts)"),
        ("44", "", "IRQ 44 "),
    ],
)
def test_irq_labels(irq, name, label):
    assert irq_label(irq, name) == label


def test_isolated_cpus_come_from_the_fingerprint():
    system = {"isolated_cpus": [2, 3], "nohz_full_cpus": [3, 4], "cpus_online": [0, 1, 2, 3, 4]}
    assert isolated_cpus_of(system) == ({2, 3, 4}, {3, 4})
    assert isolated_cpus_of({}) == (set(), set())


# -- the verdict ----------------------------------------------------------------------

ROWS = [{"series": "s", "case": "c", "max": 50_000}]
NONE: dict[str, Any] = {"kind": "none", "hypervisor": ""}
TCG: dict[str, Any] = {"kind": "vm", "hypervisor": "tcg", "emulated": True}


def _cases(*docs: dict[str, Any]) -> list[CaseConditions]:
    return [
        CaseConditions(i, "s", f"c{i}", judge_conditions(d, {1}, {1})) for i, d in enumerate(docs)
    ]


def _fallback() -> dict[str, Any]:
    d = doc()
    d["conditions"]["applied"]["threads"][0]["policy"] = "other:0"
    return d


def test_conditions_not_met_win_over_pass_and_fail_and_need_no_deadline():
    conds = _cases(_fallback(), doc())
    for dl in (None, 1_000_000, 1_000):  # none, PASS, FAIL
        status, text = verdict(ROWS, dl, NONE, conds)
        assert status == EXIT_CONDITIONS
        assert text is not None and text.plain.startswith(
            "CONDITIONS NOT MET: s / c0: T0 ran other:0, not fifo:99"
        )
        assert "PASS" not in text.plain and "FAIL" not in text.plain
        fields = verdict_fields(status, dl, NONE, conds)
        assert fields["verdict"] == "CONDITIONS NOT MET"
        assert fields["conditions_not_met"] == [
            {"series": "s", "case": "c0", "reason": "T0 ran other:0, not fifo:99"}
        ]
    assert verdict(ROWS, 1_000, NONE, _cases(doc()))[0] == EXIT_THRESHOLD


def test_warnings_do_not_change_the_verdict():
    d = doc()
    _device(d, 7)
    conds = _cases(d)
    status, text = verdict(ROWS, 1_000_000, NONE, conds)
    assert status == 0 and text is not None
    assert text.plain.splitlines() == [
        "PASS: 1 case(s) within 1.00 ms",
        "warning: s / c0: IRQ 36 virtio0-input.0 fired 7 times on CPU 1 (isolated)",
    ]
    fields = verdict_fields(status, 1_000_000, NONE, conds)
    assert fields["verdict"] == "PASS" and fields["conditions_not_met"] == []
    assert [w["reason"] for w in fields["condition_warnings"]] == [
        "IRQ 36 virtio0-input.0 fired 7 times on CPU 1 (isolated)"
    ]


def test_emulated_runs_keep_no_verdict_but_say_conditions_not_met():
    conds = _cases(_fallback())
    status, text = verdict(ROWS, 1_000_000, TCG, conds)
    assert status == EXIT_CONDITIONS and text is not None
    first, second = text.plain.splitlines()
    assert first.startswith("NO VERDICT") and second.startswith("CONDITIONS NOT MET: s / c0")
    fields = verdict_fields(status, 1_000_000, TCG, conds)
    assert fields["verdict"] is None and fields["no_verdict"]
    assert len(fields["conditions_not_met"]) == 1


def test_a_farm_exits_with_its_worst_member():
    assert worst_exit([0, 1, 6]) == 6
    assert worst_exit([6, 3]) == 3  # a board that could not measure is worse
    assert worst_exit([0, 0]) == 0 and worst_exit([]) == 0


# -- the document check ---------------------------------------------------------------


def test_a_document_with_conditions_passes_the_check():
    check_document(doc(), "d.json")
    d = doc()
    d["conditions"] = None
    check_document(d, "d.json")


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (("interrupts", "per_cpu"), [{"cpu": 1}] * 65, "per_cpu has 65 entries"),
        (("kmsg", "messages"), [{"text": "x"}] * 257, "messages has 257 entries"),
        (("kmsg", "messages"), [{"text": "x" * 1001}], "text is 1001 characters"),
        (("kmsg", "lost"), -1, "lost is out of range"),
        (("applied", "vm_rss_kb"), "many", "vm_rss_kb must be an integer"),
        (("interrupts",), [], "interrupts has the wrong type"),
    ],
)
def test_a_damaged_conditions_object_is_bad_input(path, value, named):
    d = copy.deepcopy(doc())
    where = d["conditions"]
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    with pytest.raises(UserError, match=named):
        check_document(d, "d.json")
