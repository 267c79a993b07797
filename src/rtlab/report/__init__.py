"""Plots and the self-contained HTML report of stored experiments.

write_report(records, "report.html", deadline_ns=100_000)   # + report.<table>.csv
rtlab.report.plots.box_plot(records)                         # one figure, reusable
"""

from rtlab.report._data import CaseData, ExperimentData, SeriesData, collect
from rtlab.report._html import DEFAULT_LOADS, Report, write_report

__all__ = [
    "DEFAULT_LOADS",
    "CaseData",
    "ExperimentData",
    "Report",
    "SeriesData",
    "collect",
    "write_report",
]
