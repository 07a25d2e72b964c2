"""Side-by-side comparison of policies as a rich table (terminal) with the best value per column marked.

The column list is shared with the markdown report so that both show the same figures the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

from slosched.metrics.summary import PolicySummary


@dataclass(frozen=True, slots=True)
class Column:
    """One metric column. ``higher_is_better`` None means the column is not ranked (e.g. job count)."""

    header: str
    value: Callable[[PolicySummary], float]
    fmt: str
    higher_is_better: bool | None
    percent: bool = False

    def format(self, summary: PolicySummary) -> str:
        return format_value(self.value(summary), self.fmt, percent=self.percent)


COLUMNS: tuple[Column, ...] = (
    Column("jobs", lambda s: s.jobs, "d", None),
    Column("rejected", lambda s: s.rejected, "d", False),
    Column("SLO att.", lambda s: s.slo_attainment, ".1f", True, percent=True),
    Column("goodput/s", lambda s: s.goodput_jobs_per_s, ".3g", True),
    Column("jobs/s", lambda s: s.throughput_jobs_per_s, ".3g", True),
    Column("mean lat s", lambda s: s.job_latency.mean_s, ".3g", False),
    Column("p50 lat s", lambda s: s.job_latency.p50_s, ".3g", False),
    Column("p90 lat s", lambda s: s.job_latency.p90_s, ".3g", False),
    Column("p99 lat s", lambda s: s.job_latency.p99_s, ".3g", False),
    Column("p90 TTFT s", lambda s: s.ttft.p90_s, ".3g", False),
    Column("p90 TPOT ms", lambda s: s.tpot.p90_s * 1e3, ".3g", False),
    Column("scale@95", lambda s: s.min_slo_scale_95, ".3g", False),
    Column("scale@99", lambda s: s.min_slo_scale_99, ".3g", False),
    Column("prefix hit", lambda s: s.prefix_hit_rate, ".1f", True, percent=True),
    Column("preempt", lambda s: s.num_preemptions, "d", False),
)


# The terminal shows the figures that decide a comparison; the report shows every column.
TERMINAL_HEADERS = (
    "rejected",
    "SLO att.",
    "goodput/s",
    "mean lat s",
    "p90 lat s",
    "p99 lat s",
    "p90 TTFT s",
    "scale@95",
)
TERMINAL_COLUMNS: tuple[Column, ...] = tuple(c for c in COLUMNS if c.header in TERMINAL_HEADERS)


def format_value(value: float, fmt: str, *, percent: bool = False) -> str:
    """Format for display: ``-`` for NaN (undefined), ``inf`` for infinities, ``%`` suffix for shares."""
    if isinstance(value, float) and math.isnan(value):
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if percent:
        return f"{value * 100:{fmt}}%"
    return f"{value:{fmt}}"


def best_rows(values: Sequence[float], higher_is_better: bool | None) -> set[int]:
    """Indices holding the best finite value (all ties); empty when unranked, with fewer than two finite
    values or when every finite value is the same, since marking every candidate tells the reader nothing.
    """
    if higher_is_better is None:
        return set()
    finite = [(i, v) for i, v in enumerate(values) if math.isfinite(v)]
    if len(finite) < 2:
        return set()
    pick = max if higher_is_better else min
    best = pick(v for _, v in finite)
    marked = {i for i, v in finite if v == best}
    return marked if len(marked) < len(finite) else set()


def render_table(
    summaries: Mapping[str, PolicySummary],
    title: str | None = None,
    columns: Sequence[Column] = TERMINAL_COLUMNS,
) -> Table:
    """A rich table with one row per policy (mapping order) and the best value per column in bold green."""
    table = Table(title=title, header_style="bold")
    table.add_column("policy", style="cyan", no_wrap=True)
    for column in columns:
        table.add_column(column.header, justify="right")
    names = list(summaries)
    marked = [best_rows([c.value(summaries[n]) for n in names], c.higher_is_better) for c in columns]
    for row, name in enumerate(names):
        cells = [
            Text(column.format(summaries[name]), style="bold green" if row in marked[index] else "")
            for index, column in enumerate(columns)
        ]
        table.add_row(name, *cells)
    return table


def print_table(
    summaries: Mapping[str, PolicySummary], title: str | None = None, console: Console | None = None
) -> None:
    """Print ``render_table(summaries)`` to ``console`` (a fresh stdout console when None)."""
    (console or Console()).print(render_table(summaries, title=title))


def _ms(name: str, key: str) -> Callable[[PolicySummary], float]:
    """The value ``key`` (``mean_ms``, ...) of the serving stats ``name`` (``ttft``, ``tpot``, ``itl``)."""
    return lambda summary: float(getattr(getattr(summary.serving, name), key))


# vLLM's serving-benchmark figures (``metrics/serving.py``), a section of their own under the comparison.
SERVING_COLUMNS: tuple[Column, ...] = (
    Column("req/s", lambda s: s.serving.request_throughput, ".3g", True),
    Column("goodput req/s", lambda s: s.serving.request_goodput, ".3g", True),
    Column("out tok/s", lambda s: s.serving.output_throughput, ".4g", True),
    Column("total tok/s", lambda s: s.serving.total_token_throughput, ".4g", True),
    *(
        Column(f"{stat} {name} ms", _ms(name.lower(), f"{key}_ms"), ".3g", False)
        for name in ("TTFT", "TPOT", "ITL")
        for stat, key in (("mean", "mean"), ("median", "median"), ("p99", "p99"))
    ),
)


def render_serving_table(summaries: Mapping[str, PolicySummary], title: str | None = None) -> Table:
    """One row per figure, one column per policy (as ``vllm bench serve`` prints a figure a line): the
    figures are many and policies few, so this stays narrow. Best per row in bold green."""
    table = Table(title=title, header_style="bold")
    table.add_column("figure", style="cyan", no_wrap=True)
    names = list(summaries)
    for name in names:
        table.add_column(name, justify="right")
    for column in SERVING_COLUMNS:
        marked = best_rows([column.value(summaries[n]) for n in names], column.higher_is_better)
        cells = [
            Text(column.format(summaries[n]), style="bold green" if i in marked else "") for i, n in enumerate(names)
        ]
        table.add_row(column.header, *cells)
    return table


def print_serving_table(
    summaries: Mapping[str, PolicySummary], title: str | None = None, console: Console | None = None
) -> None:
    """The serving-benchmark section (vLLM's terms: token throughput, goodput, TTFT/TPOT/ITL in ms)."""
    (console or Console()).print(render_serving_table(summaries, title=title))
