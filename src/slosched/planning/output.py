"""A sweep's results as JSON, CSV and one self-contained HTML page (table + capacity chart)."""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slosched.planning.sizing import SizingRow
from slosched.planning.sweep import SweepRow, best_by_cell, capacity_by_policy


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
    """Capacity at 90% per policy, one bar group per (workload, mix), with the seeds' spread as error bars;
    a base64 PNG so the page is one file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = list(dict.fromkeys((row.workload, row.mix) for row in rows))
    policies = list(dict.fromkeys(row.policy for row in rows))
    figure, axis = plt.subplots(figsize=(max(6.0, 1.2 * len(cells) * max(1, len(policies)) / 3), 4.0))
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
        axis.bar(xs, ys, width, yerr=[low, high], capsize=2, label=policy)
    axis.set_xticks(range(len(cells)), [f"{w}\n{m}" for w, m in cells])
    axis.set_ylabel("SLO capacity at 90% (jobs/s)")
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def write_html(path: Path, rows: Sequence[SweepRow], sizing: Sequence[SizingRow], title: str) -> None:
    best = {(r.workload, r.mix, r.policy) for r in best_by_cell(rows).values()}
    lines = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:nth-child(-n+3){text-align:left}"
        ".best{font-weight:bold;background:#eef7ee}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        "<p>SLO capacity: the highest arrival rate at which at least 90% (95%) of jobs meet their SLO; median"
        " over seeds [min-max]. Bold: the best policy of its workload and mix.</p>",
        f"<img alt='capacity chart' src='data:image/png;base64,{_chart(rows)}'>" if rows else "",
        "<table><tr><th>workload</th><th>mix</th><th>policy</th><th>90%</th><th>95%</th></tr>",
    ]
    for row in rows:
        cells = "".join(f"<td>{html.escape(spread.text())}</td>" for spread in row.capacity.values())
        marker = " class='best'" if (row.workload, row.mix, row.policy) in best else ""
        names = "".join(f"<td>{html.escape(text)}</td>" for text in (row.workload, row.mix, row.policy))
        lines.append(f"<tr{marker}>{names}{cells}</tr>")
    lines.append("</table>")
    if sizing:
        lines.append(
            "<h2>Sizing</h2><table><tr><th>policy</th><th>group</th><th>gpu</th><th>instances</th><th>$/hour</th></tr>"
        )
        for item in sizing:
            count = "-" if item.min_count is None else str(item.min_count)
            cost = "-" if item.cost_per_hour is None else f"{item.cost_per_hour:.2f}"
            names = "".join(f"<td>{html.escape(text)}</td>" for text in (item.policy, item.group, item.gpu))
            lines.append(f"<tr>{names}<td>{count}</td><td>{cost}</td></tr>")
        lines.append("</table>")
    lines.append("</body></html>")
    path.write_text("\n".join(lines))


def write_outputs(out: Path, document: dict[str, Any], rows: Sequence[SweepRow], sizing: Sequence[SizingRow]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_text(json.dumps(document, indent=2))
    write_csv(out / "sweep.csv", rows, sizing)
    write_html(out / "sweep.html", rows, sizing, str(document.get("title", "slosched sweep")))
