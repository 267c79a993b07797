"""The ordered list of audit checks."""

from __future__ import annotations

from rtlab.system import _checks_cpu as cpu
from rtlab.system import _checks_kernel as kernel
from rtlab.system import _checks_model as model
from rtlab.system import _checks_os as os_
from rtlab.system import _checks_rt as rt
from rtlab.system._audit import Check

CHECKS: list[Check] = [
    kernel.KernelConfig(),
    model.PreemptModel(),
    kernel.DebugOptions(),
    kernel.LatencyTracers(),
    kernel.RtGroupSched(),
    rt.RcuBoost(),
    kernel.TimerHz(),
    model.TimerMode(),
    kernel.HresActive(),
    kernel.EventHandler(),
    kernel.TimerResolution(),
    kernel.Clocksource(),
    kernel.Isolcpus(),
    kernel.IsolcpusFlags(),
    kernel.NohzFull(),
    kernel.NohzFullConfig(),
    kernel.RcuNocbsCoversNohz(),
    kernel.RcuNocbs(),
    kernel.RcuNocbPoll(),
    kernel.IrqAffinityParam(),
    kernel.ThreadIrqs(),
    kernel.SkewTick(),
    kernel.CstateLimit(),
    kernel.TscReliable(),
    kernel.BootTracing(),
    cpu.Hypervisor(),
    cpu.StealTime(),
    cpu.Smt(),
    cpu.SmtSiblingIsolated(),
    cpu.Governor(),
    cpu.IdleExitLatency(),
    cpu.IrqAffinity(),
    cpu.DefaultIrqAffinity(),
    cpu.UserTasks(),
    cpu.KernelThreads(),
    cpu.WorkqueueMask(),
    cpu.WritebackMask(),
    rt.IrqThreads(),
    rt.RtPriorities(),
    os_.RtThrottling(),
    os_.RtThrottlingIsolated(),
    os_.TimerMigration(),
    os_.NumaBalancing(),
    os_.StatInterval(),
    os_.DirtyWriteback(),
    os_.SoftWatchdog(),
    os_.NmiWatchdog(),
    os_.Thp(),
    os_.ThpDefrag(),
    os_.Swap(),
    rt.Overcommit(),
    rt.OomPolicy(),
    os_.Ksm(),
    os_.MceInterval(),
    os_.CurrentTracer(),
    os_.LatencyTracersAvailable(),
]
