"""What would help when pWCET refuses: one sentence per failing gate, and, where a longer
run is what helps, how many activations (the CLI turns them into time at its rate)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rtlab.analysis._pwcet_clusters import Clusters, bursts_text
from rtlab.analysis._pwcet_gates import MIN_SAMPLES, Gate
from rtlab.units import format_ns

#: Bursts wanted above the top-1 % level for the tests on declustered extremes to see.
BURSTS_WANTED = 200


@dataclass(frozen=True)
class Advice:
    text: str  # the cause and what to do, one sentence
    activations: int | None = None  # a run of at least this many would help


def _run(n: int) -> str:
    return f"run at least {n:,} activations"


def for_gate(g: Gate, n: int, bursts: Clusters | None, params: dict[str, Any]) -> Advice | None:
    """The advice for the refusal by gate G of a fit of N samples; BURSTS: the declustered
    top 1 % (None when the extremes did not cluster); PARAMS: the method's parameters."""
    name = g.name
    if name == "samples":
        return Advice(f"too few samples for a tail: {_run(MIN_SAMPLES)}", MIN_SAMPLES)
    if name == "independence" and bursts is not None:
        want = max(2 * n, math.ceil(BURSTS_WANTED * n / max(bursts.count, 1)))
        return Advice(
            f"the extremes come in bursts ({bursts_text(bursts, n)}) and the bursts "
            "themselves recur in a pattern: find their cause with --explain, or " + _run(want),
            want,
        )
    if name == "independence":
        return Advice(
            "successive extremes are correlated beyond bursts (a slow oscillation or a "
            f"periodic disturbance): find its cause with --explain, or {_run(4 * n)}",
            4 * n,
        )
    if name == "exceedances" and bursts is not None:
        want = max(2 * n, math.ceil(10 * BURSTS_WANTED / max(bursts.theta, 1e-3)))
        return Advice(f"too few bursts of extremes ({bursts_text(bursts, n)}): {_run(want)}",
                      want)  # fmt: skip
    if name in ("trend", "trend-rate", "halves", "halves-rate"):
        return Advice(
            "the conditions changed during the run (a warm-up, a load that came and went, "
            "frequency or thermal changes): keep them constant, leave out the warm-up and "
            "measure again; a longer run does not remove a trend"
        )
    if name == "mixture":
        where = params.get("regime_boundary_ns")
        near = f" parting near {format_ns(where)}" if where else ""
        hint = f" (rtlab run --explain {max(where / 1e3, 1):.0f}us)" if where else ""
        return Advice(
            f"two tail regimes{near}: split by cause with --explain{hint} and judge each "
            "cause's tail, or remove the rarer cause"
        )
    if name == "stability":
        return Advice(
            "the return level differs between parts of the run (a slow drift, or rare "
            f"episodes some parts missed): {_run(4 * n)} to see which",
            4 * n,
        )
    if name in ("shape", "fit", "threshold", "blocks"):
        return Advice(
            "the tail does not follow one extreme-value law at this length: a longer run lets "
            "the threshold rise further into the tail (and --explain shows whether several "
            f"causes mix): {_run(10 * n)}",
            10 * n,
        )
    return None


def for_extrapolation(n: int) -> Advice:
    """A fit that answers, but not that far out (no finite interval, methods disagree)."""
    return Advice(
        f"an extrapolation that far needs more samples (or ask for a larger p): {_run(10 * n)}",
        10 * n,
    )
