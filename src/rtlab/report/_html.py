"""The self-contained HTML report: inline SVG figures, tables (each also as CSV beside the
HTML file), print and phone CSS, no JavaScript, nothing fetched from the network."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab import __version__
from rtlab._output import csv_text
from rtlab.analysis import PivotSpec
from rtlab.errors import UserError
from rtlab.report import _conditions, _production, _pwcet
from rtlab.report._appaudit import app_audit_table
from rtlab.report._comparison import comparison_tables
from rtlab.report._data import ExperimentData, collect
from rtlab.report._layoutplots import bar_plot, box_plots_per_setup, overlay_plot
from rtlab.report._layouts import INTRO as LAYOUTS_INTRO
from rtlab.report._layouts import TITLE as LAYOUTS_TITLE
from rtlab.report._layouts import build_pivots, pivot_table
from rtlab.report._spikes import TITLE as SPIKES_TITLE
from rtlab.report._spikes import spike_parts
from rtlab.report._tables import (
    Table,
    audit_table,
    fingerprint_table,
    load_table,
    meter_tables,
    parameters_table,
    series_verdicts,
    stats_table,
    verdict_table,
)
from rtlab.report.plots import (
    Plot,
    box_plot,
    exceedance_plot,
    histogram_plot,
    timeline_plot,
    to_svg,
)
from rtlab.results import mixed_virtualization
from rtlab.store import ExperimentRecord
from rtlab.system import is_emulated, virt_warning
from rtlab.units import format_ns

DEFAULT_LOADS = (4, 8)


@dataclass
class Figure:
    anchor: str
    title: str
    alt: str
    svg: str


@dataclass
class Section:
    anchor: str
    title: str
    intro: str = ""
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    tables_first: bool = False  # a summary table that the figures then detail


@dataclass
class Report:
    """What `write_report` wrote: the HTML file and one CSV file per table."""

    html: Path
    csv: list[Path]
    figures: int
    tables: int
    experiments: list[ExperimentData] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # of the virtualization measured under


def _svg_figures(plots: list[tuple[str, Plot]]) -> list[Figure]:
    out = []
    for anchor, p in plots:
        out.append(Figure(anchor, p.title, p.alt, to_svg(p, anchor)))
        p.figure.clear()  # free the artists as soon as the SVG text exists
    return out


def virtualization_lines(exps: list[ExperimentData]) -> tuple[list[str], bool]:
    """What the report says first of the virtualization the experiments ran under, and
    whether their latencies may be judged together (not when it differs between them)."""
    lines = []
    mixed = mixed_virtualization([e.rec for e in exps])
    if mixed:
        lines.append(f"Warning: {mixed[0].upper()}{mixed[1:]}.")
    for e in exps:
        warning = virt_warning(e.rec.manifest.virtualization)
        if warning:
            who = f"{e.id}: " if len(exps) > 1 else ""
            emulated = is_emulated(e.rec.manifest.virtualization)
            lines.append(f"{who}{warning}" + ("; no PASS/FAIL verdict." if emulated else "."))
    return lines, mixed is None


def _headline(exps: list[ExperimentData]) -> dict[str, Any]:
    verdicts = series_verdicts(exps)
    virt_lines, comparable = virtualization_lines(exps)
    judged = [v for v in verdicts if v["verdict"]] if comparable else []
    fails = [v for v in judged if v["verdict"] == "FAIL"]
    lines = list(virt_lines)
    big = "No deadline: no verdict"
    if not judged:
        status = "NONE"
        if not comparable:
            big = "Different virtualization: no verdict"
        elif any(v["no_verdict"] for v in verdicts):
            big = "Emulated: no verdict"
        else:
            lines.append(
                "No deadline was given: the figures and tables show what was measured; "
                "pass one with --deadline (at run or report time) for a PASS/FAIL verdict."
            )
    elif fails:
        status = "FAIL"
        for v in fails:
            lines.append(
                f"{v['series']}"
                + (f" ({v['setup']})" if len(exps) > 1 else "")
                + f": worst max {format_ns(v['max_ns'])} at {v['max_case']} exceeds the "
                f"deadline {format_ns(v['deadline_ns'])} by {format_ns(-v['margin_ns'])}."
            )
    else:
        status = "PASS"
        tight = min(judged, key=lambda v: v["margin_ns"])
        lines.append(
            f"Every series with a deadline stays within it; the least headroom is "
            f"{format_ns(tight['margin_ns'])} ({tight['series']}, worst max "
            f"{format_ns(tight['max_ns'])} at {tight['max_case']})."
        )
    refused, condition_lines = _conditions.headline(exps)
    if refused:  # a case measured something else than asked: no PASS/FAIL
        status, judged, lines = "CONDITIONS NOT MET", [], list(virt_lines)
    lines += condition_lines
    rates = {e.id: e.rate_hz for e in exps}
    for v in judged:  # the probabilistic side of the verdict (pWCET), when fitted
        text = _pwcet.headline(v, rates[v["experiment"]])
        if text is not None:
            lines.append((f"{v['setup']}: " if len(exps) > 1 else "") + text)
    for e in exps:
        if e.pending:
            lines.append(
                f"{e.id}: incomplete, {len(e.pending)} case(s) not run: "
                + ", ".join(f"{c.series} / {c.name}" for c in e.pending)
            )
        for c in e.cut_short:
            lines.append(f"{e.id}: case {c.case.series} / {c.case.name} was cut short.")
        if e.audit:
            counts = {
                s: sum(f["status"] == s for f in e.audit["findings"]) for s in ("FAIL", "WARN")
            }
            if any(counts.values()):
                lines.append(
                    f"{e.id}: audit: {counts['FAIL']} FAIL, {counts['WARN']} WARN "
                    "(see Audit findings)."
                )
    return {"status": status, "lines": lines, "big": big}


def _experiments_summary(exps: list[ExperimentData]) -> list[dict[str, Any]]:
    out = []
    for e in exps:
        cases = e.cases()
        starts = sorted(c.start_utc for c in cases if c.start_utc)
        out.append(
            {
                "id": e.id,
                "setup": e.setup,
                "name": e.rec.name,
                "description": e.rec.manifest.description,
                "source": e.rec.manifest.source,
                "created": e.rec.manifest.created_utc or (starts[0] if starts else ""),
                "measured": sum(c.elapsed_ns for c in cases) / 1e9,
                "cases": f"{len(cases)} of {len(cases) + len(e.pending)}",
                "samples": sum(c.stats.count for c in cases),
                "exact": all(c.stats.exact for c in cases),
                "deadline": format_ns(e.deadline_ns) if e.deadline_ns is not None else "none",
                "notes": list(e.rec.manifest.notes),
                "incomplete": e.incomplete,
            }
        )
    return out


def _layout_section(
    exps: list[ExperimentData], pivots: Sequence[PivotSpec] | None, overlay: str | None
) -> Section | None:
    """Pivot tables, the bars they lay out and the before/after overlay (two experiments,
    or the first against OVERLAY)."""
    tables = build_pivots(exps, pivots)
    plots: list[tuple[str, Plot]] = []
    bars = bar_plot(tables) if pivots or len(exps) > 1 else None  # per setup, or asked
    if bars is not None:
        plots.append(("fig-bars", bars))
    pair = _overlay_pair(exps, overlay)
    if pair is not None:
        drawn = overlay_plot(*pair)
        if drawn is not None:
            plots.append(("fig-overlay", drawn))
    if not tables and not plots:
        return None
    return Section(
        "layouts",
        LAYOUTS_TITLE,
        LAYOUTS_INTRO,
        _svg_figures(plots),
        [pivot_table(p, i) for i, p in enumerate(tables)],
        tables_first=True,
    )


def _overlay_pair(
    exps: list[ExperimentData], overlay: str | None
) -> tuple[ExperimentData, ExperimentData] | None:
    if overlay is None:
        return (exps[0], exps[1]) if len(exps) == 2 else None
    found = next((e for e in exps[1:] if e.id == overlay), None)
    if found is None:
        raise UserError(f"--overlay {overlay}: not one of the experiments after the first")
    return exps[0], found


def build_sections(
    exps: list[ExperimentData],
    loads: Sequence[int],
    pivots: Sequence[PivotSpec] | None = None,
    overlay: str | None = None,
) -> list[Section]:
    names: list[str] = []
    for e in exps:
        names += [s.name for s in e.series if s.cases and s.name not in names]
    secs: list[Section] = []
    secs.append(Section("verdict", "Verdict", tables=[verdict_table(exps)]))
    if _conditions.shown(exps):
        secs.append(
            Section(
                "conditions",
                _conditions.TITLE,
                _conditions.INTRO,
                tables=[_conditions.conditions_table(exps)],
            )
        )
    if (prod := _production.production_table(exps)) is not None:
        secs.append(Section("production", _production.TITLE, _production.INTRO, tables=[prod]))
    secs.append(
        Section(
            "measured",
            "What was measured",
            tables=[fingerprint_table(exps), parameters_table(exps)],
        )
    )
    layouts = _layout_section(exps, pivots, overlay)
    if layouts is not None:
        secs.append(layouts)
    if names:
        boxes = [("fig-box", box_plot(exps))]
        if len(exps) > 1:  # and one figure per setup, to read each kernel on its own
            boxes += [(f"fig-box-{i}", p) for i, (_, p) in enumerate(box_plots_per_setup(exps))]
        secs.append(
            Section(
                "box",
                "Latency against load",
                "Tukey box plots per series: quartile box, median line, whiskers at the most "
                "extreme sample within 1.5 IQR, outliers as dots; log scale. With several "
                "setups, all side by side, then one figure per setup.",
                _svg_figures(boxes),
            )
        )
        hist = [
            (f"fig-hist-{i}-{j}", histogram_plot(e, s.name))
            for i, e in enumerate(exps)
            for j, s in enumerate(e.series)
            if s.cases
        ]
        secs.append(
            Section(
                "hist",
                "Latency histograms",
                "One panel per case, one line per measuring thread; the maximum is marked.",
                _svg_figures(hist),
            )
        )
        secs.append(
            Section(
                "exceedance",
                "Exceedance (1 − CDF)",
                "The fraction of samples at or above each latency; all cases of a series overlaid.",
                _svg_figures(
                    [(f"fig-exc-{j}", exceedance_plot(exps, n)) for j, n in enumerate(names)]
                ),
            )
        )
        secs.append(
            Section(
                "timeline",
                "Latency over time",
                "Per-second minimum to maximum (band) and mean (line), the cases of a series "
                "one after another: periodic spikes and drift show here.",
                _svg_figures(
                    [(f"fig-time-{j}", timeline_plot(exps, n)) for j, n in enumerate(names)]
                ),
            )
        )
    spikes = spike_parts(exps)
    if spikes is not None:
        intro, plots, tables = spikes
        secs.append(Section("spikes", SPIKES_TITLE, intro, _svg_figures(plots), tables, True))
    meters = meter_tables(exps)
    if meters:
        secs.append(
            Section(
                "meters",
                "What each meter answers",
                "One table per meter, answering its question: periodic mechanisms with their "
                "CPU cost, event transports with lost events and rates, OS noise per CPU, page "
                "faults, allocation per size, preemptors, worker and pipeline designs, "
                "throughput.",
                tables=meters,
            )
        )
    tables = [stats_table(exps)]
    lt = load_table(exps, list(loads))
    if lt.rows:
        tables.insert(0, lt)
    secs.append(Section("tables", "Tables", tables=tables))
    if len(exps) > 1:
        secs.append(
            Section(
                "compare",
                "Comparison",
                "Cases matched by series and swept value. Ratios are other / first "
                "experiment (below 1: better than the first). The Mann-Whitney rank test "
                "needs raw samples on both sides (rtlab run --raw); 'differs' means p < 0.01.",
                tables=comparison_tables(exps),
            )
        )
    app = app_audit_table(exps)
    if app.rows:
        secs.append(
            Section(
                "app-audit",
                "Application audit",
                "The application's threads checked while each app or attach case ran "
                "(rtlab audit --pid): policy and priority, CPUs, locked memory, faults, "
                "switches, migrations, throttling.",
                tables=[app],
            )
        )
    if any(e.audit for e in exps):
        secs.append(
            Section(
                "audit",
                "Audit findings",
                "Readiness checks of the measured system, most severe first.",
                tables=[audit_table(exps)],
            )
        )
    return secs


def _csv_text(t: Table) -> str:
    return csv_text(t.csv_rows, t.csv_columns, lineterminator="\n")


def render_html(
    exps: list[ExperimentData], sections: list[Section], csv_names: dict[str, str]
) -> str:
    from jinja2 import Environment, PackageLoader

    env = Environment(
        loader=PackageLoader("rtlab.report", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    from markupsafe import Markup

    return env.get_template("report.html.j2").render(
        title="rtlab report: " + ", ".join(e.id for e in exps),
        generated=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        version=__version__,
        headline=_headline(exps),
        experiments=_experiments_summary(exps),
        sections=sections,
        csv_names=csv_names,
        svg=Markup,  # figure SVG comes from matplotlib, which escapes every text it draws
    )


def write_report(
    records: Sequence[ExperimentRecord | ExperimentData],
    path: str | Path,
    deadline_ns: int | None = None,
    loads: Sequence[int] = DEFAULT_LOADS,
    pwcet_p: float | None = None,
    rate_hz: float | None = None,
    pivots: Sequence[PivotSpec] | None = None,
    overlay: str | None = None,
) -> Report:
    """Write the HTML report of RECORDS to PATH and every table as PATH-stem.NAME.csv.

    ``deadline_ns`` None uses each experiment's own deadline. With a deadline or
    ``pwcet_p``, cases with raw samples get a pWCET fit: P(latency > deadline) in the
    verdict, the fitted tail in the exceedance plot (down to ``pwcet_p``, default 1e-9).
    PIVOTS are the pivot tables asked for (None: the defaults for what is swept); OVERLAY
    the id of the experiment overlaid on the first (default: the second of two).
    All files appear together (written to temporary names first, then renamed); on error
    none is left behind.
    """
    if not records:
        raise UserError("a report needs at least one experiment")
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise UserError(f"{path}: the report is an HTML file (.html)")
    if not path.parent.is_dir():
        raise UserError(f"{path.parent}: no such directory")
    reuse = all(isinstance(r, ExperimentData) for r in records) and deadline_ns is None
    exps = (
        list(records)
        if reuse and pwcet_p is None and rate_hz is None
        else collect(
            [r.rec if isinstance(r, ExperimentData) else r for r in records],
            deadline_ns,
            pwcet_p,
            **({} if rate_hz is None else {"rate_hz": rate_hz}),
        )
    )
    sections = build_sections(exps, loads, pivots, overlay)  # type: ignore[arg-type]
    tables = [t for s in sections for t in s.tables]
    csv_names = {t.name: f"{path.stem}.{t.name}.csv" for t in tables}
    files = {path: render_html(exps, sections, csv_names)}  # type: ignore[arg-type]
    for t in tables:
        files[path.with_name(csv_names[t.name])] = _csv_text(t)
    for target in files:
        if target.is_dir():
            raise UserError(f"{target}: is a directory, cannot write the report there")
        if target.exists() and not target.is_file():  # a device or FIFO is not replaced
            raise UserError(f"{target}: not a regular file, cannot write the report there")
    tmps: list[tuple[Path, Path]] = []
    created: list[Path] = []
    try:
        for target, text in files.items():
            tmp = target.with_name(f".{target.name}.tmp.{os.getpid()}")
            tmp.write_text(text, encoding="utf-8")
            tmps.append((tmp, target))
        for tmp, target in tmps:
            new = not target.exists()
            os.replace(tmp, target)
            if new:
                created.append(target)
    except OSError as e:
        for tmp, _ in tmps:
            tmp.unlink(missing_ok=True)
        for target in created:  # no new report files left half a set
            target.unlink(missing_ok=True)
        raise UserError(f"{path}: cannot write the report ({e.strerror or e})") from None
    return Report(
        html=path,
        csv=[t for t, _ in list(files.items())[1:]],
        figures=sum(len(s.figures) for s in sections),
        tables=len(tables),
        experiments=exps,  # type: ignore[arg-type]
        warnings=virtualization_lines(exps)[0],  # type: ignore[arg-type]
    )
