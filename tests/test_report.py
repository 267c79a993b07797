"""rtlab report and rtlab plot on synthetic experiments (probe histogram geometry)."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from rtlab.errors import UserError
from rtlab.store import Store

SCRIPT = "<script>alert(1)</script>"
BREAKOUT = '"><img src=x onerror=alert(1)>'


def _load_make_sweep():
    path = Path(__file__).resolve().parents[1] / "bench" / "make_sweep.py"
    spec = importlib.util.spec_from_file_location("make_sweep", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


make_sweep = _load_make_sweep()
LOADS = (0, 4, 8)  # 9 cases per experiment: quick to draw


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of <title>."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


def tags_of(html: str) -> Tags:
    p = Tags()
    p.feed(html)
    return p


def inline_svgs(html: str) -> list[ET.Element]:
    out, pos = [], 0
    while (i := html.find("<svg", pos)) >= 0:
        j = html.index("</svg>", i) + len("</svg>")
        out.append(ET.fromstring(html[i:j]))
        pos = j
    return out


def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweeps") / "results"
    make_sweep.write_sweep(root, "sweep-a", n=3000, seed=1, host="host-a", loads=LOADS)
    make_sweep.write_sweep(root, "sweep-b", n=3000, seed=2, host="host-b", loads=LOADS)
    store = Store(root)
    return root, [store.open("sweep-a"), store.open("sweep-b")]


def test_two_experiment_report_has_every_figure_and_table(sweeps, tmp_path):
    from rtlab.report import write_report

    _, recs = sweeps
    out = tmp_path / "two.html"
    result = write_report(recs, out, deadline_ns=500_000)
    html = out.read_text()
    # bars and overlay of the default pivots, 1 box plot and one per setup, 2 experiments x
    # 3 series histograms, 3 exceedance, 3 timelines
    figs = ["fig-bars", "fig-overlay", "fig-box", "fig-box-0", "fig-box-1"]
    figs += [f"fig-hist-{i}-{j}" for i in range(2) for j in range(3)]
    figs += [f"fig-exc-{j}" for j in range(3)] + [f"fig-time-{j}" for j in range(3)]
    ids = [dict(a).get("id") for t, a in tags_of(html).tags if t == "figure"]
    assert ids == figs and result.figures == len(figs)
    tables = ["verdict", "system", "parameters", "loads", "stats", "compare", "wins"]
    tables += ["differences", "pivot-0-setup+series-x-forkcopy-max"]
    tables.append("pivot-1-setup+series-x-forkcopy-p99")
    for name in tables:
        assert f'id="table-{name}"' in html
        assert (tmp_path / f"two.{name}.csv").is_file()
    assert result.tables == len(tables) and len(result.csv) == len(tables)
    # figures: text alternatives, inline SVG that parses, with its own <title>/<desc>
    svgs = inline_svgs(html)
    assert len(svgs) == len(figs)
    ns = "{http://www.w3.org/2000/svg}"
    for svg in svgs:
        assert svg.get("role") == "img"
        assert svg.find(f"{ns}title").text and len(svg.find(f"{ns}desc").text) > 80
    all_ids = [i for svg in svgs for e in svg.iter() if (i := e.get("id"))]
    assert len(all_ids) == len(set(all_ids)), "ids of inline SVGs collide"
    # no network, no script
    tags = tags_of(html).tags
    assert not [t for t, _ in tags if t in ("script", "img", "link", "iframe", "object")]
    urls = set(re.findall(r"https?://[^\"'\s<>)]*", html))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls
    assert "@media print" in html and 'name="viewport"' in html
    # the load table: avg/max/jitter at 4 and 8 loads per setup and series
    loads = read_csv(tmp_path / "two.loads.csv")
    assert len(loads) == 2 * 3 * 2
    assert {r["loads"] for r in loads} == {"4", "8"}
    stats = read_csv(tmp_path / "two.stats.csv")
    assert len(stats) == 2 * 9
    # CSV figures are the documents' exact maxima
    doc = json.loads((recs[0].path / "cases" / "001.json").read_text())  # forkcopy=4
    row = next(r for r in stats if r["experiment"] == "sweep-a" and r["case"] == "forkcopy=4")
    assert int(row["max"]) == doc["threads"][0]["max_ns"]
    lrow = next(
        r
        for r in loads
        if r["experiment"] == "sweep-a" and r["series"] == "no preemption" and r["loads"] == "4"
    )
    assert int(lrow["max_ns"]) == doc["threads"][0]["max_ns"]
    # what differs between the setups: the host
    diff = read_csv(tmp_path / "two.differences.csv")
    assert any(r["what"] == "system: hostname" for r in diff)
    compare = read_csv(tmp_path / "two.compare.csv")
    assert len(compare) == 9 and all(float(r["max_ratio"]) > 0 for r in compare)


def test_verdict_pass_and_fail_with_margin(sweeps, tmp_path):
    from rtlab.report import collect, write_report

    _, recs = sweeps
    exps = collect(recs[:1])
    worst = {s.name: max(c.stats.max for c in s.cases) for s in exps[0].series}
    high = int(max(worst.values())) + 1000
    write_report(recs[:1], tmp_path / "pass.html", deadline_ns=high)
    rows = read_csv(tmp_path / "pass.verdict.csv")
    assert [r["verdict"] for r in rows] == ["PASS"] * 3
    for r in rows:
        assert int(r["margin_ns"]) == high - int(worst[r["series"]])
    assert '<div class="big">PASS</div>' in (tmp_path / "pass.html").read_text()
    low = int(min(worst.values())) - 1
    write_report(recs[:1], tmp_path / "fail.html", deadline_ns=low)
    rows = read_csv(tmp_path / "fail.verdict.csv")
    assert [r["verdict"] for r in rows] == ["FAIL"] * 3
    html = (tmp_path / "fail.html").read_text()
    assert '<div class="big">FAIL</div>' in html and "exceeds the deadline" in html
    write_report(recs[:1], tmp_path / "none.html")
    assert "No deadline: no verdict" in (tmp_path / "none.html").read_text()


def test_outliers_from_histogram_and_worst_samples(sweeps):
    from rtlab.report import collect

    _, recs = sweeps
    (exp,) = collect(recs[:1])
    for c in exp.cases():
        st = c.stats
        assert c.outlier_source == "histogram" and "histogram" in c.outlier_note
        assert np.all((c.outliers < st.whisker_low) | (c.outliers > st.whisker_high))
        assert np.all(np.diff(c.outliers) > 0)  # one dot each
        # the worst sample the probe kept is drawn exactly: it is the maximum
        assert int(c.outliers.max()) == int(st.max)


def _hostile_experiment(root: Path) -> Path:
    exp = make_sweep.write_sweep(root, "hostile", n=2000, seed=5, host=SCRIPT, loads=LOADS)
    system = json.loads((exp / "system.json").read_text())
    system["cmdline"] = f"quiet isolcpus=1 {BREAKOUT}"
    system["kernel_release"] = BREAKOUT
    (exp / "system.json").write_text(json.dumps(system))
    manifest = json.loads((exp / "experiment.json").read_text())
    for c in manifest["cases"]:
        if c["series"] == "preemption":
            c["series"] = f"preemption {SCRIPT}"
        c["name"] = c["name"] + BREAKOUT
    manifest["series"][1]["name"] = f"preemption {SCRIPT}"
    manifest["name"] = BREAKOUT
    manifest["notes"] = [SCRIPT]
    (exp / "experiment.json").write_text(json.dumps(manifest))
    audit = {
        "facts": {"hostname": SCRIPT},
        "findings": [
            {
                "id": f"x{BREAKOUT}",
                "status": "FAIL",
                "title": SCRIPT,
                "evidence": BREAKOUT,
                "fix": SCRIPT,
                "why": BREAKOUT,
            }
        ],
    }
    (exp / "audit.json").write_text(json.dumps(audit))
    return exp


def test_strings_from_the_measured_system_are_escaped(tmp_path):
    from rtlab.report import write_report

    root = tmp_path / "results"
    exp = _hostile_experiment(root)
    rec = Store(root).open("hostile")
    write_report([rec], exp / "report.html", deadline_ns=100_000)
    html = (exp / "report.html").read_text()
    assert SCRIPT not in html and BREAKOUT not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown, as text
    tags = tags_of(html).tags
    assert not [t for t, _ in tags if t in ("script", "img")]
    assert not [(t, k) for t, attrs in tags for k, _ in attrs if k.startswith("on")]
    for svg in inline_svgs(html):  # matplotlib escaped the series and case names
        names = {e.tag.split("}")[-1] for e in svg.iter()}
        assert not names & {"script", "img", "foreignObject", "image"}
    texts = [e.text or "" for svg in inline_svgs(html) for e in svg.iter()]
    assert any(SCRIPT in t for t in texts)  # drawn as text in a figure title
    for f in exp.glob("report.*.csv"):  # CSV keeps the values as they were
        list(csv.reader(io.StringIO(f.read_text())))
    assert any(SCRIPT in f.read_text() for f in exp.glob("report.*.csv"))


def test_audit_findings_most_severe_first(sweeps, tmp_path):
    from rtlab.report import write_report

    root = tmp_path / "results"
    exp = make_sweep.write_sweep(root, "audited", n=2000, seed=3, loads=LOADS)
    findings = [
        {"id": "hz", "status": "OK", "title": "HZ", "evidence": "250", "fix": "", "why": ""},
        {"id": "gov", "status": "WARN", "title": "governor", "evidence": "powersave"},
        {"id": "tick", "status": "INFO", "title": "tick", "evidence": "NO_HZ_IDLE"},
        {"id": "rt", "status": "FAIL", "title": "not PREEMPT_RT", "evidence": "dynamic",
         "fix": "boot a PREEMPT_RT kernel", "why": "unbounded latency"},
    ]  # fmt: skip
    (exp / "audit.json").write_text(json.dumps({"facts": {}, "findings": findings}))
    rec = Store(root).open("audited")
    write_report([rec], tmp_path / "a.html")
    rows = read_csv(tmp_path / "a.audit.csv")
    assert [r["status"] for r in rows] == ["FAIL", "WARN", "INFO", "OK"]
    assert rows[0]["fix"] == "boot a PREEMPT_RT kernel"
    html = (tmp_path / "a.html").read_text()
    assert '<span class="badge FAIL">FAIL</span>' in html
    assert "audit: 1 FAIL, 1 WARN" in html
    (exp / "audit.json").write_text('{"findings": [{"status": "BAD"}]}')
    with pytest.raises(UserError, match=r"audit\.json"):
        write_report([rec], tmp_path / "b.html")
    assert not (tmp_path / "b.html").exists()


def test_incomplete_experiment_is_flagged(tmp_path):
    from rtlab.report import write_report

    root = tmp_path / "results"
    exp = make_sweep.write_sweep(root, "partial", n=2000, seed=4, loads=LOADS)
    manifest = json.loads((exp / "experiment.json").read_text())
    manifest["cases"][8].update(status="pending", document=None)
    manifest["complete"] = False
    (exp / "experiment.json").write_text(json.dumps(manifest))
    doc = json.loads((exp / "cases" / "001.json").read_text())
    doc["complete"] = False
    (exp / "cases" / "001.json").write_text(json.dumps(doc))
    write_report([Store(root).open("partial")], tmp_path / "p.html")
    html = (tmp_path / "p.html").read_text()
    assert "INCOMPLETE" in html and "1 case(s) not run" in html
    assert "not run: forkcopy=8" in html and "cut short: forkcopy=4" in html


def test_nothing_half_written(sweeps, tmp_path):
    from rtlab.report import write_report

    _, recs = sweeps
    (tmp_path / "r.stats.csv").mkdir()  # the CSV cannot be renamed over a directory
    with pytest.raises(UserError, match=r"r\.stats\.csv: is a directory"):
        write_report(recs[:1], tmp_path / "r.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.stats.csv"]
    with pytest.raises(UserError, match="no such directory"):
        write_report(recs[:1], tmp_path / "missing" / "r.html")
    with pytest.raises(UserError, match="HTML"):
        write_report(recs[:1], tmp_path / "r.txt")


def test_to_svg_escapes_and_prefixes_ids(sweeps):
    from rtlab.report import plots

    _, recs = sweeps
    p = plots.box_plot(recs[:1])
    p.title = SCRIPT
    svg = plots.to_svg(p, "pfx")
    root = ET.fromstring(svg)
    assert SCRIPT not in svg and root.find("{http://www.w3.org/2000/svg}title").text == SCRIPT
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert ids and all(i.startswith("pfx-") for i in ids)
    refs = [v for e in root.iter() for k, v in e.attrib.items() if k.endswith("href")]
    assert refs and all(r.startswith("#pfx-") for r in refs)


@pytest.mark.parametrize(
    ("kind", "ext", "magic"),
    [
        ("box", "svg", b"<?xml"),
        ("hist", "svg", b"<?xml"),
        ("exceedance", "svg", b"<?xml"),
        ("timeline", "svg", b"<?xml"),
        ("box", "png", b"\x89PNG"),
        ("timeline", "pdf", b"%PDF"),
    ],
)
def test_plot_command_writes_each_kind_and_format(rtlab, sweeps, tmp_path, kind, ext, magic):
    root, _ = sweeps
    out = tmp_path / f"fig.{ext}"
    args = ["--results", str(root), "--series", "preemption", "--deadline", "100us"]
    rc, so, err = rtlab("plot", "sweep-a", "sweep-b", "--kind", kind, "-o", str(out), *args)
    assert rc == 0, err
    assert out.read_bytes().startswith(magic) and str(out) in so
    assert not list(tmp_path.glob(".*tmp*"))


def test_plot_and_report_bad_input(rtlab, sweeps, tmp_path):
    root, _ = sweeps
    r = ["--results", str(root)]
    cases = [
        (["plot", "sweep-a", "-o", str(tmp_path / "f.gif"), *r], "f.gif"),
        (["plot", "sweep-a", "-o", str(tmp_path / "no" / "f.svg"), *r], "no such directory"),
        (["plot", "sweep-a", "--kind", "pie", "-o", str(tmp_path / "f.svg"), *r], "pie"),
        (["plot", "sweep-a", "--series", "nope", "-o", str(tmp_path / "f.svg"), *r], "nope"),
        (["plot", "sweep-a", "--kind", "hist", "--case", "zz", "-o", str(tmp_path / "f.svg"),
          *r], "zz"),
        (["plot", "sweep-a", *r], "--output"),
        (["report", "sweep-a", "--load-levels", "4,x", *r], "--load-levels"),
        (["report", "sweep-a", "--loads", "4,x", *r], "--load-levels"),
        (["report", "nothing-here", *r], "nothing-here"),
        (["report", "sweep-a", "--deadline", "10", *r], "--deadline"),
        (["report", "sweep-a", "-o", str(tmp_path / "no" / "r.html"), *r], "no such directory"),
    ]  # fmt: skip
    for args, named in cases:
        rc, _, err = rtlab(*args)
        assert rc == 2, (args, err)
        assert len(err.strip().splitlines()) == 1 and named in err, (args, err)
        assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_report_command_default_paths(rtlab, sweeps):
    root, recs = sweeps
    rc, out, err = rtlab("report", "sweep-a", "--results", str(root), "--loads", "0,8")
    assert rc == 0, err
    assert str(recs[0].path / "report.html") in out
    loads = read_csv(recs[0].path / "report.loads.csv")
    assert {r["loads"] for r in loads} == {"0", "8"}
    rc, out, err = rtlab("report", "sweep-a", "sweep-b", "--results", str(root))
    assert rc == 0, err
    assert (root / "report-sweep-a-vs-sweep-b.html").is_file()


def test_cli_kinds_match_the_library():
    from rtlab.cli.plot import KINDS
    from rtlab.report.plots import KINDS as LIB_KINDS

    assert KINDS == LIB_KINDS
