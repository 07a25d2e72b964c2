"""Metrics of a run: summaries, SLO-scale curves, comparison tables and reports."""

from slosched.metrics.slo_scale import (
    attainment_at,
    default_scales,
    min_scale_for,
    min_scale_from_ratios,
    slo_scale_curve,
    slowdown_ratios,
)
from slosched.metrics.summary import LatencyStats, PolicySummary, json_safe, summarize

__all__ = [
    "LatencyStats",
    "PolicySummary",
    "attainment_at",
    "default_scales",
    "json_safe",
    "min_scale_for",
    "min_scale_from_ratios",
    "slo_scale_curve",
    "slowdown_ratios",
    "summarize",
]
