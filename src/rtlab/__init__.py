"""rtlab: does this Linux system meet a real-time latency requirement under load?"""

from rtlab._notebook import Experiment, load

__version__ = "0.1.0"
__all__ = ["Experiment", "__version__", "load"]
