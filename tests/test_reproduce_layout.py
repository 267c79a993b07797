"""Each layout command of docs/reproduce.md produces the layout it describes (rows, columns,
statistic, figures), on fixture results shaped like the experiment's cases as `rtlab run`
plans them (bench/make_sweep.py write_planned). Never numbers."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from rtlab.experiment import load_experiment

from .test_report import make_sweep, tags_of

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _values(spec: str, key: str) -> list[str]:
    """The values of KEY in the cases of SPEC, in the order they are run."""
    out: list[str] = []
    for c in load_experiment(spec).cases:
        v = str({**c.params, **c.swept}.get(key))
        if v not in out:
            out.append(v)
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("reproduce") / "results"
    w = make_sweep.write_planned
    w(root, "rt", "stress", n=600, seed=1, label="PREEMPT_RT")
    w(root, "generic", "stress", n=600, seed=2, label="PREEMPT_DYNAMIC", slower=3)
    w(root, "odde", str(EXAMPLES / "odde-latency.toml"), n=300)
    w(root, "adam-rt", str(EXAMPLES / "adam-response.toml"), n=600, label="PREEMPT_RT")
    w(root, "adam-std", str(EXAMPLES / "adam-response.toml"), n=600, seed=2, label="standard")
    before = str(EXAMPLES / "imx8-before-after.toml")
    w(root, "before", before, n=3000, seed=3, label="before", slower=4)
    w(root, "after", before, n=3000, seed=4, label="after")
    w(root, "mech", "mechanisms", n=300)
    return root


def _pivot_json(rtlab, results: Path, *args: str) -> dict:
    rc, out, err = rtlab("show", *args, "--json", "--results", str(results))
    assert rc == 0, err
    return json.loads(out)


def test_enea_table_3_2_setup_by_stress_type(rtlab, results):
    doc = _pivot_json(rtlab, results, "rt", "generic", "--pivot", "setup:load:max")
    (p,) = doc["pivots"]
    assert p["rows"] == ["setup"] and p["cols"] == ["load"] and p["stat"] == "max"
    assert p["row_labels"] == [["PREEMPT_RT"], ["PREEMPT_DYNAMIC"]]
    assert [c[0] for c in p["col_labels"]] == _values("stress", "load")
    assert all(isinstance(v, int) for row in p["cells"] for v in row)
    rc, out, _ = rtlab(
        "show", "rt", "generic", "--pivot", "setup:load:max", "--csv", "--results", str(results)
    )
    rows = list(csv.reader(io.StringIO(out)))
    assert rc == 0 and rows[0] == ["setup", *_values("stress", "load")] and len(rows) == 3


def test_odde_c1_c4_policy_by_stressor(rtlab, results):
    spec = str(EXAMPLES / "odde-latency.toml")
    for stat in ("max", "min", "mean"):
        doc = _pivot_json(rtlab, results, "odde", "--pivot", f"policy:load:{stat}")
        (p,) = doc["pivots"]
        assert [r[0] for r in p["row_labels"]] == _values(spec, "policy")
        assert [c[0] for c in p["col_labels"]] == _values(spec, "load")
        assert p["stat"] == {"mean": "avg"}.get(stat, stat)
    (p,) = _pivot_json(rtlab, results, "odde", "--pivot", "priority:load")["pivots"]
    assert [r[0] for r in p["row_labels"]] == ["0", "-20", "40", "60", "99"]


def test_adam_table_2_and_bar_charts(rtlab, results, tmp_path):
    html = tmp_path / "adam.html"
    rc, out, err = rtlab(
        "report", "adam-rt", "adam-std", "--pivot", "setup:load:max", "--pivot",
        "setup:load:p99", "-o", str(html), "--json", "--results", str(results),
    )  # fmt: skip
    assert rc == 0, err
    written = json.loads(out)
    spec = str(EXAMPLES / "adam-response.toml")
    for i, stat in enumerate(("max", "p99")):
        path = tmp_path / f"adam.pivot-{i}-setup-x-load-{stat}.csv"
        assert str(path) in written["csv"]
        rows = list(csv.DictReader(io.StringIO(path.read_text())))
        assert [r["setup"] for r in rows] == ["PREEMPT_RT", "standard"]
        assert list(rows[0])[1:] == _values(spec, "load")
    figures = [dict(a)["id"] for t, a in tags_of(html.read_text()).tags if t == "figure"]
    assert figures[:2] == ["fig-bars", "fig-overlay"]
    assert "max and p99 per setup" in html.read_text()


def test_imx8_before_after_overlay(rtlab, results, tmp_path):
    html = tmp_path / "ba.html"
    rc, _, err = rtlab("report", "before", "after", "-o", str(html), "--results", str(results))
    assert rc == 0, err
    text = html.read_text()
    figures = [dict(a)["id"] for t, a in tags_of(text).tags if t == "figure"]
    assert "fig-overlay" in figures and "fig-box-0" in figures and "fig-box-1" in figures
    assert "Before and after: before against after" in text
    # the comparison command of the section: shares below the bound and their verdict
    rc, out, _ = rtlab(
        "compare", "before", "after", "--metrics", "p95,p99,max,below:100us", "--csv",
        "--fail-if", "below:100us<99.9%", "--results", str(results),
    )  # fmt: skip
    header = next(csv.reader(io.StringIO(out)))
    assert rc in (0, 1) and "below_100000ns_baseline" in header and "p95_other" in header


def test_mechanisms_by_series(rtlab, results):
    (p,) = _pivot_json(rtlab, results, "mech", "--pivot", "mechanism:series:max")["pivots"]
    assert [r[0] for r in p["row_labels"]] == _values("mechanisms", "mechanism")
    assert [c[0] for c in p["col_labels"]] == [
        s["name"] for s in load_experiment("mechanisms").series
    ]


def test_default_pivots_of_the_report(rtlab, results, tmp_path):
    """Without --pivot: setup x load for two experiments of the stress preset, policy x
    load for the Odde example, mechanism x series for the mechanisms preset."""
    for ids, name in (
        (("rt", "generic"), "setup-x-load"),
        (("odde",), "policy-x-load"),
        (("mech",), "mechanism-x-series"),
    ):
        html = tmp_path / f"{ids[0]}.html"
        rc, out, err = rtlab("report", *ids, "-o", str(html), "--json", "--results", str(results))
        assert rc == 0, err
        csvs = [Path(p).name for p in json.loads(out)["csv"]]
        assert f"{ids[0]}.pivot-0-{name}-max.csv" in csvs
        assert f"{ids[0]}.pivot-1-{name}-p99.csv" in csvs


def test_bad_pivot_exits_2(rtlab, results):
    for bad in ("setup:stressor", "setup:load:p42", "load"):
        rc, out, err = rtlab("show", "rt", "--pivot", bad, "--results", str(results))
        assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    rc, _, err = rtlab("report", "rt", "--pivot", "x:y", "--results", str(results))
    assert rc == 2 and "no case has the key" in err


def test_every_section_has_its_command_and_examples_are_valid(rtlab):
    text = (ROOT / "docs" / "reproduce.md").read_text()
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    wanted = ["Table 3.2", "Table 3.4", "C.1–C.4", "C.6–C.9", "C.10–C.12", "C.15–C.24",
              "periodic-mechanism", "C.48–C.49", "Table 2 and Figs 7–8", "i.MX8"]  # fmt: skip
    for w in wanted:
        (sec,) = [s for s in sections if w in s.splitlines()[0]]
        assert "rtlab " in sec, w
    for img in re.findall(r"\]\((img/[^)]+)\)", text):
        path = ROOT / "docs" / img
        assert path.is_file() and path.stat().st_size < 60_000
    for name in ("odde-latency.toml", "adam-response.toml", "imx8-before-after.toml"):
        toml = EXAMPLES / name
        assert name in (EXAMPLES / "README.md").read_text()
        rc, _, err = rtlab("run", str(toml), "--check")
        assert rc == 0, err
