"""rtlab: does this Linux system meet a real-time latency requirement under load?"""

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from rtlab._notebook import Experiment, load

try:
    __version__ = version("rtlab")  # the file VERSION, through meson.build's project()
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = (Path(__file__).parents[2] / "VERSION").read_text().strip()
__all__ = ["Experiment", "__version__", "load"]
