"""Compare a real run with its simulation: the same metrics from both ``RunResult`` s, and their errors.

Metrics of one run (completed requests and jobs only): request latency and TTFT (mean, P50, P90, P99),
job latency (the same four; only for traces whose jobs make several calls, where it differs from the
request latency) and throughput (output tokens per second from the first arrival to the last finish).
``error_pct = 100 * (sim - real) / real``. Headline figures (what the issue's 5% goal is about):
``mean_abs_error_pct`` is the mean of ``|error_pct|`` over the *mean latency* metrics (request and job),
``p90_abs_error_pct`` the same over the *P90 latency* metrics; ``all_abs_error_pct`` covers every metric.

A case replayed several times (``compare_replays``) compares the simulation with the mean of each metric
over the replays, and keeps every replay's figure: one short replay on a shared machine runs at whatever
speed the host gives its core in those seconds (``docs/results/fidelity.md`` shows how much that moves).
Each replay may have a simulation of its own (run at the speed its engine's core had, ``fidelity.speed``):
then the simulated figure is the mean over those simulations too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from slosched.core.records import RunResult
from slosched.core.request import Outcome

_STATS = (("mean", None), ("p50", 50.0), ("p90", 90.0), ("p99", 99.0))
MEAN_METRICS = ("request_latency_mean_s", "job_latency_mean_s")
P90_METRICS = ("request_latency_p90_s", "job_latency_p90_s")


def _stats(prefix: str, values: Sequence[float]) -> dict[str, float]:
    data = np.asarray([v for v in values if math.isfinite(v)], dtype=np.float64)
    if data.size == 0:
        return {}
    return {f"{prefix}_{name}_s": float(np.mean(data) if q is None else np.percentile(data, q)) for name, q in _STATS}


def run_metrics(result: RunResult, job_metrics: bool) -> dict[str, float]:
    """The compared metrics of one run (see the module docstring)."""
    requests = [r for r in result.requests if r.outcome is Outcome.COMPLETED]
    metrics = _stats("request_latency", [r.latency_s for r in requests])
    metrics |= _stats("ttft", [r.ttft_s for r in requests])
    if job_metrics:
        metrics |= _stats("job_latency", [j.latency_s for j in result.jobs if j.outcome is Outcome.COMPLETED])
    if requests:
        span = max(r.finish_s for r in requests) - min(r.arrival_s for r in result.requests)
        metrics["throughput_tokens_per_s"] = sum(r.output_tokens for r in requests) / span if span > 0 else math.nan
    return metrics


@dataclass(slots=True, frozen=True)
class Case:
    """One compared figure: a metric of one trace at one load, real and simulated."""

    trace: str
    load: str
    metric: str
    real: float
    sim: float
    real_replays: tuple[float, ...] = ()  # each replay's figure when ``real`` is their mean
    sim_runs: tuple[float, ...] = ()  # each simulation's figure when ``sim`` is their mean

    @property
    def real_spread_pct(self) -> float:
        """The replays' range as a share of their mean (nan with fewer than two replays)."""
        if len(self.real_replays) < 2 or not self.real:
            return math.nan
        return 100.0 * (max(self.real_replays) - min(self.real_replays)) / self.real

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.sim - self.real) / self.real if self.real else math.nan

    def to_json_dict(self) -> dict[str, Any]:
        figures = {**asdict(self), "error_pct": round(self.error_pct, 2)}
        figures["real_replays"] = list(self.real_replays)
        figures["sim_runs"] = list(self.sim_runs)
        if len(self.real_replays) >= 2:
            figures["real_spread_pct"] = round(self.real_spread_pct, 2)
        return figures


def compare_runs(trace: str, load: str, real: RunResult, sim: RunResult, job_metrics: bool) -> list[Case]:
    """Cases for every metric both runs have (a run that completed nothing has none)."""
    return compare_replays(trace, load, [real], [sim], job_metrics)


def compare_replays(
    trace: str, load: str, replays: Sequence[RunResult], sims: Sequence[RunResult], job_metrics: bool
) -> list[Case]:
    """Cases for every metric every simulation and every replay have, each real figure the replays' mean and
    each simulated one the simulations' mean (one simulation, or one per replay)."""
    if not replays or not sims:
        raise ValueError("compare_replays needs at least one replay and one simulation")
    real_metrics = [run_metrics(real, job_metrics) for real in replays]
    sim_metrics = [run_metrics(sim, job_metrics) for sim in sims]
    every = real_metrics + sim_metrics
    shared = [name for name in sim_metrics[0] if all(name in metrics for metrics in every)]
    cases = []
    for name in shared:
        real = tuple(metrics[name] for metrics in real_metrics)
        sim = tuple(metrics[name] for metrics in sim_metrics)
        cases.append(Case(trace, load, name, float(np.mean(real)), float(np.mean(sim)), real, sim))
    return cases


def _mean_abs(cases: Iterable[Case]) -> float:
    errors = [abs(case.error_pct) for case in cases if math.isfinite(case.error_pct)]
    return float(np.mean(errors)) if errors else math.nan


def summarize_cases(cases: Sequence[Case]) -> dict[str, Any]:
    """The benchmark's JSON: every case, and the headline errors (module docstring)."""
    return {
        "cases": [case.to_json_dict() for case in cases],
        "mean_abs_error_pct": round(_mean_abs(c for c in cases if c.metric in MEAN_METRICS), 2),
        "p90_abs_error_pct": round(_mean_abs(c for c in cases if c.metric in P90_METRICS), 2),
        "all_abs_error_pct": round(_mean_abs(cases), 2),
    }


def error_table(cases: Sequence[Case], metrics: Sequence[str]) -> list[list[str]]:
    """Rows ``trace, load, real/sim/error per metric`` for a report (``-`` where a metric is absent)."""
    keys: dict[tuple[str, str], dict[str, Case]] = {}
    for case in cases:
        keys.setdefault((case.trace, case.load), {})[case.metric] = case
    rows = []
    for (trace, load), by_metric in keys.items():
        row = [trace, load]
        for metric in metrics:
            found = by_metric.get(metric)
            row.append("-" if found is None else f"{found.real:.3g} / {found.sim:.3g} ({found.error_pct:+.1f}%)")
        rows.append(row)
    return rows
