"""``report.html``: the comparison as one self-contained, interactive page (works offline).

Sections: summary table and SLO misses, SLO-scale curves, attainment and goodput vs load, latency CDFs
(job, TTFT, TPOT), per-template and per-tenant breakdowns, and every instance's queues, KV use and
utilisation over time (``RunResult.series``). A section appears only where it says something: the load
section needs runs at two loads or more, a breakdown two groups or more, the per-instance view two
instances or more (with one instance per run the time series are drawn one line per policy instead).
Deterministic for a given input: fixed element ids, no timestamps. The page itself: ``html_page.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from slosched.core.records import InstanceSeries, RunResult
from slosched.metrics import html_figures as figs
from slosched.metrics.groups import GroupKey, GroupStats, group_names, group_stats
from slosched.metrics.html_page import Figure, Note, Section, Table, figure_block, write_page
from slosched.metrics.slo_scale import attainment_at, default_scales, slowdown_ratios
from slosched.metrics.styles import PolicyStyle, policy_styles
from slosched.metrics.summary import PolicySummary, completed_job_latencies, request_columns, summarize
from slosched.metrics.table import COLUMNS, best_rows, format_value

ByLoad = Mapping[float, Mapping[str, RunResult]]
Styles = Mapping[str, PolicyStyle]
# Fits 1,280 px: headers wrap into two or three short lines, policy names break after "+", numbers
# never wrap; the scroll container is the last resort for very long policy names.
_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; margin: 1.5rem auto;
       max-width: 1400px; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.8rem; font-variant-numeric: tabular-nums; }
th, td { padding: 0.2rem 0.4rem; border-bottom: 1px solid #ddd; text-align: right; }
th { white-space: normal; vertical-align: bottom; max-width: 5.5em; }
td { white-space: nowrap; }
td:first-child { white-space: normal; min-width: 8em; max-width: 15em; }
th:first-child, td:first-child, table.grouped td:nth-child(2), table.grouped th:nth-child(2) { text-align: left; }
table.grouped td:nth-child(2) { white-space: normal; min-width: 8em; max-width: 15em; }
td.best { font-weight: 600; color: #0a7a3a; }
.note { color: #555; font-size: 0.9rem; max-width: 60rem; }
.scroll { overflow-x: auto; max-width: 100%; }
.figure { width: 100%; }
.part { white-space: nowrap; }
"""
# Points per curve in the page: a few hundred order statistics draw a CDF as finely as a screen shows it.
CDF_POINTS = 300
SERIES_POINTS = 300


def write_html_report(
    path: Path,
    results: Mapping[str, RunResult],
    summaries: Mapping[str, PolicySummary],
    title: str,
    description: str,
    by_load: ByLoad | None = None,
    exports: Sequence[Path] = (),
) -> Path:
    styles = policy_styles(list(results))
    counts = {name: (s.deadline_met, s.jobs) for name, s in summaries.items()}
    summary = Section(
        "Summary",
        "summary",
        [
            _summary_table(summaries),
            figure_block(figs.attainment_figure(counts, styles), "attainment"),
            Note(
                "Bars show the share of jobs that missed their SLO on a log axis (each decade is one more nine of"
                " attainment); the label gives the attainment. A policy with no misses is drawn at half a job's share."
            ),
        ],
    )
    scales = default_scales()
    curves = {name: attainment_at(slowdown_ratios(r.jobs), scales) for name, r in results.items()}
    slo = figure_block(figs.slo_scale_figure(scales, curves, styles, (0.95, 0.99)), "slo-scale")
    sections = [summary, Section("SLO scale", "slo-scale", [slo])]
    if by_load and len(by_load) >= 2:
        sections.append(Section("Load", "load", [_load_figure(by_load)]))
    sections.append(Section("Latency distributions", "latency", _cdf_blocks(results, styles)))
    for key in ("template", "tenant"):
        blocks = _group_blocks(results, styles, key)
        if blocks:
            sections.append(Section(f"Per {key}", f"per-{key}", blocks))
    sections += _series_sections(results, styles)
    files = ["report.md", "summary.json", *(p.name for p in exports)]
    return write_page(path, title, description.strip(), files, sections, _CSS)


def _summary_table(summaries: Mapping[str, PolicySummary]) -> Table:
    names = list(summaries)
    rows = [[name, *(c.format(summaries[name]) for c in COLUMNS)] for name in names]
    best = [best_rows([c.value(summaries[n]) for n in names], c.higher_is_better) for c in COLUMNS]
    return Table(["policy", *(c.header for c in COLUMNS)], rows, best)


def _load_figure(by_load: ByLoad) -> Figure:
    loads = sorted(by_load)
    names = list(next(iter(by_load.values())))
    attainment = {n: [summarize(by_load[x][n]).slo_attainment for x in loads] for n in names}
    goodput = {n: [summarize(by_load[x][n]).goodput_jobs_per_s for x in loads] for n in names}
    return figure_block(figs.load_figure(loads, attainment, goodput, policy_styles(names)), "load")


