"""``slosched bench saber``: SABER (SLA-aware admission) against static max-concurrency caps.

Reproduces the evaluation of DESIGN 4.4 in the simulator (setup in :mod:`slosched.bench.saber_runs`):
profile the instance once (closed loops on the W3 mix, ~1,000 samples, USL / linear / logistic fits),
then for the W1/W2/W3 code mixes at 1..10, 15 and 20 requests/s, 100 requests per run and 3 seeds, run
SABER (USL; linear and logistic for the ablation; a belief-demand variant) and every static cap
10..100. "Best static" is the best cap per (mix, load) chosen after the fact. Goodput = share of
requests finishing within their task's SLA; the ratio is completion time / SLA.

SLAs: the paper's (1/8/1/12 s) by default; ``SLOSCHED_SABER_SLA=measured`` uses each task's mean
completion time at 10 requests/s under the default setting (the paper's own rule). The full run writes
``docs/results/saber.md`` and its figures; ``--quick`` (fewer loads, caps, one seed) writes nothing.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slosched.bench.common import print_figures
from slosched.bench.saber_report import write_report
from slosched.bench.saber_runs import (
    INSTANCE,
    MIXES,
    RunOutcome,
    code_jobs,
    measured_sla,
    run_policy,
    task_max_tokens,
)
from slosched.core.errors import ConfigError
from slosched.perf.speed_models import SpeedProfile
from slosched.tuning.saber_profile import profile_instance

SLA_MODES = ("paper", "measured")
RESULTS_DIR = Path("docs/results")
SENSITIVITY_QUANTILES = (0.5, 0.75, 0.9)
SENSITIVITY_LOADS = (5.0, 10.0, 20.0)


@dataclass(slots=True, frozen=True)
class BenchConfig:
    loads: tuple[float, ...]
    seeds: tuple[int, ...]
    caps: tuple[int, ...]
    sla_mode: str
    cdf_load: float


def bench_config(quick: bool) -> BenchConfig:
    sla_mode = os.environ.get("SLOSCHED_SABER_SLA", "paper")
    if sla_mode not in SLA_MODES:
        raise ConfigError("SLOSCHED_SABER_SLA", f"got {sla_mode!r}; allowed: {list(SLA_MODES)}")
    if quick:
        return BenchConfig((2.0, 6.0, 10.0, 20.0), (0,), (10, 30, 60, 100), sla_mode, 10.0)
    loads = (*(float(rate) for rate in range(1, 11)), 15.0, 20.0)
    return BenchConfig(loads, (0, 1, 2), tuple(range(10, 101, 10)), sla_mode, 10.0)


def saber_variants(profile: SpeedProfile) -> dict[str, dict[str, Any]]:
    """Policy label -> (engine params) of the SABER runs; inline coefficients keep runs file-free."""
    usl = asdict(profile.model("usl"))
    return {
        "saber": {"speed": usl},
        "saber-linear": {"speed": asdict(profile.model("linear"))},
        "saber-logistic": {"speed": asdict(profile.model("logistic"))},
        "saber-predicted": {"speed": usl, "demand": "predicted"},
    }


Grid = dict[tuple[str, str, float], list[RunOutcome]]


def run_grid(config: BenchConfig, profile: SpeedProfile) -> tuple[Grid, dict[str, dict[str, float]]]:
    """Every (mix, policy, load) over the seeds; also the SLAs used per mix (task -> seconds)."""
    max_tokens = task_max_tokens()
    policies: dict[str, tuple[str, dict[str, Any]]] = {
        name: ("saber", params) for name, params in saber_variants(profile).items()
    }
    for cap in config.caps:
        policies[f"static-{cap}"] = ("static-concurrency", {"cap": cap})
    grid: Grid = {}
    slas: dict[str, dict[str, float]] = {}
    for mix in MIXES:
        sla = measured_sla(mix, config.seeds, max_tokens) if config.sla_mode == "measured" else None
        for load in config.loads:
            for seed in config.seeds:
                jobs = code_jobs(mix, load, seed, max_tokens, sla)
                for name, (engine, params) in policies.items():
                    grid.setdefault((mix, name, load), []).append(run_policy(jobs, engine, params, seed))
                if mix not in slas:
                    slas[mix] = {job.template: float(job.slo_s or 0.0) for job in jobs}
    return grid, slas


def max_tokens_sensitivity(config: BenchConfig, profile: SpeedProfile) -> list[dict[str, Any]]:
    """SABER vs best static when clients set max_tokens at other quantiles of the output length (the
    required speed budgets for max_tokens, so its slack against true outputs drives admission)."""
    rows: list[dict[str, Any]] = []
    saber_params = saber_variants(profile)["saber"]
    for quantile in SENSITIVITY_QUANTILES:
        max_tokens = task_max_tokens(quantile)
        for mix in ("W1", "W3"):
            for load in SENSITIVITY_LOADS:
                saber_runs: list[float] = []
                static_runs: dict[int, list[float]] = {cap: [] for cap in config.caps}
                for seed in config.seeds:
                    jobs = code_jobs(mix, load, seed, max_tokens)
                    saber_runs.append(run_policy(jobs, "saber", saber_params, seed).goodput)
                    for cap in config.caps:
                        static_runs[cap].append(run_policy(jobs, "static-concurrency", {"cap": cap}, seed).goodput)
                best = max(float(np.mean(values)) for values in static_runs.values())
                rows.append(
                    {
                        "quantile": quantile,
                        "mix": mix,
                        "load": load,
                        "saber": float(np.mean(saber_runs)),
                        "best_static": best,
                    }
                )
    return rows


def goodput(grid: Grid, mix: str, policy: str, load: float) -> float:
    return float(np.mean([outcome.goodput for outcome in grid[(mix, policy, load)]]))


def ratios(grid: Grid, mix: str, policy: str, load: float) -> np.ndarray:
    values = np.concatenate([outcome.ratios for outcome in grid[(mix, policy, load)]])
    return values[np.isfinite(values)]


def best_static(grid: Grid, config: BenchConfig, mix: str, load: float) -> str:
    """The cap with the highest goodput at this (mix, load), ties to the smaller cap."""
    return max((f"static-{cap}" for cap in config.caps), key=lambda name: (goodput(grid, mix, name, load), -len(name)))


def cv(values: np.ndarray) -> float:
    return float(np.std(values) / np.mean(values)) if values.size and np.mean(values) > 0 else float("nan")


def summarize_mix(grid: Grid, config: BenchConfig, mix: str) -> dict[str, Any]:
    """Per-load goodputs, gains, ratio statistics and CVs of one mix."""
    rows = []
    pooled: dict[str, list[np.ndarray]] = {"saber": [], "best_static": []}
    for load in config.loads:
        best = best_static(grid, config, mix, load)
        saber_ratios, static_ratios = ratios(grid, mix, "saber", load), ratios(grid, mix, best, load)
        pooled["saber"].append(saber_ratios)
        pooled["best_static"].append(static_ratios)
        rows.append(
            {
                "load": load,
                "saber": goodput(grid, mix, "saber", load),
                "best_static": goodput(grid, mix, best, load),
                "best_cap": int(best.removeprefix("static-")),
                "gain_points": 100.0 * (goodput(grid, mix, "saber", load) - goodput(grid, mix, best, load)),
                "saber_ratio_mean": float(np.mean(saber_ratios)),
                "saber_ratio_std": float(np.std(saber_ratios)),
                "static_ratio_mean": float(np.mean(static_ratios)),
                "static_ratio_std": float(np.std(static_ratios)),
                "ablation": {
                    name: goodput(grid, mix, name, load)
                    for name in ("saber", "saber-linear", "saber-logistic", "saber-predicted")
                },
                "caps": {cap: goodput(grid, mix, f"static-{cap}", load) for cap in config.caps},
            }
        )
    return {
        "rows": rows,
        "gain_points": float(np.mean([row["gain_points"] for row in rows])),
        "cv": {name: cv(np.concatenate(parts)) for name, parts in pooled.items()},
    }


def run(quick: bool) -> dict[str, Any]:
    config = bench_config(quick)
    profile = profile_instance(INSTANCE, "code-w3", seed=0)
    grid, slas = run_grid(config, profile)
    mixes = {mix: summarize_mix(grid, config, mix) for mix in MIXES}
    high = [row["gain_points"] for summary in mixes.values() for row in summary["rows"] if row["load"] >= 10]
    figures: dict[str, Any] = {
        "goodput_gain_vs_best_static": {mix: summary["gain_points"] for mix, summary in mixes.items()},
        "max_gain_high_load": max(high),
        "cv": mixes_cv(mixes),
        "usl_r2": profile.fits["usl"].r2,
        "linear_r2": profile.fits["linear"].r2,
        "logistic_r2": profile.fits["logistic"].r2,
        "profile_samples": profile.num_samples,
        "sla_mode": config.sla_mode,
        "saber_at_or_above_best_static_share": float(
            np.mean([row["gain_points"] >= 0 for s in mixes.values() for row in s["rows"]])
        ),
    }
    if not quick:
        sensitivity = max_tokens_sensitivity(config, profile)
        write_report(RESULTS_DIR, config, profile, grid, mixes, slas, figures, sensitivity)
    flat = {k: v for k, v in figures.items() if not isinstance(v, dict)}
    flat.update({f"gain_{mix}": value for mix, value in figures["goodput_gain_vs_best_static"].items()})
    flat.update({f"cv_{mix}_{name}": value for mix, pair in figures["cv"].items() for name, value in pair.items()})
    print_figures("saber", flat)
    return figures


def mixes_cv(mixes: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    return {mix: dict(summary["cv"]) for mix, summary in mixes.items()}
