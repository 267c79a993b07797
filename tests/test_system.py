from __future__ import annotations

import gzip

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtlab.errors import UserError
from rtlab.system import (
    SysRoot,
    collect_fingerprint,
    format_cpulist,
    isolated_cpus,
    parse_cpulist,
    preempt_model,
)

from .conftest import make_root


@given(st.sets(st.integers(min_value=0, max_value=300)))
def test_cpulist_round_trip(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == sorted(cpus)


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("0", [0]),
        ("0-3", [0, 1, 2, 3]),
        ("0-3,5", [0, 1, 2, 3, 5]),
        ("0-7:3", [0, 3, 6]),
        ("3,1,1", [1, 3]),
        (" 2-3\n", [2, 3]),
        ("", []),
    ],
)
def test_cpulist_parse(text, cpus):
    assert parse_cpulist(text) == cpus


@pytest.mark.parametrize("text", ["7-3", "a", "1-", "0-4:0", "-1"])
def test_cpulist_errors(text):
    with pytest.raises(UserError):
        parse_cpulist(text)


@pytest.mark.parametrize(
    ("files", "cpus", "source", "kernel"),
    [
        ({"proc/cmdline": "isolcpus=2-3"}, [2, 3], "isolcpus", True),
        ({"proc/cmdline": "isolcpus=managed_irq,domain,1"}, [1], "isolcpus", True),
        ({"proc/cmdline": "quiet", "sys/devices/system/cpu/isolated": "3"}, [3], "isolcpus", True),
        ({"proc/cmdline": "nohz_full=1-3 rcu_nocbs=1-3"}, [1, 2, 3], "nohz_full", True),
        (
            {
                "proc/cmdline": "quiet",
                "sys/fs/cgroup/rt/cpuset.cpus.partition": "isolated",
                "sys/fs/cgroup/rt/cpuset.cpus.effective": "3",
            },
            [3],
            "cpuset partition",
            True,
        ),
        ({"proc/cmdline": "quiet"}, [3], "last CPU", False),
    ],
)
def test_isolation_sources(tmp_path, files, cpus, source, kernel):
    root = make_root(tmp_path, {"sys/devices/system/cpu/online": "0-3", **files})
    iso = isolated_cpus(SysRoot(root))
    assert (iso.cpus, iso.source, iso.kernel_isolated) == (cpus, source, kernel)
    assert str(cpus[-1]) in iso.describe()


@pytest.mark.parametrize(
    ("version", "config", "realtime", "model"),
    [
        ("#1 SMP PREEMPT_RT Tue", None, None, "rt"),
        ("#1 SMP PREEMPT_DYNAMIC", None, None, "dynamic:unknown"),
        ("#1 SMP PREEMPT_DYNAMIC", {"CONFIG_PREEMPT_DYNAMIC": "y"}, None, "dynamic:unknown"),
        (
            "#1 SMP PREEMPT_DYNAMIC",
            {"CONFIG_PREEMPT_DYNAMIC": "y", "CONFIG_PREEMPT_VOLUNTARY": "y"},
            None,
            "dynamic:voluntary",
        ),
        ("#1 SMP PREEMPT Mon", None, None, "full"),
        ("#1 SMP Mon", None, None, "unknown"),
        ("#1 SMP", {"CONFIG_PREEMPT_VOLUNTARY": "y"}, None, "voluntary"),
        ("#1 SMP", {"CONFIG_PREEMPT_NONE": "y"}, None, "none"),
        ("#1 SMP", {}, "1", "rt"),
    ],
)
def test_preempt_model(version, config, realtime, model):
    assert preempt_model(version, config, realtime) == model


@pytest.mark.parametrize(
    ("debugfs", "boot_param", "model"),
    [
        ("none voluntary (full) lazy", None, "dynamic:full"),
        ("none (voluntary) full", "full", "dynamic:voluntary"),  # debugfs is the current state
        (None, "full", "dynamic:full"),
        (None, "bogus", "dynamic:none"),  # an unknown preempt= keeps the config default
        (None, None, "dynamic:none"),
    ],
)
def test_preempt_model_dynamic_current(debugfs, boot_param, model):
    config = {"CONFIG_PREEMPT_DYNAMIC": "y", "CONFIG_PREEMPT_NONE": "y"}
    assert preempt_model("#1 SMP PREEMPT_DYNAMIC", config, None, debugfs, boot_param) == model


def test_fingerprint_from_fixture_tree(tmp_path):
    root = make_root(
        tmp_path,
        {
            "proc/sys/kernel/osrelease": "6.6.0-rt15",
            "proc/sys/kernel/version": "#1 SMP PREEMPT_RT",
            "proc/sys/kernel/hostname": "board",
            "proc/cmdline": "isolcpus=3 nohz_full=3",
            "sys/devices/system/cpu/online": "0-3",
            "sys/kernel/realtime": "1",
        },
    )
    (root / "proc/config.gz").write_bytes(
        gzip.compress(b"CONFIG_PREEMPT_RT=y\nCONFIG_HZ=1000\nCONFIG_NO_HZ_FULL=y\n")
    )
    fp = collect_fingerprint(SysRoot(root))
    assert fp["kernel_release"] == "6.6.0-rt15" and fp["hostname"] == "board"
    assert fp["preempt_model"] == "rt" and fp["realtime"] is True
    assert fp["hz"] == 1000 and fp["timer_mode"] == "NO_HZ_FULL"
    assert fp["cpus_online"] == [0, 1, 2, 3] and fp["cpu_count"] == 4
    assert fp["isolated_cpus"] == [3] and fp["isolation_source"] == "isolcpus"


def test_fingerprint_of_this_machine():
    fp = collect_fingerprint()
    assert fp["kernel_release"] and fp["cpu_count"] >= 1
    model = fp["preempt_model"]
    assert model in {"none", "voluntary", "full", "lazy", "rt", "unknown"} or (
        model.split(":")[0] == "dynamic"
        and model.split(":")[1] in {"none", "voluntary", "full", "lazy", "unknown"}
    )
