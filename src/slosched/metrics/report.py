"""A self-contained comparison report in one folder: ``report.md`` with PNG figures, ``report.html``
(interactive, works offline), ``summary.json`` and the per-request / per-job export.

The markdown links the figures by relative path, so the folder can be moved or attached as a whole.
Writing is deterministic for a given input (no timestamps), so reports can be diffed between runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from slosched.core.records import InstanceStats, RunResult
from slosched.metrics.export import write_exports
from slosched.metrics.html_report import ByLoad, write_html_report
from slosched.metrics.plots import MAX_CDF_POINTS, plot_attainment_bars, plot_cdfs, plot_slo_scale
from slosched.metrics.slo_scale import attainment_at, default_scales, slowdown_ratios
from slosched.metrics.summary import (
    PolicySummary,
    completed_job_latencies,
    request_columns,
    summarize,
)
from slosched.metrics.table import COLUMNS, format_value

LATENCY_CDF_PNG = "job_latency_cdf.png"
SLO_SCALE_PNG = "slo_scale.png"
TTFT_CDF_PNG = "ttft_cdf.png"
ATTAINMENT_PNG = "slo_attainment.png"
HTML = "report.html"
_TARGETS = (0.95, 0.99)


def write_report(
    out_dir: str | Path,
    results: Mapping[str, RunResult],
    title: str,
    scenario_description: str,
    *,
    by_load: ByLoad | None = None,
) -> Path:
    """Write the report for ``results`` (policy label -> run, in display order) into ``out_dir``
    (created if missing; existing files of the same names are overwritten) and return ``report.md``'s path.
    ``by_load`` (offered jobs/s -> policy -> run), when it holds two loads or more, adds attainment and
    goodput vs load to ``report.html``.
    """
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    summaries = {name: summarize(result) for name, result in results.items()}
    _write_figures(folder, results, summaries)
    payload = {name: summary.to_json_dict() for name, summary in summaries.items()}
    (folder / "summary.json").write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n")
    exports = write_exports(folder, results)
    write_html_report(folder / HTML, results, summaries, title, scenario_description, by_load, exports)
    lines = [f"# {title}", "", scenario_description.strip(), ""]
    lines += _files_section(exports)
    lines += _summary_section(summaries)
    lines += _figures_section()
    lines += _instances_section(results)
    path = folder / "report.md"
    path.write_text("\n".join(lines).rstrip() + "\n")
    return path


def _write_figures(folder: Path, results: Mapping[str, RunResult], summaries: Mapping[str, PolicySummary]) -> None:
    latencies = {name: completed_job_latencies(result.jobs) for name, result in results.items()}
    plot_cdfs(latencies, folder / LATENCY_CDF_PNG, title="Job latency (completed jobs)", xlabel="latency (s)")
    ttfts: dict[str, np.ndarray] = {}
    for name, result in results.items():
        columns = request_columns(result.requests)
        ttfts[name] = columns["ttft"][columns["completed"]]
    plot_cdfs(ttfts, folder / TTFT_CDF_PNG, title="Time to first token (completed requests)", xlabel="TTFT (s)")
    scales = default_scales()
    curves = {name: attainment_at(slowdown_ratios(result.jobs), scales) for name, result in results.items()}
    plot_slo_scale(scales, curves, folder / SLO_SCALE_PNG, targets=_TARGETS)
    plot_attainment_bars({name: (s.deadline_met, s.jobs) for name, s in summaries.items()}, folder / ATTAINMENT_PNG)


def _files_section(exports: Sequence[Path]) -> list[str]:
    names = ", ".join(f"[`{path.name}`]({path.name})" for path in exports)
    return [
        f"Interactive version: [`{HTML}`]({HTML}) (one self-contained file; per-template and per-tenant",
        f"breakdowns, latency CDFs, time series of every instance). One row per request / job per policy: {names}.",
        "",
    ]


def _summary_section(summaries: Mapping[str, PolicySummary]) -> list[str]:
    headers = ["policy", *(column.header for column in COLUMNS)]
    rows = [[name, *(column.format(s) for column in COLUMNS)] for name, s in summaries.items()]
    return [
        "## Summary",
        "",
        *markdown_table(headers, rows),
        "",
        "- *SLO att.*: jobs that completed within their SLO / all jobs; rejected, failed and cancelled jobs",
        "  count as missed. *goodput/s*: SLO-meeting jobs per second of the arrival window (last - first",
        "  arrival); *jobs/s*: completed jobs per second of the makespan (last job finish - first job arrival).",
        "- Deadlines are leak-free: scale x the no-contention latency a client can estimate at submission",
        "  (template statistics of past traffic, input lengths, max_tokens), never the true output lengths.",
        "- *lat* columns: end-to-end job latency over completed jobs (percentiles interpolate linearly).",
        "  *TTFT*/*TPOT*: over completed requests; TPOT leaves out single-token outputs.",
        "- *scale@95/99*: smallest multiple of each job's no-contention latency at which 95% / 99% of all",
        "  jobs finish within it (`inf`: not reachable because too many jobs did not complete).",
        "- `-` marks a value that is undefined for this run (e.g. no completed jobs).",
        "",
    ]


def _figures_section() -> list[str]:
    figures = [
        (
            LATENCY_CDF_PNG,
            "Job latency CDF",
            "Empirical CDF of end-to-end latency over completed jobs only (so each curve ends at 1 even",
            "when jobs were rejected); log x axis when values span more than a decade; curves with more than",
            f"{MAX_CDF_POINTS} jobs are drawn through {MAX_CDF_POINTS} order statistics, denser in the top 1%.",
        ),
        (
            SLO_SCALE_PNG,
            "SLO-scale attainment",
            "For each job, ratio = latency / no-contention latency (infinite if it did not complete); the",
            "curve is the share of all jobs with ratio <= scale, for scales log-spaced from 1 to 100. Dashed",
            "lines mark 95% and 99%; where a curve crosses them is scale@95 / scale@99 in the table.",
        ),
        (
            TTFT_CDF_PNG,
            "TTFT CDF",
            "Empirical CDF of time to first token (first token - request arrival) over completed requests,",
            "drawn like the job latency CDF.",
            "",
        ),
        (
            ATTAINMENT_PNG,
            "SLO misses",
            "Share of all jobs that missed their SLO (1 - attainment) on a log axis, one bar per policy,",
            "labelled with the attainment; each decade down is one more nine. A policy without misses is",
            "drawn at half a job's share; n/a: no jobs.",
        ),
    ]
    lines = ["## Figures", ""]
    for file_name, heading, *notes in figures:
        note = " ".join(part for part in notes if part)
        lines += [f"### {heading}", "", f"![{heading}]({file_name})", "", note, ""]
    return lines


def _instances_section(results: Mapping[str, RunResult]) -> list[str]:
    lines = [
        "## Instances",
        "",
        "Busy share: time the instance spent running steps / run length (`end_s`). Prefix hit: cached",
        "prompt tokens / prompt tokens looked up in the prefix cache.",
        "",
    ]
    headers = ["instance", "steps", "busy share", "prefix hit", "preemptions", "peak KV blocks"]
    for name, result in results.items():
        rows = [_instance_row(stats, result.end_s) for stats in result.instances]
        lines += [f"### {name}", ""]
        lines += [*markdown_table(headers, rows), ""] if rows else ["(no instance statistics)", ""]
    return lines


def _instance_row(stats: InstanceStats, end_s: float) -> list[str]:
    busy = stats.busy_s / end_s if end_s > 0 else float("nan")
    hit = stats.prefix_hit_tokens / stats.prefix_query_tokens if stats.prefix_query_tokens else float("nan")
    return [
        stats.name,
        str(stats.num_steps),
        format_value(busy, ".1f", percent=True),
        format_value(hit, ".1f", percent=True),
        str(stats.num_preemptions),
        str(stats.peak_kv_blocks_used),
    ]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """GitHub-flavoured markdown table lines; the first column left-aligned, the others right-aligned.
    Pipes inside cells are escaped so that a policy label cannot break the table.
    """

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    align = ["---", *("---:" for _ in headers[1:])]
    return [line(headers), "|" + "|".join(align) + "|", *(line(row) for row in rows)]
