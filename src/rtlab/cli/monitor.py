"""rtlab monitor: measure wake-up latency continuously, a row per window in the store."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from rtlab.cli._common import print_json, results_option, store_from, visible
from rtlab.cli._target import open_target, target_options
from rtlab.errors import UserError
from rtlab.monitor import (
    LE_NS,
    MonitorLoop,
    MonitorManifest,
    MonitorRecord,
    MonitorSettings,
    create_monitor,
    monitor_lock,
    open_monitor,
    utc_text,
    window_call,
)
from rtlab.records import MAX_DEADLINE_NS
from rtlab.system import format_cpulist, isolated_cpus, parse_cpulist
from rtlab.targets import Target, reopen_target
from rtlab.units import format_ns, parse_duration_ns

#: Ranges of the options (ns): a light probe, windows long enough to mean something.
PERIOD_RANGE = (50_000, 1_000_000_000)
WINDOW_RANGE = (1_000_000_000, 24 * 3_600_000_000_000)
DURATION_MAX = 10 * 366 * 86_400 * 1_000_000_000
#: Samples a window must hold at least (window / period).
MIN_SAMPLES = 100
EXPLAIN_MAX_RANGE = (1, 100)


def _duration(text: str | None, option: str, lo: int, hi: int) -> int | None:
    if text is None:
        return None
    try:
        ns = parse_duration_ns(text)
    except UserError as e:
        raise click.BadParameter(str(e), param_hint=option) from None
    if not lo <= ns <= hi:
        raise click.BadParameter(
            f"{text!r} is out of range ({format_ns(lo)}..{format_ns(hi)})", param_hint=option
        )
    return ns


def _port(text: str) -> tuple[str, int]:
    """--metrics-port [ADDR:]PORT: (address, port); the address defaults to 127.0.0.1."""
    addr, _, port = text.rpartition(":")
    addr = addr.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(
            f"{text!r}: expected [ADDR:]PORT, PORT 0..65535", param_hint="--metrics-port"
        )
    return addr, int(port)


def _cpus(value: str, target: Target) -> str:
    """A CPU list, "all" (every online CPU, the default) or "isolated", for the probe."""
    online = parse_cpulist(target.root.read("sys/devices/system/cpu/online") or "0")
    if value == "all":
        return format_cpulist(online)
    if value == "isolated":
        return format_cpulist(isolated_cpus(target.root).cpus)
    try:
        cpus = parse_cpulist(value)
    except (UserError, ValueError) as e:
        raise click.BadParameter(f"{value!r}: {e}", param_hint="--cpus") from None
    if not cpus:
        raise click.BadParameter(f"{value!r}: no CPU", param_hint="--cpus")
    missing = sorted(set(cpus) - set(online))
    if missing:
        raise click.BadParameter(
            f"CPU {missing[0]} is not online on {target.name}", param_hint="--cpus"
        )
    return format_cpulist(cpus)


@click.command()
@click.option(
    "--cpus",
    metavar="LIST",
    default="all",
    show_default=True,
    help='CPU list, "all" or "isolated": a probe thread on each',
)
@click.option(
    "--period",
    metavar="DUR",
    default="1ms",
    show_default=True,
    help="wake-up period of the probe threads (50us..1s)",
)
@click.option(
    "--window", metavar="DUR", default="5m", show_default=True, help="one row per window (1s..24h)"
)
@click.option(
    "--duration", metavar="DUR", help="stop this long after the start (default: never; ^C stops)"
)
@click.option(
    "--policy",
    metavar="P",
    default="fifo:99",
    show_default=True,
    help="scheduling policy of the probe threads",
)
@click.option("--deadline", metavar="DUR", help="count the wake-ups later than DUR (1ns..1h)")
@click.option(
    "--explain",
    metavar="DUR",
    help="trace the CPUs and explain each window's worst samples above DUR",
)
@click.option(
    "--explain-max",
    metavar="N",
    type=int,
    default=3,
    show_default=True,
    help="samples explained per window and CPU",
)
@click.option(
    "--name", metavar="NAME", default="monitor", show_default=True, help="name in the monitor's id"
)
@click.option(
    "--metrics-port",
    metavar="[ADDR:]PORT",
    help="serve Prometheus metrics at http://ADDR:PORT/metrics (ADDR default 127.0.0.1)",
)
@click.option(
    "--metrics-file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="write Prometheus metrics to FILE after each window (node_exporter textfile "
    "collector; written atomically)",
)
@click.option(
    "--resume",
    "resume_id",
    metavar="ID",
    help="continue monitor ID (after ^C, a kill or a reboot), marking the gap",
)
@target_options
@results_option
@click.option(
    "--json", "as_json", is_flag=True, help="JSON on stdout at the end: the id, windows, gaps"
)
def monitor(
    cpus: str,
    period: str,
    window: str,
    duration: str | None,
    policy: str,
    deadline: str | None,
    explain: str | None,
    explain_max: int,
    name: str,
    metrics_port: str | None,
    metrics_file: str | None,
    resume_id: str | None,
    target: str | None,
    targets_path: str | None,
    accept_new_host_key: bool,
    farm_id: str | None,
    results_dir: str,
    as_json: bool,
) -> int:
    """Measure wake-up latency continuously (a light probe thread per CPU) and keep, per
    window, each CPU's maximum, p99, count, deadline misses, the kernel-log symptoms and
    (--explain) the worst samples explained. Runs until --duration or ^C; `--resume ID`
    continues a stopped, killed or rebooted monitor and marks the gap. `rtlab show ID`
    and `rtlab report ID` show the maxima over time (docs/monitor.md).
    """
    if metrics_port and metrics_file:
        raise click.UsageError("--metrics-port and --metrics-file exclude each other")
    listen = _port(metrics_port) if metrics_port else None
    dur_ns = _duration(duration, "--duration", 1_000_000_000, DURATION_MAX)
    if metrics_file:
        from rtlab.monitor.metrics import check_metrics_file

        check_metrics_file(Path(metrics_file))
    store = store_from(results_dir)
    ctx = click.get_current_context()
    if resume_id:
        given = [
            f"--{p.name.replace('_', '-')}"
            for p in ctx.command.params
            if p.name
            in ("cpus", "period", "window", "policy", "deadline", "explain", "explain_max", "name")
            and ctx.get_parameter_source(p.name) is not click.core.ParameterSource.DEFAULT
        ]
        if given:
            raise click.UsageError(
                f"{given[0]}: --resume continues with the monitor's own settings"
            )
        rec = open_monitor(store, resume_id)
        if target is not None:
            raise click.UsageError("--resume continues on the target the monitor was started on")
        where = f"{rec.id}: monitor.json"
        opened = reopen_target(rec.manifest.target, where, accept_new_host_key)
        ctx.call_on_close(opened.close)
        if dur_ns is not None:
            rec.manifest.end_utc = utc_text(time.time() + dur_ns / 1e9)
            rec.save()
        return _run(store, rec, opened, listen, metrics_file, accept_new_host_key, as_json)
    s = MonitorSettings(
        cpus="",
        period_ns=_duration(period, "--period", *PERIOD_RANGE) or 0,
        window_ns=_duration(window, "--window", *WINDOW_RANGE) or 0,
        policy=policy,
        deadline_ns=_duration(deadline, "--deadline", 1, MAX_DEADLINE_NS),
        explain_ns=_duration(explain, "--explain", 1, MAX_DEADLINE_NS),
        explain_max=explain_max,
        le_ns=list(LE_NS),
    )
    if not EXPLAIN_MAX_RANGE[0] <= explain_max <= EXPLAIN_MAX_RANGE[1]:
        raise click.BadParameter(
            f"{explain_max} is out of range (1..100)", param_hint="--explain-max"
        )
    if s.window_ns < MIN_SAMPLES * s.period_ns:
        raise click.BadParameter(
            f"a window must hold at least {MIN_SAMPLES} periods "
            f"({format_ns(MIN_SAMPLES * s.period_ns)})",
            param_hint="--window",
        )
    if not name.strip() or len(name) > 80 or not name.isprintable():
        raise click.BadParameter("1 to 80 printable characters", param_hint="--name")
    at = open_target(target, targets_path, accept_new_host_key, farm_id)
    s.cpus = _cpus(cpus, at)
    refusal = at.checker([window_call(s)])(window_call(s))
    if refusal is not None:
        raise UserError(f"the probe refuses the monitor's call: {refusal.message}")
    system, audit = at.audit(s.deadline_ns)
    now = time.time()
    manifest = MonitorManifest(
        id=store.new_id(f"{name} {at.id_name}" if at.id_name else name),
        name=name,
        created_utc=utc_text(now),
        settings=s,
        end_utc=None if dur_ns is None else utc_text(now + dur_ns / 1e9),
        target=at.record(),
    )
    rec = create_monitor(store, manifest, system, audit)
    return _run(store, rec, at, listen, metrics_file, accept_new_host_key, as_json)


def _run(
    store: Any,
    rec: MonitorRecord,
    target: Target,
    listen: tuple[str, int] | None,
    metrics_file: str | None,
    accept_new_host_key: bool,
    as_json: bool,
) -> int:
    from rtlab.monitor.metrics import MonitorMetrics, Publisher

    s = rec.manifest.settings
    with monitor_lock(rec):
        rows = rec.rows()
        metrics = MonitorMetrics(rec.id, list(s.le_ns), s.deadline_ns is not None)
        for row in rows:
            metrics.add(row)
        pub = Publisher(metrics, Path(metrics_file) if metrics_file else None)
        try:
            if listen is not None:
                port = pub.serve(*listen)
                _say(f"metrics at http://{listen[0]}:{port}/metrics")
            pub.write()
            end = rec.manifest.end_utc or "^C"
            _say(
                f"{rec.id}: monitoring CPUs {s.cpus} on {target.name} every "
                f"{format_ns(s.period_ns)}, a row per {format_ns(s.window_ns)} window, until {end}"
            )
            recorded = rec.manifest.target

            def reopen() -> Target:
                return reopen_target(recorded, f"{rec.id}: monitor.json", accept_new_host_key)

            loop = MonitorLoop(rec, target, reopen if recorded else None, pub, _say)
            result = loop.run(rows)
        finally:
            pub.close()
    _say(
        f"{rec.id}: {result.intervals} windows measured, {result.gaps} gaps marked"
        + (
            "; stopped (continue with: rtlab monitor --resume " + rec.id + ")"
            if result.interrupted
            else ""
        )
    )
    if as_json:
        print_json(
            {
                "id": rec.id,
                "path": str(rec.path),
                "intervals": result.intervals,
                "gaps": result.gaps,
                "reconnects": result.reconnects,
                "interrupted": result.interrupted,
            }
        )
    return 130 if result.interrupted else 0


def _say(text: str) -> None:
    click.echo(visible(text), err=True)
