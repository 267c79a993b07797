"""The stride load on any reported cache size: its buffer is twice the last-level cache up
to a cap, it counts work in bounded steps (not per pass, which takes seconds on a huge
buffer), and it says what memory it used and which LLC it read. Cache geometry comes
from a fixture tree ($RTLAB_SYSFS) and from this machine's own sysfs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .conftest import online_cpus

LAST = online_cpus()[-1]
GIB = 1 << 30
CAP = GIB  # the documented cap of the default buffer per worker
CACHE = Path("devices/system/cpu/cpu0/cache")


def fake_sysfs(root: Path, llc_kib: int) -> Path:
    """cpu0 with a 32 KiB L1d and an L3 of LLC_KIB, as the kernel writes them."""
    for index, (level, kind, size) in enumerate(
        [(1, "Data", "32K"), (3, "Unified", f"{llc_kib}K")]
    ):
        d = root / CACHE / f"index{index}"
        d.mkdir(parents=True)
        for name, value in {
            "level": level,
            "type": kind,
            "size": size,
            "coherency_line_size": 64,
        }.items():
            (d / name).write_text(f"{value}\n")
    return root


def run_stride(run_probe, tmp_path, spec: str, env: dict[str, str]) -> dict:
    """Run SPEC alone for one second; its entry of the document's "loads"."""
    out = tmp_path / "load.json"
    cp = run_probe("load", spec, "--duration", "1s", "--json", str(out), "--quiet", env=env)
    assert cp.returncode == 0, cp.stderr
    (ran,) = json.loads(out.read_text())["loads"]
    return ran


def default_cap(workers: int) -> int:
    """The cap for WORKERS workers: 1 GiB, or less when a quarter of the RAM is less."""
    page = os.sysconf("SC_PAGESIZE")
    ram_share = os.sysconf("SC_PHYS_PAGES") // 4 // workers * page
    return min(CAP, ram_share)


@pytest.mark.parametrize("llc_kib", [1 << 20, 1 << 30], ids=["1GiB", "1TiB"])
def test_a_huge_cache_is_capped_and_counted_in_steps(run_probe, tmp_path, llc_kib):
    env = {**os.environ, "RTLAB_SYSFS": str(fake_sysfs(tmp_path / "sys", llc_kib))}
    ran = run_stride(run_probe, tmp_path, f"stride:line@{LAST}", env)
    assert ran["llc_bytes"] == llc_kib * 1024
    cap = default_cap(1)
    assert ran["size_bytes"] == cap and ran["size_capped"] is True
    assert ran["memory_bytes"] == cap * ran["workers"] == cap
    assert "last-level cache" in ran["size_note"]  # the buffer is not larger than it
    # One pass over the buffer takes seconds; the count grows long before one ends.
    assert ran["work_units"] > 0 and ran["workers_ended_early"] == 0


def test_a_cache_below_half_the_cap_gets_twice_its_size(run_probe, tmp_path):
    env = {**os.environ, "RTLAB_SYSFS": str(fake_sysfs(tmp_path / "sys", 8 * 1024))}
    ran = run_stride(run_probe, tmp_path, f"stride:page@{LAST}", env)
    assert ran["llc_bytes"] == 8 << 20 and ran["size_bytes"] == 16 << 20
    assert ran["size_capped"] is False and ran["size_note"] is None
    assert ran["stride_bytes"] == os.sysconf("SC_PAGESIZE") and ran["work_units"] > 0


def test_sysfs_without_caches_falls_back(run_probe, tmp_path):
    (tmp_path / "sys").mkdir()
    env = {**os.environ, "RTLAB_SYSFS": str(tmp_path / "sys")}
    ran = run_stride(run_probe, tmp_path, f"stride:line@{LAST}", env)
    assert ran["llc_bytes"] is None and ran["size_bytes"] == 64 << 20  # 2x a 32 MiB guess
    assert ran["stride_bytes"] == 64 and ran["work_units"] > 0


def test_an_explicit_size_is_taken_as_given(run_probe, tmp_path):
    env = {**os.environ, "RTLAB_SYSFS": str(fake_sysfs(tmp_path / "sys", 64 * 1024))}
    ran = run_stride(run_probe, tmp_path, f"stride:line:16M@{LAST}", env)
    assert ran["size_bytes"] == 16 << 20 and ran["size_capped"] is False
    assert "SIZE" in ran["size_note"]  # 16 MiB is below the 64 MiB LLC


def real_llc() -> int | None:
    """The largest cache of the highest level listed for cpu0, in bytes (as the probe reads)."""
    best: tuple[int, int] | None = None
    for d in sorted((Path("/sys") / CACHE).glob("index*")):
        try:
            level = int((d / "level").read_text())
            size = (d / "size").read_text().strip()
        except (FileNotFoundError, ValueError):
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        n = int(size.rstrip("KMG")) * mult
        if n > 0 and (best is None or level > best[0]):
            best = (level, n)
    return best[1] if best else None


def test_on_this_machine(run_probe, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RTLAB_SYSFS"}
    ran = run_stride(run_probe, tmp_path, "stride:line", env)
    llc = real_llc()
    assert ran["llc_bytes"] == llc
    want = 2 * (llc or 32 << 20)
    cap = default_cap(ran["workers"])
    assert ran["size_bytes"] == min(want, cap) and ran["size_capped"] is (want > cap)
    assert ran["memory_bytes"] == ran["size_bytes"] * ran["workers"]
    assert ran["workers"] == len(online_cpus()) and ran["work_units"] > 0
