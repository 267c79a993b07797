"""What the bench scripts share."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def probe_path() -> str:
    """$RTLAB_PROBE, else the rtlab-probe beside this Python (the venv's), else on PATH."""
    env = os.environ.get("RTLAB_PROBE")
    if env:
        return env
    beside = Path(sys.executable).parent / "rtlab-probe"
    return str(beside) if beside.exists() else shutil.which("rtlab-probe") or "rtlab-probe"
