"""rtlab lava testdef: a LAVA test definition that runs an experiment on the device."""

from __future__ import annotations

from pathlib import Path

import click

from rtlab.cli._common import DURATION, scale_option, visible
from rtlab.errors import UserError
from rtlab.experiment import load_experiment, validate_with_probe
from rtlab.ingest._text import named, read_bytes
from rtlab.lava import DEFAULT_DUT_DIR, make_testdef, shell_quote
from rtlab.probe import EXIT_UNSUPPORTED, Refusal
from rtlab.probecall import ProbeCall, probe_argv
from rtlab.system import LIVE_ROOT, Root, load_snapshot
from rtlab.targets import LocalTarget


@click.group("lava")
def lava_group() -> None:
    """Board farms run by LAVA."""


@lava_group.command("testdef")
@click.argument("experiment")
@click.option(
    "--probe",
    "probe",
    default="rtlab-probe",
    show_default=True,
    metavar="URL|PATH",
    help="where the device gets the static rtlab-probe: a URL it downloads, or a path on it",
)
@scale_option
@click.option("--deadline", type=DURATION, help="pass/fail limit (default: the experiment's)")
@click.option(
    "--sysinfo",
    metavar="FILE",
    help="the device's `rtlab-probe sysinfo --json`: resolves cpus = all/last/isolated",
)
@click.option(
    "--dut-dir",
    default=DEFAULT_DUT_DIR,
    show_default=True,
    metavar="DIR",
    help="directory on the device for the probe and the result documents",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="YAML file (default: stdout)")
def testdef_cmd(
    experiment: str,
    probe: str,
    scale: float,
    deadline: int | None,
    sysinfo: str | None,
    dut_dir: str,
    output: str | None,
) -> None:
    """Write a LAVA test definition that runs EXPERIMENT (a preset or a TOML file) with
    the static rtlab-probe on the device under test and reports every case as
    `lava-test-case` measurements: CASE-max and CASE-p99 in µs, pass or fail against
    the deadline.

    The cases are checked with this machine's probe first (a load tool missing here is
    not an error: the device may have it).
    """
    root: Root = LIVE_ROOT
    if sysinfo:
        with named(sysinfo):
            read_bytes(Path(sysinfo))  # a regular file of a sane size, never a FIFO
        root = load_snapshot(sysinfo)
    exp = load_experiment(experiment, scale, root)
    calls = [c.call for c in exp.cases if c.call is not None]
    for call in calls:
        for a in probe_argv(call):
            shell_quote(a)  # a NUL cannot be passed on: refused before the probe sees it
    here = LocalTarget().checker(calls)
    skipped: list[str] = []

    def check(call: ProbeCall) -> Refusal | None:
        refusal = here(call)
        if refusal is not None and refusal.exit_code == EXIT_UNSUPPORTED:
            skipped.append(refusal.message)  # e.g. stress-ng missing here, not on the device
            return None
        return refusal

    validate_with_probe(exp, check)
    for why in dict.fromkeys(skipped):
        click.echo(visible(f"note: not checked here: {why}"), err=True)
    symbolic = sorted({str(c.params.get("cpus")) for c in exp.cases} & {"all", "last", "isolated"})
    if symbolic and not sysinfo:
        click.echo(
            f"note: cpus = {', '.join(symbolic)} resolved on this machine: give the device's "
            "`rtlab-probe sysinfo --json` with --sysinfo FILE",
            err=True,
        )
    dl = deadline if deadline is not None else exp.deadline_ns
    text = make_testdef(exp, probe, dl, dut_dir)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as e:
        raise UserError(f"{output}: cannot write ({e.strerror})") from None
    click.echo(visible(f"{output}: {len(exp.cases)} case(s)"), err=True)
