"""`rtlab show ID` and `rtlab report ID` when ID is a monitor (`rtlab monitor`)."""

from __future__ import annotations

from pathlib import Path

import click

from rtlab.cli._common import EXIT_THRESHOLD, console, line, print_json, rich_table, visible
from rtlab.monitor import MonitorRecord, MonitorView, over_time
from rtlab.units import format_ns

#: Explained samples and kernel messages printed per worst window (all in --json).
SHOWN_SPIKES = 3
SHOWN_MESSAGES = 4


def _verdict(view: MonitorView, deadline_ns: int | None) -> int:
    """Exit 1 when a window's maximum exceeded the deadline (--deadline, else the monitor's)."""
    dl = deadline_ns or view.rec.manifest.settings.deadline_ns
    if dl is None:
        return 0
    worst = max((c["max_ns"] or 0 for c in view.per_cpu()), default=0)
    return EXIT_THRESHOLD if worst > dl else 0


def show_monitor(rec: MonitorRecord, deadline_ns: int | None, as_json: bool) -> int:
    view = MonitorView(rec, rec.rows())
    status = _verdict(view, deadline_ns)
    if as_json:
        print_json({**view.to_json(), "over_time": over_time(view), "exceeded": bool(status)})
        return status
    out = console()
    m, s = rec.manifest, rec.manifest.settings
    cov = view.coverage()
    out.print(line(("monitor ", "bold"), rec.id, f" ({m.name})"))
    out.print(
        line(
            f"  target {'local' if m.target is None else m.target.get('name')}, kernel "
            f"{rec.system().get('kernel_release')}, CPUs {s.cpus}, {s.policy} every "
            f"{format_ns(s.period_ns)}, windows of {format_ns(s.window_ns)}"
        )
    )
    if not view.intervals:
        out.print(line("  no window measured yet"))
        return status
    share = cov.get("measured_share")
    out.print(
        line(
            f"  {len(view.intervals)} windows from {cov['first_utc']} to {cov['last_utc']}: "
            f"{cov['measured_s']:.0f} s measured of {cov['span_s']:.0f} s"
            + (f" ({share:.1%})" if share is not None else "")
            + f", {len(view.gaps)} gaps ({cov.get('gap_s', 0):.0f} s)"
        )
    )
    out.print(rich_table("per CPU", *view.cpu_table()))
    keys = view.cpus()
    out.print(
        rich_table(
            "maximum per window over time",
            ["from", "to", "windows", *[f"CPU {k}" for k in keys]],
            [
                [
                    g["from_utc"],
                    g["to_utc"],
                    g["intervals"],
                    *[format_ns(g["max_ns"].get(k)) for k in keys],
                ]
                for g in over_time(view)
            ],
        )
    )
    for g in view.gaps:
        out.print(
            line(
                f"gap {g.get('start_utc')} .. {g.get('end_utc')} "
                f"({g.get('seconds')} s): {g.get('reason')}"
            )
        )
    sym = view.symptoms()
    if sym:
        out.print(line("kernel-log symptoms: ", ", ".join(f"{k} ×{n}" for k, n in sym.items())))
    for w in view.worst():
        out.print(
            line(
                ("worst window ", "bold"),
                f"#{w['seq']} {w['start_utc']}: max ",
                format_ns(w["max_ns"]),
            )
        )
        for sp in w["spikes"][:SHOWN_SPIKES]:
            out.print(
                line(
                    f"    CPU {sp.get('cpu')} {format_ns(sp.get('latency_ns'))}: ",
                    sp.get("verdict") or "not explained",
                )
            )
        for msg in w["messages"][:SHOWN_MESSAGES]:
            tag = f"[{msg['symptom']}] " if msg.get("symptom") else ""
            out.print(line(f"    kmsg (window #{msg['seq']}) ", tag, msg.get("text") or ""))
    dl = deadline_ns or s.deadline_ns
    if dl is not None:
        word = "FAIL" if status else "PASS"
        out.print(
            line(
                (word, "bold red" if status else "bold green"),
                f": largest maximum against the deadline {format_ns(dl)}",
            )
        )
    return status


def report_monitor(
    rec: MonitorRecord, output: str | None, deadline_ns: int | None, as_json: bool
) -> int:
    from rtlab.report._monitor import write_monitor_report

    view = MonitorView(rec, rec.rows())
    path = Path(output) if output else rec.path / "report.html"
    figures = write_monitor_report(view, path)
    status = _verdict(view, deadline_ns)
    if as_json:
        print_json({"html": str(path), "figures": figures, "exceeded": bool(status)})
    else:
        click.echo(f"report: {visible(path)} ({figures} figures)")
    return status
