"""The pWCET options of show, compare, report and plot, and how an estimate is printed."""

from __future__ import annotations

from typing import Any

import click

from rtlab.analysis import (
    DEFAULT_RATE_HZ,
    Estimate,
    once_per,
    p_text,
    parse_probability,
    parse_rate,
)
from rtlab.cli._common import CommandFn
from rtlab.errors import UserError
from rtlab.units import format_ns

#: Columns a CSV export gets with --pwcet.
CSV_FIELDS = ["pwcet_p", "pwcet_ns", "pwcet_lo_ns", "pwcet_hi_ns", "pwcet_method",
              "pwcet_refused", "pwcet_advice"]  # fmt: skip


def pwcet_options(f: CommandFn) -> CommandFn:
    f = click.option(
        "--pwcet-rate",
        "pwcet_rate",
        default="1kHz",
        show_default=True,
        metavar="RATE",
        help="activations per second that turn probabilities into time (e.g. 1kHz, 500Hz, 1ms)",
    )(f)
    f = click.option(
        "--pwcet",
        "pwcet",
        metavar="P",
        help="add the latency exceeded with probability P per activation and its interval "
        "(extreme value theory on raw samples), e.g. 1e-9, or a time between exceedances: 10y",
    )(f)
    return f


def resolve(pwcet: str | None, rate: str | None) -> tuple[float | None, float]:
    """(probability or None, rate in Hz) from the option texts; bad ones are usage errors."""
    try:
        hz = parse_rate(rate) if rate else DEFAULT_RATE_HZ
    except UserError as e:
        raise click.BadParameter(str(e), param_hint="--pwcet-rate") from None
    if pwcet is None:
        return None, hz
    try:
        return parse_probability(pwcet, hz), hz
    except UserError as e:
        raise click.BadParameter(str(e), param_hint="--pwcet") from None


def title(p: float, rate_hz: float, confidence: float = 0.9) -> str:
    return (
        f"pWCET: latency exceeded with probability {p_text(p)} per activation "
        f"({once_per(p, rate_hz)}), {confidence:.0%} interval"
    )


def cell(est: Estimate) -> str:
    if est.refused is not None or est.value_ns is None:
        return "refused"
    return f"{format_ns(est.value_ns)} [{format_ns(est.lo_ns)}, {format_ns(est.hi_ns)}]"


def method_text(est: Estimate) -> str:
    prm = est.params
    if est.method == "pot" and prm.get("declustered"):
        above = format_ns(prm["threshold_ns"])
        return (
            f"pot: {prm['clusters']} bursts of {prm['exceedances']} above {above}, "
            f"θ={prm['extremal_index']:.2f}, ξ={prm['shape']:.2f}"
        )
    if est.method == "pot":
        above = format_ns(prm["threshold_ns"])
        return f"pot: {prm['exceedances']} above {above}, ξ={prm['shape']:.2f}"
    if est.method == "block-maxima":
        return f"block maxima: {prm['blocks']} × {prm['block']}, ξ={prm['shape']:.2f}"
    return "-"


def to_json(est: Estimate, rate_hz: float) -> dict[str, Any]:
    at = None if est.advice_activations is None else est.advice_activations / rate_hz
    return {**est.to_dict(), "rate_hz": rate_hz, "once_per": once_per(est.p, rate_hz),
            "advice_seconds": at}  # fmt: skip


def csv_fields(est: Estimate) -> dict[str, Any]:
    return {
        "pwcet_p": est.p,
        "pwcet_ns": est.value_ns,
        "pwcet_lo_ns": est.lo_ns,
        "pwcet_hi_ns": est.hi_ns,
        "pwcet_method": est.method,
        "pwcet_refused": est.refused,
        "pwcet_advice": est.advice,
    }
