"""``docs/results/saber.md`` and its figures, written by the full ``slosched bench saber`` run.

Every number in the report comes from the run that writes it. Figures use matplotlib's Agg canvas
(no pyplot state): goodput against load per mix, the speed profile with its three fits, and per-task
CDFs of completion time / SLA at one load per mix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from slosched.bench.saber_runs import INSTANCE, MAX_TOKENS_QUANTILE, NUM_REQUESTS, task_max_tokens
from slosched.metrics.plots import plot_cdfs
from slosched.metrics.summary import json_safe
from slosched.perf.speed_models import SpeedProfile

if TYPE_CHECKING:
    from slosched.bench.saber import BenchConfig, Grid


def _figure() -> Figure:
    figure = Figure(figsize=(6.4, 4.0), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def plot_goodput(mix: str, summary: dict[str, Any], path: Path) -> Path:
    figure = _figure()
    axes = figure.add_subplot()
    rows = summary["rows"]
    loads = [row["load"] for row in rows]
    for cap in rows[0]["caps"]:
        axes.plot(loads, [row["caps"][cap] for row in rows], color="0.8", linewidth=0.8)
    axes.plot(loads, [row["best_static"] for row in rows], "s--", label="best static (per load)")
    axes.plot(loads, [row["saber"] for row in rows], "o-", label="SABER (USL)")
    axes.set(xlabel="load (requests/s)", ylabel="goodput", title=f"{mix}: goodput (grey: each static cap)")
    axes.set_ylim(0, 1.02)
    axes.legend()
    figure.savefig(path)
    return path


def plot_profile(profile: SpeedProfile, path: Path) -> Path:
    figure = _figure()
    axes = figure.add_subplot()
    levels = np.linspace(1, max(profile.meta.get("levels", [100])), 200)
    for kind, fit in profile.fits.items():
        axes.plot(levels, [fit.model.speed(float(x)) for x in levels], label=f"{kind} (R²={fit.r2:.3f})")
    axes.set(xlabel="concurrent requests L", ylabel="tokens/s per request", title="speed profile f(L)")
    axes.legend()
    figure.savefig(path)
    return path


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def _mix_section(mix: str, summary: dict[str, Any], cdf_png: str, goodput_png: str) -> list[str]:
    lines = [f"### {mix}", "", f"![goodput {mix}](saber/{goodput_png}) ![cdf {mix}](saber/{cdf_png})", ""]
    rows = [
        [
            f"{row['load']:g}",
            f"{row['saber']:.3f}",
            f"{row['best_static']:.3f} (cap {row['best_cap']})",
            f"{row['gain_points']:+.1f}",
            f"{row['saber_ratio_mean']:.2f} ± {row['saber_ratio_std']:.2f}",
            f"{row['static_ratio_mean']:.2f} ± {row['static_ratio_std']:.2f}",
            " / ".join(f"{row['ablation'][name]:.2f}" for name in ("saber-linear", "saber-logistic")),
            f"{row['ablation']['saber-predicted']:.3f}",
        ]
        for row in summary["rows"]
    ]
    header = [
        "load",
        "SABER",
        "best static",
        "gain (pts)",
        "SABER ratio",
        "best-static ratio",
        "linear / logistic",
        "SABER (belief demand)",
    ]
    lines += _table(header, rows)
    caps = list(summary["rows"][0]["caps"])
    lines += _table(
        ["load", *(f"cap {cap}" for cap in caps)],
        [[f"{row['load']:g}", *(f"{row['caps'][cap]:.2f}" for cap in caps)] for row in summary["rows"]],
    )
    return lines


def _cdf(grid: Grid, config: BenchConfig, mix: str, summary: dict[str, Any], path: Path) -> Path:
    row = next(row for row in summary["rows"] if row["load"] == config.cdf_load)
    samples: dict[str, np.ndarray] = {}
    for label, policy in (("SABER", "saber"), (f"static-{row['best_cap']}", f"static-{row['best_cap']}")):
        outcomes = grid[(mix, policy, config.cdf_load)]
        tasks = np.concatenate([np.array(outcome.tasks) for outcome in outcomes])
        values = np.concatenate([outcome.ratios for outcome in outcomes])
        for task in sorted(set(tasks.tolist())):
            samples[f"{label} {task.removeprefix('code-')}"] = values[tasks == task]
    title = f"{mix} at {config.cdf_load:g} req/s: completion time / SLA per task"
    return plot_cdfs(samples, path, title=title, xlabel="completion time / SLA")


def write_report(
    root: Path,
    config: BenchConfig,
    profile: SpeedProfile,
    grid: Grid,
    mixes: dict[str, dict[str, Any]],
    slas: dict[str, dict[str, float]],
    figures: dict[str, Any],
    sensitivity: list[dict[str, Any]],
) -> Path:
    folder = root / "saber"
    folder.mkdir(parents=True, exist_ok=True)
    profile.save(folder / "profile.json")
    plot_profile(profile, folder / "profile.png")
    lines = [
        "# SABER: SLA-aware admission vs static max concurrency",
        "",
        "Written by `slosched bench saber` (full run); every number below comes from that run.",
        f"Setup: one {INSTANCE.gpu} serving {INSTANCE.model} (simulated, roofline truth, 5% noise), chunked",
        f"prefill, max_running {INSTANCE.max_running}; {NUM_REQUESTS} Poisson requests per run, seeds",
        f"{list(config.seeds)}, loads {[f'{load:g}' for load in config.loads]} req/s, static caps",
        f"{list(config.caps)}. SLA rule: **{config.sla_mode}**; per-task max_tokens (the"
        f" {MAX_TOKENS_QUANTILE:g} quantile of each task's output length): {task_max_tokens()}.",
        "",
        "SLAs used (s): " + "; ".join(f"{mix}: {sla}" for mix, sla in slas.items()),
        "",
        "## Headline figures",
        "",
        "```json",
        json.dumps(json_safe(figures), indent=1, allow_nan=False),
        "```",
        "",
        "How to read it: SABER admits a request only while the profiled per-request speed f(L+1) covers the",
        "required speed (remaining max_tokens / time to deadline) of the candidate and of every running request",
        "that can still make it. It therefore budgets for max_tokens, not for the (unknown) true output; the",
        "looser the clients' max_tokens, the fewer requests it runs at once. A static cap is picked after the",
        "fact per (mix, load), an oracle choice. The last table varies the clients' max_tokens quantile.",
        "",
        "## Speed profile",
        "",
        f"{profile.num_samples} (concurrency, tokens/s) samples from closed loops on the W3 mix.",
        "",
        "![profile](saber/profile.png)",
        "",
    ]
    lines += _table(
        ["fit", "R²", "RMSE (tok/s)", "coefficients"],
        [[kind, f"{fit.r2:.4f}", f"{fit.rmse:.2f}", str(fit.model)] for kind, fit in profile.fits.items()],
    )
    lines += ["## Goodput, ratio (mean ± std of completion time / SLA) and ablation per mix", ""]
    for mix, summary in mixes.items():
        goodput_png = plot_goodput(mix, summary, folder / f"goodput_{mix}.png").name
        cdf_png = _cdf(grid, config, mix, summary, folder / f"cdf_{mix}.png").name
        lines += _mix_section(mix, summary, cdf_png, goodput_png)
    lines += [
        "## Sensitivity to the clients' max_tokens (paper SLAs)",
        "",
        "SABER's required speed budgets for max_tokens; the closer it is to true outputs, the less it holds back.",
        "",
    ]
    lines += _table(
        ["max_tokens quantile", "mix", "load", "SABER", "best static", "gain (pts)"],
        [
            [
                f"{row['quantile']:g}",
                row["mix"],
                f"{row['load']:g}",
                f"{row['saber']:.3f}",
                f"{row['best_static']:.3f}",
                f"{100 * (row['saber'] - row['best_static']):+.1f}",
            ]
            for row in sensitivity
        ],
    )
    path = root / "saber.md"
    path.write_text("\n".join(lines) + "\n")
    return path
