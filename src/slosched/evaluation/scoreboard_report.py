"""Tables and plots of a scoreboard, shared by every benchmark's report (markdown + PNG), and the serving
table a bench prints on stderr."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from slosched.evaluation.capacity import Spread
from slosched.evaluation.formatting import fixed
from slosched.evaluation.scoreboard import TARGETS, Scoreboard

# (header, vLLM key, decimals): the compact serving view; the JSON carries every key.
SERVING_COLUMNS = (
    ("req/s", "request_throughput", 3),
    ("goodput req/s", "request_goodput", 3),
    ("out tok/s", "output_throughput", 1),
    ("p99 TTFT ms", "p99_ttft_ms", 1),
    ("p99 TPOT ms", "p99_tpot_ms", 2),
    ("p99 ITL ms", "p99_itl_ms", 2),
)


def role_of(board: Scoreboard, label: str) -> str:
    if label == board.strongest:
        return "**strongest baseline**"
    if label in board.screened_out:
        return f"baseline, screened out on seed {board.seeds[0]}"
    if label in board.baselines:
        return "baseline"
    candidate = board.others[label].candidate
    return "oracle (reads true lengths)" if candidate.oracle else "evaluated"


def capacity_table(board: Scoreboard) -> list[str]:
    """Markdown: every candidate's SLO capacity (median [min-max] over seeds) and its ratio to the
    strongest baseline, highest first."""
    lines = [
        f"SLO capacity (jobs/s) on {board.workbench}: {board.num_jobs} measured jobs per run, seeds "
        f"{', '.join(str(seed) for seed in board.seeds)}; median [min-max] over seeds (a baseline screened out "
        "was searched on the first seed only: it was too far below the best there to be the strongest).",
        "",
        "| policy | role | capacity @90% | capacity @95% | vs strongest |",
        "|---|---|---:|---:|---:|",
    ]
    every = {**board.baselines, **board.others}
    for label in sorted(every, key=lambda name: -every[name].median_90):
        result = every[label]
        cells = [result.capacity[target].text() for target in TARGETS]
        lines.append(f"| `{label}` | {role_of(board, label)} | {cells[0]} | {cells[1]} | {board.ratio(label):.2f}x |")
    return lines


def overload_table(board: Scoreboard) -> list[str]:
    """Markdown: attainment and goodput at multiples of the strongest baseline's capacity."""
    if not board.overload:
        return ["(no overload figures: the strongest baseline's capacity is 0)"]
    loads = sorted(next(iter(board.overload.values())))
    base = board.capacity_of(board.strongest)
    header = " | ".join(f"{load}x ({load * base:.3g}/s)" for load in loads)
    lines = [
        "Attainment / goodput (SLO-meeting jobs per second of the arrival window) at multiples of the strongest "
        "baseline's median capacity; medians over seeds.",
        "",
        f"| policy | {header} |",
        "|---|" + "---:|" * len(loads),
    ]
    for label, per_load in board.overload.items():
        cells = [f"{per_load[load][0].median:.3f} / {per_load[load][1].median:.3g}" for load in loads]
        lines.append(f"| `{label}` | {' | '.join(cells)} |")
    if board.overload_baselines:
        cells = []
        for load in loads:
            label, goodput = board.strongest_at(load)
            cells.append(f"`{label}`: {goodput:.3g}")
        lines.append(f"| *best baseline at this load* (goodput) | {' | '.join(cells)} |")
    return lines


def plot_capacities(boards: Sequence[Scoreboard], path: Path, title: str) -> None:
    """One panel per workbench: horizontal bars of median 90% capacity with min-max whiskers; the
    strongest baseline and the evaluated policies stand out from the other baselines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = max(3.0, 0.32 * max(len(b.baselines) + len(b.others) for b in boards) + 1.2)
    fig, axes = plt.subplots(1, len(boards), figsize=(6.5 * len(boards), height), squeeze=False)
    for axis, board in zip(axes[0], boards, strict=True):
        every = {**board.baselines, **board.others}
        labels = sorted(every, key=lambda name: every[name].median_90)
        spreads = [every[label].capacity[TARGETS[0]] for label in labels]
        colors = [_color(board, label) for label in labels]
        medians = [_finite(spread.median) for spread in spreads]
        errors = [
            [m - _finite(s.low) for m, s in zip(medians, spreads, strict=True)],
            [_finite(s.high) - m for m, s in zip(medians, spreads, strict=True)],
        ]
        axis.barh(range(len(labels)), medians, xerr=errors, color=colors, capsize=2)
        axis.set_yticks(range(len(labels)), labels, fontsize=7)
        axis.set_xlabel("SLO capacity @90% (jobs/s)")
        axis.set_title(board.workbench, fontsize=9)
        axis.grid(axis="x", alpha=0.3)
    fig.suptitle(f"{title}: blue = evaluated, orange = strongest baseline, grey = other baselines", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_overload(boards: Sequence[Scoreboard], path: Path, title: str) -> None:
    """Goodput against load (x the strongest baseline's capacity), median with a min-max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(boards), figsize=(5.5 * len(boards), 4.0), squeeze=False)
    for axis, board in zip(axes[0], boards, strict=True):
        for label, per_load in board.overload.items():
            loads = sorted(per_load)
            goodput: list[Spread] = [per_load[load][1] for load in loads]
            style = "-" if label == board.strongest else "--"
            axis.plot(loads, [g.median for g in goodput], style, marker="o", label=label)
            axis.fill_between(loads, [g.low for g in goodput], [g.high for g in goodput], alpha=0.15)
        axis.set_xlabel("load (x strongest baseline's SLO capacity)")
        axis.set_ylabel("goodput (SLO-meeting jobs/s)")
        axis.set_title(board.workbench, fontsize=9)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _color(board: Scoreboard, label: str) -> str:
    if label == board.strongest:
        return "tab:orange"
    return "tab:grey" if label in board.baselines else "tab:blue"


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0


def serving_table(board: Scoreboard) -> Table:
    """The overload runs of ``board`` in vLLM's serving terms: per policy and load, attainment and the
    serving figures (medians over seeds)."""
    base = board.capacity_of(board.strongest) if board.strongest else math.nan
    table = Table(title=f"{board.workbench}: serving figures at loads x the strongest baseline's capacity (medians)")
    for header in ("policy", "load", "attainment", *(column[0] for column in SERVING_COLUMNS)):
        table.add_column(header, justify="left" if header == "policy" else "right")
    for label, per_load in board.overload.items():
        for load, (attainment, _) in sorted(per_load.items()):
            serving = board.serving_at(label, load)
            cells = [fixed(serving.get(key, math.nan), digits) for _, key, digits in SERVING_COLUMNS]
            table.add_row(escape(label), f"{load:g}x ({fixed(load * base, 3)}/s)", fixed(attainment.median, 3), *cells)
    return table


def print_serving(boards: Sequence[Scoreboard]) -> None:
    """``serving_table`` of each scoreboard that has overload runs, on stderr (stdout carries the JSON)."""
    console = Console(stderr=True, width=160)
    for board in boards:
        if board.overload:
            console.print(serving_table(board))
