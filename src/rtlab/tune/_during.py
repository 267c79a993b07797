"""`rtlab run --tuned`: apply the tuning plan for the run and reset it afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rtlab.errors import UserError
from rtlab.system import LIVE_ROOT, parse_cpulist
from rtlab.tune._apply import CHANGED, GONE, REFUSED_NOW, RESTORED, Changer
from rtlab.tune._journal import Journal
from rtlab.tune._plan import apply_plan, plan, tuning_summary

JOURNAL_KIND = "tune"


def measured_cpus(cases: list[Any]) -> list[int] | None:
    """The CPUs the cases pin their measuring threads to (None: no case pins any)."""
    cpus: set[int] = set()
    for c in cases:
        pinned = c.call.value("cpus") if c.call is not None else None
        if pinned:
            cpus.update(parse_cpulist(pinned))
    return sorted(cpus) or None


@contextmanager
def tuned(exp: Any, say: Callable[[str], None], root: Path = Path("/")) -> Iterator[dict[str, Any]]:
    """Apply `rtlab tune` under ROOT (the live system) for the experiment's real-time
    CPUs; yield what was done (the record's tuning.json); reset on the way out, also on
    ^C and errors. SAY tells the user what was changed and restored."""
    path = Journal.path_for(JOURNAL_KIND)
    if Journal.load(path) is not None:
        raise UserError(
            f"--tuned: a tuning is already active ({path}): see `rtlab tune status`, "
            "`rtlab tune reset`, or run without --tuned"
        )
    live = root.resolve() == Path("/")
    p = plan(LIVE_ROOT if live else root, rt_cpus=measured_cpus(exp.cases),
             deadline_ns=exp.deadline_ns)  # fmt: skip
    journal = Journal.open_or_create(JOURNAL_KIND, p.root)
    changer = Changer(root, journal)
    record: dict[str, Any] = {"plan": p.to_dict(), "changes": [], "reset": []}
    try:
        outcomes = apply_plan(p, changer)
        record["changes"] = [o.to_dict() for o in outcomes]
        record["summary"] = tuning_summary(outcomes)
        made = sum(o.state == CHANGED for o in outcomes)
        refused = [o for o in outcomes if o.state == REFUSED_NOW]
        say(f"--tuned: {record['summary']} ({made} change(s) made)")
        for o in refused:
            say(f"--tuned: refused: {o.target} ({o.detail})")
        yield record
    finally:
        outs = changer.reset()
        record["reset"] = [o.to_dict() for o in outs]
        left = [o for o in outs if o.state not in (RESTORED, GONE)]
        if left:
            say(
                f"--tuned: {len(left)} change(s) not restored (see `rtlab tune status`): "
                + ", ".join(f"{o.target} ({o.state})" for o in left[:5])
            )
        else:
            say(f"--tuned: reset, {len(outs)} change(s) restored")
        if journal.remove_error:
            record["journal_error"] = journal.remove_error
            say(f"--tuned: the journal {journal.path} could not be removed "
                f"({journal.remove_error}): remove it by hand")  # fmt: skip
