"""Which rtlab-probe binary to copy to a target of a given architecture (`uname -m`).

In order: the target's own `probe = PATH`; `$RTLAB_PROBES/<arch>/rtlab-probe`; the static
builds the package carries (`rtlab/probes/<arch>/rtlab-probe`, put there by
`make cross-probe` before `pip install .`); the build tree of `make cross-test`
(`build/<arch>/src/rtlab-probe` under the current directory); and for a target of this
machine's architecture, the probe rtlab itself runs (`find_probe`). Whichever is chosen
must run there: the session runs its `--version` before anything else and says so when
a dynamically linked probe does not find its libraries.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from rtlab.errors import UnsupportedError, UserError
from rtlab.probe import find_probe
from rtlab.targets._spec import TargetSpec

#: `uname -m` spellings of one architecture.
ALIASES = {"arm64": "aarch64", "amd64": "x86_64", "i686": "i386", "i586": "i386"}
PACKAGE_PROBES = Path(__file__).resolve().parents[1] / "probes"


def arch_name(uname_m: str) -> str:
    return ALIASES.get(uname_m, uname_m)


def candidates(arch: str) -> list[Path]:
    """Where a probe for ARCH is looked for, in order (the native fallback aside)."""
    out = []
    env = os.environ.get("RTLAB_PROBES")
    if env:
        out.append(Path(env) / arch / "rtlab-probe")
    out.append(PACKAGE_PROBES / arch / "rtlab-probe")
    out += [
        Path("build") / arch / "src" / "rtlab-probe",
        Path("build") / f"cross-{arch}" / "src" / "rtlab-probe",
    ]
    return out


def probe_for(spec: TargetSpec, uname_m: str) -> Path:
    """The local binary to copy to SPEC, whose `uname -m` is UNAME_M."""
    if spec.probe:
        path = Path(spec.probe)
        if not path.is_file():
            raise UserError(f"{spec.name}: probe {path}: no such file")
        return path
    arch = arch_name(uname_m)
    for path in candidates(arch):
        if path.is_file():
            return path
    if arch == arch_name(platform.machine()):
        return find_probe()
    tried = ", ".join(str(p) for p in candidates(arch))
    raise UnsupportedError(
        f"{spec.name}: no rtlab-probe for {uname_m} (looked at {tried}): build a static one "
        f"(make cross-probe for aarch64) or set probe = PATH for this target (docs/targets.md)"
    )
