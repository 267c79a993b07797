"""Latency statistics: exact over raw samples, estimated from histograms, and comparisons;
the causes of late samples ranked over the spikes the probe explained.

Times are int64/float ns throughout. Percentiles are nearest rank: the value at sorted
index ceil(q n) - 1.
"""

from rtlab.analysis._below import Share, parse_below, share_below, share_text
from rtlab.analysis._compare import (
    RankTest,
    Threshold,
    parse_fail_if,
    rank_test,
    ratio_table,
)
from rtlab.analysis._comparison import (
    ALPHA,
    Comparison,
    ComparisonRow,
    Side,
    compare_sides,
    match_cases,
)
from rtlab.analysis._conditions import (
    SYMPTOMS,
    Conditions,
    conditions_summary,
    irq_label,
    judge_conditions,
    symptom_of,
)
from rtlab.analysis._document import (
    document_case_stats,
    per_thread_stats,
    resolve_raw_file,
)
from rtlab.analysis._hist import NBUCKETS, OVERFLOW_AT, Histogram, bucket_bounds, bucket_index
from rtlab.analysis._meters import VIEWS, Column, MeterView, meter_rows
from rtlab.analysis._metrics import (
    EXPORT_METRICS,
    METRICS,
    RATIO_KEYS,
    TABLE_COUNTS,
    TABLE_METRICS,
    WIN_METRICS,
    Metric,
    metric,
    metrics,
)
from rtlab.analysis._pivot import Pivot, PivotCase, PivotSpec, parse_pivot, pivot
from rtlab.analysis._production import HEADERS as PRODUCTION_HEADERS
from rtlab.analysis._production import production, production_row
from rtlab.analysis._pwcet import (
    Estimate,
    Exceedance,
    TailFit,
    fit_tail,
    pwcet,
    refused_fit,
)
from rtlab.analysis._pwcet_gates import Gate
from rtlab.analysis._pwcet_terms import (
    DEFAULT_RATE_HZ,
    advice_text,
    once_per,
    p_text,
    parse_probability,
    parse_rate,
    period_text,
    rate_text,
)
from rtlab.analysis._raw import stats_from_samples
from rtlab.analysis._spikes import (
    CAUSE_KINDS,
    UNEXPLAINED,
    CauseStack,
    CauseTotal,
    cause_stack,
    describe,
    explanation,
    policy_text,
    rank_causes,
    related_checks,
    related_findings,
    segments,
    stopped_text,
    unexplained_parts,
)
from rtlab.analysis._stats import QUANTILES, CaseStats, nearest_rank, stats_from_histogram

__all__ = [
    "ALPHA",
    "CAUSE_KINDS",
    "DEFAULT_RATE_HZ",
    "EXPORT_METRICS",
    "METRICS",
    "NBUCKETS",
    "OVERFLOW_AT",
    "PRODUCTION_HEADERS",
    "QUANTILES",
    "RATIO_KEYS",
    "SYMPTOMS",
    "TABLE_COUNTS",
    "TABLE_METRICS",
    "UNEXPLAINED",
    "VIEWS",
    "WIN_METRICS",
    "CaseStats",
    "CauseStack",
    "CauseTotal",
    "Column",
    "Comparison",
    "ComparisonRow",
    "Conditions",
    "Estimate",
    "Exceedance",
    "Gate",
    "Histogram",
    "MeterView",
    "Metric",
    "Pivot",
    "PivotCase",
    "PivotSpec",
    "RankTest",
    "Share",
    "Side",
    "TailFit",
    "Threshold",
    "advice_text",
    "bucket_bounds",
    "bucket_index",
    "cause_stack",
    "compare_sides",
    "conditions_summary",
    "describe",
    "document_case_stats",
    "explanation",
    "fit_tail",
    "irq_label",
    "judge_conditions",
    "match_cases",
    "meter_rows",
    "metric",
    "metrics",
    "nearest_rank",
    "once_per",
    "p_text",
    "parse_below",
    "parse_fail_if",
    "parse_pivot",
    "parse_probability",
    "parse_rate",
    "per_thread_stats",
    "period_text",
    "pivot",
    "policy_text",
    "production",
    "production_row",
    "pwcet",
    "rank_causes",
    "rank_test",
    "rate_text",
    "ratio_table",
    "refused_fit",
    "related_checks",
    "related_findings",
    "resolve_raw_file",
    "segments",
    "share_below",
    "share_text",
    "stats_from_histogram",
    "stats_from_samples",
    "stopped_text",
    "symptom_of",
    "unexplained_parts",
]