def _cdf_blocks(results: Mapping[str, RunResult], styles: Styles) -> list[Note | Table | Figure]:
    latency = {name: completed_job_latencies(r.jobs) for name, r in results.items()}
    ttft, tpot = {}, {}
    for name, result in results.items():
        columns = request_columns(result.requests)
        done = columns["completed"]
        ttft[name] = columns["ttft"][done]
        tpot[name] = columns["tpot"][done & (columns["output_tokens"] > 1)] * 1e3
    panels = (
        (latency, "Job latency (completed jobs)", "latency (s)", "cdf-latency"),
        (ttft, "Time to first token (completed requests)", "TTFT (s)", "cdf-ttft"),
        (tpot, "Time per output token (completed, >1 token)", "TPOT (ms)", "cdf-tpot"),
    )
    blocks: list[Note | Table | Figure] = [
        figure_block(figs.cdf_figure(samples, styles, title, xlabel, CDF_POINTS), name)
        for samples, title, xlabel, name in panels
    ]
    blocks.append(
        Note(
            f"Each curve is drawn through at most {CDF_POINTS} order statistics, denser in the top 1% (the"
            " tail). Click a legend entry to hide a policy, double-click to show it alone."
        )
    )
    return blocks


def _group_blocks(results: Mapping[str, RunResult], styles: Styles, key: GroupKey) -> list[Note | Table | Figure]:
    """The breakdown by ``key``, or nothing when there are fewer than two groups (it would repeat the summary)."""
    per_policy = {name: group_stats(result, key) for name, result in results.items()}
    names = group_names(per_policy)
    if len(names) < 2:
        return []
    headers = [key, "policy", "jobs", "SLO att.", "p50 lat s", "p99 lat s"]
    rows = []
    for group in names:
        for policy, groups in per_policy.items():
            stats = next((s for s in groups if s.group == group), None)
            if stats is not None:
                rows.append([group, policy, *_group_cells(stats)])
    return [
        Table(headers, rows, css_class="grouped"),
        figure_block(figs.group_figure(per_policy, styles, key), f"by-{key}"),
    ]


def _group_cells(stats: GroupStats) -> list[str]:
    return [
        str(stats.jobs),
        format_value(stats.attainment, ".1f", percent=True),
        format_value(stats.p50_latency_s, ".3g"),
        format_value(stats.p99_latency_s, ".3g"),
    ]


_METRICS = (
    ("waiting", "Requests waiting", "waiting"),
    ("running", "Requests running", "running"),
    ("kv", "KV cache blocks in use", "KV use (%)"),
    ("util", "Utilisation (busy share of each sampling interval)", "busy (%)"),
)


def _series_sections(results: Mapping[str, RunResult], styles: Styles) -> list[Section]:
    """Per instance (one row per policy, one line per instance) when a run has several instances; one
    line per policy when each has one (a legend of one instance says nothing); nothing without series."""
    instances = max((len(result.series) for result in results.values()), default=0)
    if instances == 0:
        return []
    blocks: list[Note | Table | Figure] = []
    for metric, title, ylabel in _METRICS:
        if instances == 1:
            lines = {name: [(name, *_series_values(r.series[0], metric))] for name, r in results.items() if r.series}
            figure = figs.policy_series_figure(lines, f"{title} (one instance per policy)", ylabel, styles)
        else:
            rows = {name: [(s.name, *_series_values(s, metric)) for s in r.series] for name, r in results.items()}
            figure = figs.series_figure(rows, f"{title} per instance", ylabel)
        blocks.append(figure_block(figure, f"series-{metric}"))
    blocks.append(
        Note(
            "Sampled every few seconds of simulated time (the interval doubles on long runs); drawn through at"
            f" most {SERIES_POINTS} points per line that keep each stretch's lowest and highest value."
        )
    )
    heading = "Instances over time" if instances > 1 else "Over time"
    return [Section(heading, "series", blocks)]


def _series_values(series: InstanceSeries, metric: str) -> tuple[np.ndarray, np.ndarray]:
    times = np.asarray(series.times_s, dtype=float)
    if metric == "waiting":
        values = np.asarray(series.num_waiting, dtype=float)
    elif metric == "running":
        values = np.asarray(series.num_running, dtype=float)
    elif metric == "kv":
        values = 100.0 * np.asarray(series.kv_used_blocks, dtype=float) / max(series.num_kv_blocks, 1)
    else:
        busy = np.asarray(series.busy_s, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.clip(100.0 * np.diff(busy) / np.diff(times), 0.0, 100.0)
        times = times[1:]
    return envelope(times, values, SERIES_POINTS)


def envelope(times: np.ndarray, values: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` samples as float32: each of ``max_points // 2`` equal stretches keeps its
    lowest and highest value, so a thinned line keeps every peak (a queue spike is what the reader looks for)."""
    if times.size > max_points:
        edges = np.linspace(0, times.size, max_points // 2 + 1).astype(np.int64)
        keep = []
        for low, high in itertools.pairwise(edges):
            chunk = np.nan_to_num(values[low:high], nan=0.0)
            keep += [low + int(np.argmin(chunk)), low + int(np.argmax(chunk))]
        index = np.unique(np.asarray(keep, dtype=np.int64))
        times, values = times[index], values[index]
    return times.astype(np.float32), values.astype(np.float32)
