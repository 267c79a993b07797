"""What the CLI prints: literal text whatever the data holds, exit codes a CI job can act on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
H60 = FIXTURES / "cyclictest" / "real-h60.json"
HOSTILE = "[bold]b[/bold] [link=http://example.invalid]l[/link] :smile: \x1b[31mred\x07"
SHOWN = "[bold]b[/bold] [link=http://example.invalid]l[/link] :smile: \\x1b[31mred\\x07"


def _imported(rtlab, results: Path, name: str = HOSTILE, series: str = HOSTILE) -> str:
    rc, out, err = rtlab(
        "import", "cyclictest", str(H60), "--name", name, "--series", series,
        "--results", str(results), "--json",
    )  # fmt: skip
    assert rc == 0, err
    return json.loads(out)["id"]


def _literal(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text
    assert "\x1b]8;" not in text  # no terminal hyperlink


def test_every_printing_command_shows_markup_literally(rtlab, tmp_path):
    results = tmp_path / "results"
    a = _imported(rtlab, results)
    b = _imported(rtlab, results)
    rc, out, err = rtlab("list", "--results", str(results))
    assert rc == 0 and SHOWN in out, out
    _literal(out + err)
    rc, out, err = rtlab("show", a, "--results", str(results))
    assert rc == 0 and SHOWN in out, out
    _literal(out + err)
    rc, out, err = rtlab("compare", a, b, "--results", str(results))
    assert rc == 0 and SHOWN in out, out
    _literal(out + err)
    rc, out, err = rtlab("report", a, "--results", str(results))
    assert rc == 0
    _literal(out + err)


def test_audit_evidence_with_brackets_is_printed(rtlab, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "systems" / "desktop", root)
    thp = root / "sys/kernel/mm/transparent_hugepage/enabled"
    assert thp.read_text().strip() == "[always] madvise never"
    rc, out, err = rtlab("audit", "--root", str(root))
    assert rc in (0, 1), err
    assert "transparent_hugepage/enabled: [always]" in out
    thp.write_text("[bold]always[/bold] \x1b[2J never\n")
    rc, out, _ = rtlab("audit", "--root", str(root))
    assert "transparent_hugepage/enabled: [bold]" in out
    _literal(out)


def test_error_messages_are_literal(rtlab, tmp_path):
    rc, _, err = rtlab("show", "no[bold]such\x1b[0m", "--results", str(tmp_path))
    assert rc == 2 and "no[bold]such\\x1b[0m" in err and "\x1b" not in err


def test_internal_error_is_one_line_exit_4(rtlab, monkeypatch):
    import rtlab.cli.list_ as list_mod

    def boom(_):
        raise RuntimeError("planted fault")

    monkeypatch.setattr(list_mod, "store_from", boom)
    rc, _, err = rtlab("list")
    assert rc == 4
    assert err.count("\n") == 1 and "internal error" in err and "planted fault" in err
    assert "RTLAB_DEBUG" in err and "Traceback" not in err
    monkeypatch.setenv("RTLAB_DEBUG", "1")
    rc, _, err = rtlab("list")
    assert rc == 4 and "Traceback" in err


def test_version_short_and_long(rtlab):
    for flag in ("-V", "--version"):
        rc, out, _ = rtlab(flag)
        assert rc == 0 and out.startswith("rtlab")


@pytest.mark.parametrize(("deadline", "status", "word"), [("1ns", 1, "FAIL"), ("1h", 0, "PASS")])
def test_deadline_sets_the_exit_status(rtlab, tmp_path, deadline, status, word):
    results = tmp_path / "results"
    exp = _imported(rtlab, results, name="plain", series="plain")
    rc, out, _ = rtlab("show", exp, "--results", str(results), "--deadline", deadline)
    assert rc == status and word in out
    rc, out, _ = rtlab("show", exp, "--results", str(results), "--deadline", deadline, "--json")
    assert rc == status and json.loads(out)["verdict"] == word
    rc, out, _ = rtlab(
        "report", exp, "--results", str(results), "--deadline", deadline, "--json",
        "--load-levels", "1,2",
    )  # fmt: skip
    assert rc == status and json.loads(out)["verdict"] == word
    assert Path(json.loads(out)["html"]).is_file()
    rc, out, _ = rtlab("show", exp, "--results", str(results))
    assert rc == 0 and "PASS" not in out and "FAIL" not in out  # no deadline, no verdict


def test_import_without_histogram_shows_what_the_file_has(rtlab, tmp_path):
    results = tmp_path / "results"
    rc, out, err = rtlab(
        "import", "cyclictest", str(FIXTURES / "cyclictest" / "real-nohist.json"),
        "--results", str(results), "--json",
    )  # fmt: skip
    assert rc == 0, err
    exp = json.loads(out)["id"]
    rc, out, err = rtlab("show", exp, "--results", str(results))
    assert rc == 0, err
    assert "percentiles unavailable" in out
    rc, out, _ = rtlab("show", exp, "--results", str(results), "--json")
    (row,) = json.loads(out)["rows"]
    assert row["count"] > 0 and row["min"] <= row["mean"] <= row["max"]
    assert row["median"] is None and row["p99"] is None


@pytest.mark.parametrize(
    "args",
    [
        ["show", "/etc"],
        ["show", "**"],
        ["show", "../.."],
        ["compare", "/etc", "*"],
        ["report", "/"],
        ["run", "quick", "--scale", "inf"],
        ["run", "quick", "--scale", "nan"],
        ["run", "quick", "--deadline", "100000h"],
        ["show", "x", "--deadline", "0us"],
    ],
)
def test_path_tricks_and_absurd_values_are_one_line(rtlab, tmp_path, args):
    rc, _, err = rtlab(*args, "--results", str(tmp_path / "results"))
    assert rc == 2, (args, err)
    assert err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err
    assert not (tmp_path / "results").exists()


OSC8 = "6.1-rt \x1b]8;;http://evil.invalid\x1b\\click\x1b]8;;\x1b\\"
RLO = "case\u202eevil"


def _hostile_store(tmp_path: Path) -> tuple[Path, str]:
    from rtlab.ingest import read_cyclictest
    from rtlab.records import CaseRecord, SeriesRecord, new_manifest
    from rtlab.store import Store

    manifest = new_manifest(
        name=RLO, description="", source="test",
        series=[SeriesRecord("s", "", ["p"])], cases=[CaseRecord(0, "s", RLO, {"p": RLO})],
    )  # fmt: skip
    system = {"schema": 1, "kernel_release": OSC8, "preempt_model": "rt"}
    results = tmp_path / "results"
    rec = Store(results).create(manifest, "", system, documents={0: read_cyclictest(H60)})
    return results, rec.id


def test_csv_escapes_what_the_tables_escape(rtlab, tmp_path):
    """list --csv printed a stored kernel release's OSC 8 hyperlink raw, show --csv a case
    name's U+202E: every format now shows them as the tables do."""
    results, exp = _hostile_store(tmp_path)
    rc, out, _ = rtlab("list", "--results", str(results), "--csv")
    assert rc == 0 and "6.1-rt \\x1b]8;;http://evil.invalid\\x1b\\click" in out
    _literal(out)
    rc, out, _ = rtlab("show", exp, "--results", str(results), "--csv")
    assert rc == 0 and "case\\u202eevil" in out and "\u202e" not in out
    rc, out, _ = rtlab("show", exp, "--results", str(results), "--json")
    assert rc == 0 and out.isascii() and json.loads(out)["rows"][0]["case"] == RLO
    rc, out, _ = rtlab("report", exp, "--results", str(results), "--json")
    assert rc == 0
    for table in Path(json.loads(out)["html"]).parent.glob("*.csv"):
        text = table.read_text()
        assert "\u202e" not in text and "\x1b" not in text
