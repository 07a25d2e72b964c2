"""A sweep's results as JSON, CSV and one self-contained HTML page (table + capacity chart).

The page comes from an autoescaped template (``templates/sweep.html.j2``): workload, mix and policy names
are user input and cannot inject markup.
"""

from __future__ import annotations

import base64
import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from slosched.metrics.styles import policy_styles
from slosched.metrics.templating import render
from slosched.planning.sizing import SizingRow
from slosched.planning.sweep import SweepRow, best_by_cell, capacity_by_policy

TEMPLATES = Path(__file__).parent / "templates"


def sweep_json(rows: Sequence[SweepRow], sizing: Sequence[SizingRow], meta: dict[str, Any]) -> dict[str, Any]:
    best = best_by_cell(rows)
    return {
        "capacity_rps": capacity_by_policy(rows),
        "best": {f"{workload}/{mix}": row.policy for (workload, mix), row in best.items()},
        "rows": [row.as_json() for row in rows],
        "sizing": [row.as_json() for row in sizing],
        **meta,
    }


def write_csv(path: Path, rows: Sequence[SweepRow], sizing: Sequence[SizingRow]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        header = ["workload", "mix", "policy", "gpus", "target", "capacity_median", "capacity_min", "capacity_max"]
        writer.writerow(header)
        for row in rows:
            gpus = " ".join(f"{gpu}x{n}" for gpu, n in sorted(row.as_json()["gpus"].items()))
            for target, spread in row.capacity.items():
                figures = [target, spread.median, spread.low, spread.high]
                writer.writerow([row.workload, row.mix, row.policy, gpus, *figures])
    if sizing:
        with path.with_name(path.stem + "-sizing.csv").open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["policy", "group", "gpu", "min_instances", "cost_per_hour"])
            for item in sizing:
                writer.writerow([item.policy, item.group, item.gpu, item.min_count, item.cost_per_hour])


def _chart(rows: Sequence[SweepRow]) -> str:
    """Capacity at the lowest target per policy, one bar group per (workload, mix), with the seeds' spread
    as error bars, in the reports' policy styles; a base64 PNG so the page is one file."""
    cells = list(dict.fromkeys((row.workload, row.mix) for row in rows))
    policies = list(dict.fromkeys(row.policy for row in rows))
    styles = policy_styles(policies)
    figure = Figure(figsize=(max(6.0, 1.2 * len(cells) * max(1, len(policies)) / 3), 4.0), layout="constrained")
    FigureCanvasAgg(figure)
    axis = figure.add_subplot()
    width = 0.8 / max(1, len(policies))
    for k, policy in enumerate(policies):
        xs, ys, low, high = [], [], [], []
        for i, cell in enumerate(cells):
            row = next((r for r in rows if (r.workload, r.mix) == cell and r.policy == policy), None)
            if row is None:
                continue
            spread = row.capacity[min(row.capacity)]
            xs.append(i + (k - (len(policies) - 1) / 2) * width)
            ys.append(spread.median)
            low.append(spread.median - spread.low)
            high.append(spread.high - spread.median)
        style = styles[policy]
        axis.bar(xs, ys, width, yerr=[low, high], capsize=2, label=policy, color=style.colour, hatch=style.mpl_hatch)
    axis.set_xticks(range(len(cells)), [f"{w}\n{m}" for w, m in cells])
    axis.set_ylabel(f"SLO capacity at {min(rows[0].capacity):.0%} (jobs/s)")
    # Outside the axes, so that the legend never covers a bar and is never cut.
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return base64.b64encode(buffer.getvalue()).decode()


def write_html(path: Path, rows: Sequence[SweepRow], sizing: Sequence[SizingRow], title: str) -> None:
    best = {(r.workload, r.mix, r.policy) for r in best_by_cell(rows).values()}
    targets = sorted({target for row in rows for target in row.capacity}) or [0.9, 0.95]
    table = [
        {
            "best": (row.workload, row.mix, row.policy) in best,
            "cells": [
                row.workload,
                row.mix,
                row.policy,
                *(row.capacity[t].text() for t in targets if t in row.capacity),
            ],
        }
        for row in rows
    ]
    sized = [
        [
            item.policy,
            item.group,
            item.gpu,
            "-" if item.min_count is None else str(item.min_count),
            "-" if item.cost_per_hour is None else f"{item.cost_per_hour:.2f}",
        ]
        for item in sizing
    ]
    page = render(
        TEMPLATES,
        "sweep.html.j2",
        title=title,
        targets=[f"{t:.0%}" for t in targets],
        chart=_chart(rows) if rows else "",
        rows=table,
        sizing=sized,
    )
    path.write_text(page, encoding="utf-8")


def write_outputs(out: Path, document: dict[str, Any], rows: Sequence[SweepRow], sizing: Sequence[SizingRow]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_text(json.dumps(document, indent=2))
    write_csv(out / "sweep.csv", rows, sizing)
    write_html(out / "sweep.html", rows, sizing, str(document.get("title", "slosched sweep")))
