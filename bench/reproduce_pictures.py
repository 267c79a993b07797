"""Draw the small pictures of docs/reproduce.md from synthetic results shaped like the
experiments' cases (bench/make_sweep.py write_planned): the layout, not any system's numbers.

    python bench/reproduce_pictures.py [OUT_DIR]      (default docs/img)

Writes bars.png (worst case and p99 per setup and stress type, the `stress` preset on two
kernels) and overlay.png (before/after exceedance curves of examples/imx8-before-after.toml),
each a PNG under 60 KB.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from make_sweep import write_planned

from rtlab.report._data import collect
from rtlab.report._layoutplots import bar_plot, overlay_plot
from rtlab.report._layouts import build_pivots
from rtlab.store import Store

ROOT = Path(__file__).resolve().parents[1]
DPI = 72  # small files: the pictures show a layout, not values to read off
MAX_BYTES = 60_000


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp)
        write_planned(results, "rt", "stress", seed=1, label="PREEMPT_RT")
        write_planned(results, "generic", "stress", seed=2, label="PREEMPT_DYNAMIC", slower=3)
        before = ROOT / "examples" / "imx8-before-after.toml"
        write_planned(results, "before", str(before), n=20_000, seed=3, label="before", slower=4)
        write_planned(results, "after", str(before), n=20_000, seed=4, label="after")
        store = Store(results)
        kernels = collect([store.open("rt"), store.open("generic")])
        bars = bar_plot(build_pivots(kernels, None))
        change = collect([store.open("before"), store.open("after")])
        overlay = overlay_plot(*change)
        assert bars is not None and overlay is not None
        for name, plot in (("bars.png", bars), ("overlay.png", overlay)):
            path = out / name
            plot.figure.savefig(path, format="png", dpi=DPI, metadata={"Title": plot.title})
            size = path.stat().st_size
            print(f"{path}: {size} bytes")
            if size > MAX_BYTES:
                print(f"{path}: larger than {MAX_BYTES} bytes", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
