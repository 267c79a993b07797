"""Latency statistics: exact over raw samples, estimated from histograms, and comparisons.

Times are int64/float ns throughout. Percentiles are nearest rank: the value at sorted
index ceil(q n) - 1.
"""

from rtlab.analysis._compare import (
    METRICS,
    RATIO_KEYS,
    RankTest,
    Threshold,
    parse_fail_if,
    rank_test,
    ratio_table,
)
from rtlab.analysis._document import (
    document_case_stats,
    per_thread_stats,
    resolve_raw_file,
)
from rtlab.analysis._hist import NBUCKETS, OVERFLOW_AT, Histogram, bucket_bounds, bucket_index
from rtlab.analysis._raw import stats_from_samples
from rtlab.analysis._stats import QUANTILES, CaseStats, nearest_rank, stats_from_histogram

__all__ = [
    "METRICS",
    "NBUCKETS",
    "OVERFLOW_AT",
    "QUANTILES",
    "RATIO_KEYS",
    "CaseStats",
    "Histogram",
    "RankTest",
    "Threshold",
    "bucket_bounds",
    "bucket_index",
    "document_case_stats",
    "nearest_rank",
    "parse_fail_if",
    "per_thread_stats",
    "rank_test",
    "ratio_table",
    "resolve_raw_file",
    "stats_from_histogram",
    "stats_from_samples",
]
