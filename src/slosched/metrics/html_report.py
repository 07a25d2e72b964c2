"""``report.html``: the comparison as one self-contained, interactive page (plotly.js inlined, works offline).

Sections: summary table, SLO misses, SLO-scale curves, attainment and goodput vs load (when the caller
passes runs at several loads), latency CDFs (job, TTFT, TPOT), per-template and per-tenant breakdowns, and
time series of every instance's queues, KV use and utilisation (``RunResult.series``). Deterministic for a
given input: fixed element ids, no timestamps.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from slosched.core.records import InstanceSeries, RunResult
from slosched.metrics import html_figures as figs
from slosched.metrics.groups import GroupKey, GroupStats, group_names, group_stats
from slosched.metrics.slo_scale import attainment_at, default_scales, slowdown_ratios
from slosched.metrics.styles import policy_styles
from slosched.metrics.summary import PolicySummary, completed_job_latencies, request_columns, summarize
from slosched.metrics.table import COLUMNS, best_rows, format_value

ByLoad = Mapping[float, Mapping[str, RunResult]]
_CONFIG = {"displaylogo": False, "responsive": True}
_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; margin: 2rem auto; max-width: 1400px;
       padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.85rem; }
th, td { padding: 0.25rem 0.45rem; border-bottom: 1px solid #ddd; text-align: right; white-space: nowrap; }
th:first-child, td:first-child, table.grouped td:nth-child(2), table.grouped th:nth-child(2) { text-align: left; }
td.best { font-weight: 600; color: #0a7a3a; }
.note { color: #555; font-size: 0.9rem; max-width: 60rem; }
.scroll { overflow-x: auto; }
"""


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
    parts = [f"<h1>{_e(title)}</h1>", f"<p>{_e(description.strip())}</p>", _links(exports)]
    parts += ["<h2>Summary</h2>", _summary_table(summaries)]
    counts = {name: (s.deadline_met, s.jobs) for name, s in summaries.items()}
    parts += [_figure(figs.attainment_figure(counts, styles), "attainment")]
    parts += [
        "<p class='note'>Bars show the share of jobs that missed their SLO on a log axis (each decade is"
        " one more nine of attainment); the label gives the attainment. A policy with no misses is drawn"
        " at half a job's share.</p>"
    ]
    scales = default_scales()
    curves = {name: attainment_at(slowdown_ratios(r.jobs), scales) for name, r in results.items()}
    parts += ["<h2>SLO scale</h2>", _figure(figs.slo_scale_figure(scales, curves, styles, (0.95, 0.99)), "slo-scale")]
    parts += ["<h2>Load</h2>", _load_section(by_load, results, styles)]
    parts += ["<h2>Latency distributions</h2>", *_cdf_section(results, styles)]
    for key in ("template", "tenant"):
        parts += [f"<h2>Per {key}</h2>", *_group_section(results, styles, key)]
    parts += ["<h2>Instances over time</h2>", *_series_section(results)]
    body = "\n".join(parts)
    document = (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n"
        f"<script type='text/javascript'>{get_plotlyjs()}</script>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )
    path.write_text(document, encoding="utf-8")
    return path


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _figure(figure: go.Figure, name: str) -> str:
    return str(pio.to_html(figure, full_html=False, include_plotlyjs=False, div_id=f"fig-{name}", config=_CONFIG))


def _links(exports: Sequence[Path]) -> str:
    files = ["report.md", "summary.json", *(p.name for p in exports)]
    return (
        "<p class='note'>Files beside this page: " + ", ".join(f"<a href='{_e(f)}'>{_e(f)}</a>" for f in files) + "</p>"
    )


def html_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], best: Sequence[set[int]] = (), css_class: str = ""
) -> str:
    """An escaped HTML table; ``best[c - 1]`` holds the row indices to highlight in column ``c``."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    lines = []
    for index, row in enumerate(rows):
        cells = []
        for col, cell in enumerate(row):
            marked = 0 < col <= len(best) and index in best[col - 1]
            cells.append(f"<td class='best'>{_e(cell)}</td>" if marked else f"<td>{_e(cell)}</td>")
        lines.append("<tr>" + "".join(cells) + "</tr>")
    table = f"<table class='{css_class}'><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"
    return f"<div class='scroll'>{table}</div>"


def _summary_table(summaries: Mapping[str, PolicySummary]) -> str:
    names = list(summaries)
    rows = [[name, *(c.format(summaries[name]) for c in COLUMNS)] for name in names]
    best = [best_rows([c.value(summaries[n]) for n in names], c.higher_is_better) for c in COLUMNS]
    return html_table(["policy", *(c.header for c in COLUMNS)], rows, best)


def _load_section(by_load: ByLoad | None, results: Mapping[str, RunResult], styles: Mapping[str, object]) -> str:
    if not by_load or len(by_load) < 2:
        rates = [_offered_rate(r) for r in results.values()]
        rate = f"{rates[0]:.3g} jobs/s" if rates and np.isfinite(rates[0]) else "one load"
        return (
            f"<p class='note'>Not shown: every run here is at a single offered load ({_e(rate)}). Attainment"
            " and goodput vs load need runs at several loads (a load sweep).</p>"
        )
    loads = sorted(by_load)
    names = list(next(iter(by_load.values())))
    load_styles = policy_styles(names)
    attainment = {n: [summarize(by_load[x][n]).slo_attainment for x in loads] for n in names}
    goodput = {n: [summarize(by_load[x][n]).goodput_jobs_per_s for x in loads] for n in names}
    return _figure(figs.load_figure(loads, attainment, goodput, load_styles), "load")


def _offered_rate(result: RunResult) -> float:
    arrivals = [j.arrival_s for j in result.jobs]
    window = max(arrivals) - min(arrivals) if len(arrivals) > 1 else 0.0
    return len(arrivals) / window if window > 0 else float("nan")


def _cdf_section(results: Mapping[str, RunResult], styles: Mapping) -> list[str]:
    latency = {name: completed_job_latencies(r.jobs) for name, r in results.items()}
    ttft, tpot = {}, {}
    for name, result in results.items():
        columns = request_columns(result.requests)
        done = columns["completed"]
        ttft[name] = columns["ttft"][done]
        tpot[name] = columns["tpot"][done & (columns["output_tokens"] > 1)] * 1e3
    return [
        _figure(figs.cdf_figure(latency, styles, "Job latency (completed jobs)", "latency (s)"), "cdf-latency"),
        _figure(figs.cdf_figure(ttft, styles, "Time to first token (completed requests)", "TTFT (s)"), "cdf-ttft"),
        _figure(figs.cdf_figure(tpot, styles, "Time per output token (completed, >1 token)", "TPOT (ms)"), "cdf-tpot"),
        "<p class='note'>Curves with many samples are drawn through evenly spaced order statistics. Click a"
        " legend entry to hide a policy, double-click to show it alone.</p>",
    ]


def _group_section(results: Mapping[str, RunResult], styles: Mapping, key: GroupKey) -> list[str]:
    per_policy = {name: group_stats(result, key) for name, result in results.items()}
    if not group_names(per_policy):
        return ["<p class='note'>No jobs.</p>"]
    headers = [key, "policy", "jobs", "SLO att.", "p50 lat s", "p99 lat s"]
    rows = []
    for group in group_names(per_policy):
        for policy, groups in per_policy.items():
            stats = next((s for s in groups if s.group == group), None)
            if stats is not None:
                rows.append([group, policy, *_group_cells(stats)])
    return [
        html_table(headers, rows, css_class="grouped"),
        _figure(figs.group_figure(per_policy, styles, key), f"by-{key}"),
    ]


def _group_cells(stats: GroupStats) -> list[str]:
    return [
        str(stats.jobs),
        format_value(stats.attainment, ".1f", percent=True),
        format_value(stats.p50_latency_s, ".3g"),
        format_value(stats.p99_latency_s, ".3g"),
    ]


def _series_section(results: Mapping[str, RunResult]) -> list[str]:
    if not any(result.series for result in results.values()):
        return ["<p class='note'>No time series recorded (runs from the simulator sample them).</p>"]
    metrics = (
        ("waiting", "Requests waiting per instance", "waiting"),
        ("running", "Requests running per instance", "running"),
        ("kv", "KV cache blocks in use per instance", "KV use (%)"),
        ("util", "Utilisation per instance (busy share of each sampling interval)", "busy (%)"),
    )
    parts = []
    for metric, title, ylabel in metrics:
        rows = {name: [(s.name, *_series_values(s, metric)) for s in r.series] for name, r in results.items()}
        parts.append(_figure(figs.series_figure(rows, title, ylabel), f"series-{metric}"))
    parts.append(
        "<p class='note'>Sampled every few seconds of simulated time (the interval doubles on long runs"
        " to keep at most 1000 points per instance).</p>"
    )
    return parts


def _series_values(series: InstanceSeries, metric: str) -> tuple[np.ndarray, np.ndarray]:
    times = np.asarray(series.times_s, dtype=float)
    if metric == "waiting":
        return times, np.asarray(series.num_waiting, dtype=float)
    if metric == "running":
        return times, np.asarray(series.num_running, dtype=float)
    if metric == "kv":
        return times, 100.0 * np.asarray(series.kv_used_blocks, dtype=float) / max(series.num_kv_blocks, 1)
    busy = np.asarray(series.busy_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.clip(100.0 * np.diff(busy) / np.diff(times), 0.0, 100.0)
    return times[1:], share
