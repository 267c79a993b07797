"""Reports of real runs (the probe at tiny scale), rendered in headless Chromium."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from ._skips import need_tool
from .conftest import is_root
from .test_report import inline_svgs, read_csv, tags_of

POLICY = "fifo:50" if is_root() else "other"

SMALL = f"""
[experiment]
name = "render"
[defaults]
loops = 400
interval = "500us"
settle = "0"
policy = "{POLICY}"
[[series]]
name = "plain"
sweep = {{ forkcopy = [0, 2, 4] }}
[[series]]
name = "two threads"
threads = 2
sweep = {{ forkcopy = [0, 4] }}
"""

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.usefixtures("chromium_installed")


@pytest.fixture(scope="session")  # session: checked before the module's real runs
def chromium_installed() -> None:
    if CHROMIUM is None:
        need_tool("chromium")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two real runs, the first with raw samples; `rtlab run` writes each one's report."""
    from rtlab.cli import main

    base = tmp_path_factory.mktemp("render")
    toml = base / "render.toml"
    toml.write_text(SMALL)
    out = base / "results"
    rc = main(["run", str(toml), "--out", str(out), "--raw", "--deadline", "1ms"])
    assert main(["run", str(toml), "--out", str(out)]) == 0
    ids = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert rc == _verdict_status(out / ids[0] / "report.verdict.csv")
    return out, ids


def _verdict_status(path) -> int:
    """The exit status a report's verdict table implies: 1 when a series failed."""
    return int(any(r["verdict"] == "FAIL" for r in read_csv(path)))


def test_run_writes_its_report(runs, capsys):
    out, ids = runs
    for exp_id in ids:
        html = (out / exp_id / "report.html").read_text()
        assert exp_id in html and len(inline_svgs(html)) == 1 + 2 + 2 + 2
        assert (out / exp_id / "report.stats.csv").is_file()
    verdict = read_csv(out / ids[0] / "report.verdict.csv")
    assert [r["deadline_ns"] for r in verdict] == ["1000000", "1000000"]  # from run --deadline
    assert all(r["verdict"] in ("PASS", "FAIL") for r in verdict)


def test_two_real_experiments_every_figure_and_table(runs, rtlab, tmp_path):
    out, ids = runs
    html_path = tmp_path / "two.html"
    rc, _, err = rtlab("report", *ids, "--results", str(out), "-o", str(html_path))
    assert rc == _verdict_status(tmp_path / "two.verdict.csv"), err
    html = html_path.read_text()
    figures = [dict(a)["id"] for t, a in tags_of(html).tags if t == "figure"]
    assert figures == [
        "fig-bars",  # the default pivot's worst case and p99 per setup
        "fig-overlay",  # two experiments: before and after on one axis per case
        "fig-box",
        "fig-box-0",  # one box-plot figure per setup
        "fig-box-1",
        "fig-hist-0-0",
        "fig-hist-0-1",
        "fig-hist-1-0",
        "fig-hist-1-1",
        "fig-exc-0",
        "fig-exc-1",
        "fig-time-0",
        "fig-time-1",
    ]
    for name in ("verdict", "system", "parameters", "loads", "stats", "compare", "wins"):
        assert f'id="table-{name}"' in html and (tmp_path / f"two.{name}.csv").is_file()
    # with raw samples on one side only, no rank test; the raw side's outliers are exact
    compare = read_csv(tmp_path / "two.compare.csv")
    assert len(compare) == 5 and all(r["p_value"] == "" for r in compare)
    assert "outliers from the raw samples" in html
    assert "outliers from histogram buckets" in html
    rows = read_csv(tmp_path / "two.stats.csv")
    assert [r["exact"] for r in rows] == ["True"] * 5 + ["False"] * 5
    loads = read_csv(tmp_path / "two.loads.csv")
    assert {(r["series"], r["loads"]) for r in loads} == {("plain", "4"), ("two threads", "4")}


def chromium(url: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run headless Chromium on URL in a fresh profile; stopped by its process group."""
    with tempfile.TemporaryDirectory(prefix="rtlab-chromium-") as profile:
        cmd = [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            *args,
            url,
        ]
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def console_messages(stderr: str) -> list[str]:
    """Messages the page wrote to the console (errors, CSP refusals, failed loads)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@needs_chromium
def test_console_check_sees_errors(tmp_path):
    """The console check can fail: a page with an error and a refused load is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><meta http-equiv="Content-Security-Policy" content="default-src '
        "'none'; script-src 'unsafe-inline'\"><p>x</p><script>console.error('boom');"
        "undefinedFunction();</script>"
    )
    cp = chromium(bad.as_uri(), "--dump-dom")
    msgs = console_messages(cp.stderr)
    assert any("boom" in m for m in msgs) and any("undefinedFunction" in m for m in msgs)


@needs_chromium
def test_report_renders_in_chromium(runs, rtlab, tmp_path):
    from PIL import Image

    out, ids = runs
    html_path = tmp_path / "two.html"
    rc, _, err = rtlab("report", *ids, "--results", str(out), "-o", str(html_path))
    assert rc == _verdict_status(tmp_path / "two.verdict.csv"), err
    source = html_path.read_text()
    assert "<script" not in source.lower()  # nothing runs: the DOM is the document

    cp = chromium(html_path.as_uri(), "--dump-dom")
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert console_messages(cp.stderr) == []
    dom = tags_of(cp.stdout).tags
    assert sum(t == "svg" for t, _ in dom) == len(inline_svgs(source)) == 13
    assert sum(t == "table" for t, _ in dom) == source.count("<table>")
    assert not [t for t, _ in dom if t in ("script", "img", "iframe")]

    for name, size in (("desktop", "1280,4000"), ("phone", "390,3000")):
        png = tmp_path / f"{name}.png"
        cp = chromium(html_path.as_uri(), f"--screenshot={png}", f"--window-size={size}")
        assert cp.returncode == 0 and png.is_file(), cp.stderr[-2000:]
        assert console_messages(cp.stderr) == []
        with Image.open(png) as im:
            rgb = im.convert("RGB")
            w, h = rgb.size
            assert (w, h) == tuple(int(x) for x in size.split(","))
            colours = rgb.getcolors(maxcolors=1 << 20)
            assert colours is not None and len(colours) > 50  # text, tables, plots
            white = sum(n for n, c in colours if min(c) > 245)
            assert white < 0.97 * w * h, "the screenshot is (nearly) blank"
        keep = os.environ.get("RTLAB_SCREENSHOTS")
        if keep:
            shutil.copy(png, Path(keep) / png.name)
