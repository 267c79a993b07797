"""Damaged stores, generated: list and show never crash, never hide an experiment silently."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtlab.cli import main
from rtlab.ingest import read_cyclictest
from rtlab.records import CaseRecord, SeriesRecord, new_manifest
from rtlab.store import Store

GOOD = new_manifest(
    name="good",
    description="",
    source="test",
    series=[SeriesRecord("s", "", ["forkcopy"])],
    cases=[CaseRecord(i, "s", f"c{i}", {"forkcopy": i}) for i in range(2)],
).to_dict()
GOOD["id"] = "x"
GOOD["cases"][0].update(status="done", document="cases/000.json")
FIXTURE = Path(__file__).parent / "fixtures" / "cyclictest" / "real-h3.json"
DOC = read_cyclictest(FIXTURE)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(GOOD) if p]
DOC_PATHS = [p for p in _paths(DOC) if p]


@st.composite
def damaged(draw, good=GOOD, paths=PATHS):
    data = json.loads(json.dumps(good))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        node = data
        try:
            for k in path[:-1]:
                node = node[k]
            if draw(st.booleans()) and isinstance(node, dict):
                node.pop(path[-1], None)
            else:
                node[path[-1]] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue
    text = json.dumps(data).encode()
    cut = draw(st.one_of(st.none(), st.integers(0, len(text))))
    return text if cut is None else text[:cut]


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


def _store(tmp: str, manifest: bytes, doc: bytes) -> tuple[Path, Path]:
    results = Path(tmp)
    exp = results / "20260101-000000-x"
    (exp / "cases").mkdir(parents=True)
    (exp / "experiment.json").write_bytes(manifest)
    (exp / "cases" / "000.json").write_bytes(doc)
    return results, exp


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifest=damaged())
def test_damaged_manifest_never_crashes_list_or_show(manifest):
    with tempfile.TemporaryDirectory() as tmp:
        results, exp = _store(tmp, manifest, json.dumps(DOC).encode())
        rc, out, err = _cli("list", "--results", str(results), "--json")
        assert rc == 0 and "Traceback" not in err
        listed = [r["id"] for r in json.loads(out)]
        if not listed:  # skipped: said so
            assert f"skipped {exp}" in err
        rc, out, err = _cli("show", exp.name, "--results", str(results))
        assert rc in (0, 2), err
        assert "Traceback" not in err and "internal error" not in err
        if rc == 2:
            assert err.count("\n") == 1
        if listed:  # anything listed can be shown
            assert rc == 0, err


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=damaged(DOC, DOC_PATHS))
def test_damaged_result_document_is_one_line_or_shown(doc):
    with tempfile.TemporaryDirectory() as tmp:
        results, exp = _store(tmp, json.dumps(GOOD).encode(), doc)
        for cmd in (["show", exp.name], ["show", exp.name, "--json"], ["report", exp.name]):
            rc, _, err = _cli(*cmd, "--results", str(results))
            assert rc in (0, 2), (cmd, err)
            assert "Traceback" not in err and "internal error" not in err, (cmd, err)
            if rc == 2:
                assert err.count("\n") == 1, err


# --- hostile strings: printed literally in every format ----------------------------------

HOSTILE_SAMPLES = [
    "\x1b]8;;http://evil.invalid\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\u202eevil\u2066x\u2069",  # bidi override and isolates
    "\x9b2J\x85\u2028\u200b\ufeff\x7f",  # C1 CSI, NEL, line separator, zero width, DEL
    'a,b"c\r\nd',  # CSV quoting and line ends
    "[bold]x[/bold] :smile:",
]
HOSTILE = st.sampled_from(HOSTILE_SAMPLES) | st.text(
    st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12
)


def _printed_literally(text: str) -> None:
    """No line of TEXT has a character a terminal would act on (output line ends aside)."""
    for line in text.replace("\r\n", "\n").split("\n"):
        assert line.isprintable(), repr(line)


def _json_ascii(text: str):
    assert text.isascii()
    return json.loads(text, parse_constant=lambda t: pytest.fail(f"not JSON: {t}"))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=HOSTILE, release=HOSTILE, series=HOSTILE, case=HOSTILE, param=HOSTILE)
def test_hostile_names_are_printed_literally_in_every_format(name, release, series, case, param):
    with tempfile.TemporaryDirectory() as tmp:
        manifest = new_manifest(
            name=name,
            description="",
            source="test",
            series=[SeriesRecord(series, "", ["p"])],
            cases=[CaseRecord(0, series, case, {"p": param})],
        )
        system = {"schema": 1, "kernel_release": release, "preempt_model": release}
        rec = Store(Path(tmp)).create(manifest, "", system, documents={0: DOC})
        other = Store(Path(tmp)).create(manifest, "", system, documents={0: DOC})
        for cmd in (["list"], ["show", rec.id], ["compare", rec.id, other.id]):
            for fmt in ([], ["--csv"], ["--json"]):
                rc, out, err = _cli(*cmd, *fmt, "--results", tmp)
                assert rc == 0, (cmd, fmt, err)
                _printed_literally(out + err)
                if fmt == ["--json"]:
                    data = _json_ascii(out)
                    if cmd == ["list"]:
                        assert {r["name"] for r in data} == {name}
                        assert {r["kernel"] for r in data} == {release}
                    if cmd[0] == "show":
                        assert data["rows"][0]["case"] == case and data["name"] == name
                if fmt == ["--csv"]:
                    rows = list(csv.reader(io.StringIO(out)))
                    assert len(rows) == len(out.splitlines())  # a row is one line
