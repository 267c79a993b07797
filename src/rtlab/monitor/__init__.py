"""Long-term latency monitoring (`rtlab monitor`): a light wake-up measurement, window
after window for hours to months, kept per window in the results store (docs/monitor.md)."""

from rtlab.monitor._loop import GAP_MIN_S, MonitorLoop, MonitorResult, Sink
from rtlab.monitor._record import (
    MONITOR_FILE,
    MONITOR_SCHEMA,
    ROWS_FILE,
    MonitorManifest,
    MonitorRecord,
    MonitorSettings,
    append_row,
    create_monitor,
    find_monitor,
    is_monitor,
    monitor_lock,
    open_monitor,
    parse_utc,
    read_rows,
    utc_text,
)
from rtlab.monitor._summary import MonitorView, over_time
from rtlab.monitor._window import LE_NS, interval_row, window_call

__all__ = [
    "GAP_MIN_S",
    "LE_NS",
    "MONITOR_FILE",
    "MONITOR_SCHEMA",
    "ROWS_FILE",
    "MonitorLoop",
    "MonitorManifest",
    "MonitorRecord",
    "MonitorResult",
    "MonitorSettings",
    "MonitorView",
    "Sink",
    "append_row",
    "create_monitor",
    "find_monitor",
    "interval_row",
    "is_monitor",
    "monitor_lock",
    "open_monitor",
    "over_time",
    "parse_utc",
    "read_rows",
    "utc_text",
    "window_call",
]
