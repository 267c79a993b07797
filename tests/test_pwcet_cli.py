"""pWCET where the user looks: rtlab show/compare --pwcet, --fail-if 'pwcet(P)>LIMIT', the
report's verdict and exceedance plot, on stored experiments with raw samples."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
from pathlib import Path

import numpy as np
import pytest

from rtlab.analysis import NBUCKETS, Histogram, fit_tail
from rtlab.rawfile import write_raw
from tests.test_pwcet import known_tail


def _load(name: str):
    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


make_synthetic = _load("make_synthetic")


def write_experiment(results: Path, exp_id: str, cases: dict[str, np.ndarray], raw=True) -> None:
    """One series "s" with a case per entry, each one thread of samples (+ raw file)."""
    exp = results / exp_id
    (exp / "cases").mkdir(parents=True)
    listed = []
    for i, (name, x) in enumerate(cases.items()):
        s = make_synthetic.Summary()
        s.add(x)
        hist = Histogram.from_probe_counts(s.counts[:NBUCKETS], int(s.counts[NBUCKETS]))
        doc = make_synthetic.document(s, hist, ["test"], 10**9)
        if raw:
            doc["threads"][0]["raw_file"] = f"{i:03d}.raw"
            write_raw(exp / "cases" / f"{i:03d}.raw", x)
        else:
            del doc["threads"][0]["raw_file"]
        (exp / "cases" / f"{i:03d}.json").write_text(json.dumps(doc))
        listed.append({"index": i, "series": "s", "name": name, "swept": {},
                       "status": "done", "document": f"cases/{i:03d}.json"})  # fmt: skip
    manifest = {"schema": 2, "id": exp_id, "name": "t", "complete": True, "cases": listed}
    (exp / "experiment.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("pwcet") / "results"
    good, _ = known_tail(-0.1, 20_000, 7)
    other, _ = known_tail(-0.1, 20_000, 8)
    trend = (good * np.linspace(1.0, 2.0, good.size)).astype(np.int64)
    write_experiment(root, "exp-a", {"good": good, "trend": trend})
    write_experiment(root, "exp-b", {"good": other, "trend": trend})
    write_experiment(root, "exp-hist", {"good": good}, raw=False)
    return root


def test_show_pwcet_table_json_and_csv(rtlab, results):
    rc, out, err = rtlab("show", "exp-a", "--results", str(results), "--pwcet", "1e-9")
    assert rc == 0, err
    assert "latency exceeded with probability 1e-9 per activation" in out
    assert "once per 11.6 days at 1 kHz" in out
    assert "pot:" in out and "refused" in out
    assert "s / trend: refused: not stationary" in out
    assert "what would help: the conditions changed during the run" in out
    rc, out, _ = rtlab("show", "exp-a", "--results", str(results), "--pwcet", "10y", "--json")
    rows = {r["case"]: r for r in json.loads(out)["rows"]}
    good = rows["good"]["pwcet"]
    assert good["refused"] is None and good["method"] == "pot"
    assert good["lo_ns"] <= good["value_ns"] <= good["hi_ns"]
    assert good["p"] == pytest.approx(1 / (10 * 365.25 * 86400 * 1000))
    assert good["once_per"] == "once per 10 years at 1 kHz"
    assert any(g["name"] == "fit" for g in good["gates"])
    assert rows["trend"]["pwcet"]["value_ns"] is None
    assert rows["trend"]["pwcet"]["refused"].startswith("not stationary")
    assert "conditions changed" in rows["trend"]["pwcet"]["advice"]
    assert good["advice"] is None and good["params"]["declustered"] is False
    rc, out, _ = rtlab("show", "exp-a", "--results", str(results), "--pwcet", "1e-9", "--csv")
    table = list(csv.DictReader(io.StringIO(out)))
    assert float(table[0]["pwcet_lo_ns"]) <= float(table[0]["pwcet_ns"])
    assert table[1]["pwcet_ns"] == "" and table[1]["pwcet_refused"].startswith("not stationary")
    assert "conditions changed" in table[1]["pwcet_advice"]
    rc, out, _ = rtlab("show", "exp-a", "--results", str(results), "--csv")
    assert "pwcet_ns" not in out  # only asked for


def test_show_without_raw_samples_refuses(rtlab, results):
    _, out, _ = rtlab("show", "exp-hist", "--results", str(results), "--pwcet", "1e-9", "--json")
    (row,) = json.loads(out)["rows"]
    assert row["exact"] is False
    assert row["pwcet"]["refused"].startswith("no raw samples")
    assert "--raw" in row["pwcet"]["refused"]


@pytest.mark.parametrize(
    "args",
    [("--pwcet", "2"), ("--pwcet", "often"), ("--pwcet", "1e-9", "--pwcet-rate", "fast")],
)
def test_bad_pwcet_options_are_usage_errors(rtlab, results, args):
    rc, _, err = rtlab("show", "exp-a", "--results", str(results), *args)
    assert rc == 2 and "--pwcet" in err


def test_compare_pwcet_and_fail_if(rtlab, results):
    base = ("compare", "exp-a", "exp-b", "--results", str(results))
    hi = fit_tail(known_tail(-0.1, 20_000, 8)[0]).estimate(1e-9).hi_ns  # exp-b's good case
    # the fixed limit is held against the upper end of B's interval; a refusal fails
    rc, out, err = rtlab(*base, "--pwcet", "1e-9", "--fail-if", f"pwcet(1e-9)>{hi * 1.01:.0f}ns")
    assert rc == 1
    assert "pWCET(1e-9) A" in out and "pWCET(1e-9) B" in out
    assert "s / trend (B = exp-b): refused: not stationary" in out
    assert "s / trend" in err and "no estimate for B" in err
    assert "s / good" not in err
    rc, out, err = rtlab(*base, "--json", "--fail-if", f"pwcet(1e-9)>{hi * 0.99:.0f}ns")
    assert rc == 1 and "s / good" in err and "upper end" in err
    rows = {r["case"]: r for r in json.loads(out)["rows"]}
    (entry,) = rows["good"]["pwcet"]  # a threshold's probability is computed and exported
    assert entry["p"] == 1e-9 and entry["baseline"]["value_ns"] > 0
    assert entry["other"]["lo_ns"] <= entry["other"]["value_ns"] <= entry["other"]["hi_ns"]
    assert entry["other"]["hi_ns"] == pytest.approx(hi)
    rc, out, _ = rtlab(*base, "--pwcet", "1e-9", "--csv")
    assert rc == 0 and "pwcet_other_hi_ns" in out.splitlines()[0]
    rc, _, err = rtlab(*base, "--fail-if", "pwcet(1e-9)>")
    assert rc == 2 and "bad --fail-if" in err


def test_report_verdict_and_exceedance_plot(rtlab, results, tmp_path):
    out = tmp_path / "r.html"
    rc, _, err = rtlab(
        "report", "exp-a", "--results", str(results), "--deadline", "1ms", "-o", str(out)
    )
    assert rc == 0, err
    html = out.read_text()
    assert "P(&gt; deadline) per activation" in html
    # the trend case refuses, so the series has no bound and says why
    assert "no bound on P(latency &gt; 1.00 ms) per activation: trend: not stationary" in html
    assert "What would help: the conditions changed during the run" in html
    assert "fitted extreme-value tails (pWCET) down to 1e-9" in html
    verdict = list(csv.DictReader(io.StringIO((tmp_path / "r.verdict.csv").read_text())))
    assert verdict[0]["p_exceed_refused"].startswith("not stationary")
    assert verdict[0]["p_exceed_case"] == "trend"
    assert "conditions changed" in verdict[0]["p_exceed_advice"]
    # no raw samples anywhere and no --pwcet: no fit, no column, nothing said
    rc, _, _ = rtlab("report", "exp-hist", "--results", str(results), "--deadline", "1ms",
                     "-o", str(tmp_path / "h.html"))  # fmt: skip
    assert "per activation" not in (tmp_path / "h.html").read_text()


def test_report_bound_when_every_case_fits(tmp_path, rtlab):
    root = tmp_path / "results"
    good, _ = known_tail(-0.1, 20_000, 7)
    write_experiment(root, "one", {"good": good})
    out = tmp_path / "one.html"
    rc, _, err = rtlab("report", "one", "--results", str(root), "--deadline", "120us",
                       "--pwcet", "1e-12", "-o", str(out))  # fmt: skip
    assert rc == 1, err  # the max exceeds 120 µs: FAIL, and the probability says how often
    html = out.read_text()
    assert "P(latency &gt; 120 µs) per activation ≤" in html and "i.e. no more often than" in html
    assert "down to 1e-12" in html
    (row,) = csv.DictReader(io.StringIO((tmp_path / "one.verdict.csv").read_text()))
    lo, est, hi = (float(row[k]) for k in ("p_exceed_lo", "p_exceed", "p_exceed_hi"))
    assert 0 <= lo <= est <= hi < 1 and row["p_exceed_method"] == "pot"
    png = tmp_path / "exc.png"
    rc, _, err = rtlab("plot", "one", "--kind", "exceedance", "--pwcet", "1e-12",
                       "--results", str(root), "-o", str(png))  # fmt: skip
    assert rc == 0, err and png.read_bytes()[:4] == b"\x89PNG"
