"""Tuning with undo: journalled changes of kernel settings, restored exactly."""

from rtlab.tune._apply import (
    ALREADY,
    CHANGED,
    COMPARE,
    FAILED,
    FOREIGN,
    GONE,
    OURS,
    REFUSED_NOW,
    RESTORED,
    SKIPPED,
    Changer,
    Outcome,
    normalize,
)
from rtlab.tune._crash import CRASH_AT_ENV, CRASH_ENV
from rtlab.tune._journal import STATE_ENV, Entry, Journal, state_dir
from rtlab.tune._partition import Partition
from rtlab.tune._partition import create as create_partition
from rtlab.tune._partition import load as load_partition
from rtlab.tune._partition import undo_changes as undo_partition
from rtlab.tune._plan import Plan, apply_plan, plan, tuning_summary
from rtlab.tune._settings import KNOB_KEYS, is_setting_key, key_error, setting_keys, value_error

__all__ = [
    "ALREADY",
    "CHANGED",
    "COMPARE",
    "CRASH_AT_ENV",
    "CRASH_ENV",
    "FAILED",
    "FOREIGN",
    "GONE",
    "KNOB_KEYS",
    "OURS",
    "REFUSED_NOW",
    "RESTORED",
    "SKIPPED",
    "STATE_ENV",
    "Changer",
    "Entry",
    "Journal",
    "Outcome",
    "Partition",
    "Plan",
    "apply_plan",
    "create_partition",
    "is_setting_key",
    "key_error",
    "load_partition",
    "normalize",
    "plan",
    "setting_keys",
    "state_dir",
    "tuning_summary",
    "undo_partition",
    "value_error",
]
