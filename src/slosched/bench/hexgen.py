"""``slosched bench hexgen``: Hexgen-Text2SQL's evaluation reproduced in the simulator (DESIGN 4.1).

Per setting (trace natural/hard/mixed x arrival 0.5/1.0 queries/s x cluster hetero1/hetero2): the
baseline ``round-robin+fcfs``, the ablations ``round-robin+urgency`` and ``workload-balanced+fcfs``,
``workload-balanced+urgency`` with alpha chosen by the alpha tuner on a *previous* 100 s window of the
same traffic (another seed), and the same with the ORACLE output predictor (true lengths; an upper
bound). Jobs get SLO = scale x their no-contention latency; the urgency policies' budgets depend on
the scale, so they run at the scale ``workload-balanced+fcfs`` needs for 95 % and again at their own
result (one fixed-point step); attainment curves are read off the latencies of the last run.
Throughput: the highest Poisson rate at which 95 % of the jobs meet SLO scale ``THROUGHPUT_SCALE``
(bisection over the rate, same job lengths at every rate).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from slosched.bench import hexgen_report
from slosched.bench import hexgen_setup as setup
from slosched.bench.common import print_figures
from slosched.bench.hexgen_setup import cluster, queue_snapshot, trace
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.records import RunResult
from slosched.metrics.slo_scale import min_scale_for, slowdown_ratios
from slosched.sim.options import SimOptions
from slosched.tuning.alpha import AlphaTuner, TuneConfig
from slosched.tuning.executors import ProcessExecutor

BASELINE = "round-robin+fcfs"
OURS = "workload-balanced+urgency"
ORACLE = "workload-balanced+urgency (oracle)"
POLICIES = ("round-robin+fcfs", "round-robin+urgency", "workload-balanced+fcfs", OURS)
SLO_DEPENDENT = ("round-robin+urgency", OURS, ORACLE)
THROUGHPUT_SCALE = 8.0
WINDOW_S = 100.0
ALPHAS_11 = tuple(round(0.1 * i, 1) for i in range(11))


@dataclass(slots=True, frozen=True)
class Plan:
    traces: tuple[str, ...]
    rates: tuple[float, ...]
    clusters: tuple[str, ...]
    num_jobs: int
    throughput_traces: tuple[str, ...]
    throughput_jobs: int
    throughput_steps: int


FULL = Plan(("natural", "hard", "mixed"), (0.5, 1.0), ("hetero1", "hetero2"), 150, ("natural", "mixed"), 100, 6)
QUICK = Plan(("natural",), (0.5,), ("hetero1",), 50, ("natural",), 50, 4)


@dataclass(slots=True)
class Setting:
    trace: str
    rate: float
    cluster: str
    alpha: float = 0.0
    min_scale_95: dict[str, float] = field(default_factory=dict)
    min_scale_99: dict[str, float] = field(default_factory=dict)
    ratios: dict[str, list[float]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "trace": self.trace,
            "rate": self.rate,
            "cluster": self.cluster,
            "alpha": self.alpha,
            "min_scale_95": self.min_scale_95,
            "min_scale_99": self.min_scale_99,
        }


def _options(scale: float) -> SimOptions:
    return SimOptions(slo_scale=scale)


def tune_alpha(instances: tuple[InstanceSpec, ...], trace_name: str, rate: float, tuner_pool: ProcessExecutor) -> float:
    """Alpha from a retune on a 100 s window of the same traffic recorded earlier (another seed)."""
    window = trace(trace_name, rate, max(2, round(WINDOW_S * rate)), seed=1000)
    window = [job for job in window if job.arrival_s < WINDOW_S]
    tuner = AlphaTuner(TuneConfig(instances, options=SimOptions(slo_scale=THROUGHPUT_SCALE)), tuner_pool)
    return tuner.retune(window).alpha


def _run_policy(
    instances: tuple[InstanceSpec, ...], jobs: list[JobSpec], name: str, alpha: float, start_scale: float
) -> RunResult:
    policy = name.removesuffix(" (oracle)")
    oracle = name.endswith("(oracle)")
    result = setup.run(instances, jobs, policy, _options(start_scale), alpha, oracle)
    if name in SLO_DEPENDENT:
        scale = min_scale_for(result.jobs, 0.95)
        if math.isfinite(scale):  # one fixed-point step: budgets from the scale this policy reaches
            result = setup.run(instances, jobs, policy, _options(scale), alpha, oracle)
    return result


def run_setting(setting: Setting, plan: Plan, pool: ProcessExecutor) -> dict[str, RunResult]:
    instances = cluster(setting.cluster)
    jobs = trace(setting.trace, setting.rate, plan.num_jobs, seed=7)
    setting.alpha = tune_alpha(instances, setting.trace, setting.rate, pool)
    results: dict[str, RunResult] = {}
    for name in ("workload-balanced+fcfs", BASELINE, "round-robin+urgency", OURS, ORACLE):
        start = min_scale_for(results["workload-balanced+fcfs"].jobs, 0.95) if results else 4.0
        start = start if math.isfinite(start) else 4.0
        alpha = setting.alpha if name.startswith("workload-balanced+urgency") else 0.0
        results[name] = _run_policy(instances, jobs, name, alpha, start)
        setting.min_scale_95[name] = min_scale_for(results[name].jobs, 0.95)
        setting.min_scale_99[name] = min_scale_for(results[name].jobs, 0.99)
        setting.ratios[name] = sorted(slowdown_ratios(results[name].jobs).tolist())
    return results


def attainment(instances: tuple[InstanceSpec, ...], jobs: list[JobSpec], policy: str, alpha: float) -> float:
    result = setup.run(instances, jobs, policy, _options(THROUGHPUT_SCALE), alpha)
    return float(np.mean(slowdown_ratios(result.jobs) <= THROUGHPUT_SCALE))


def max_rate(check: Callable[[float], bool], steps: int, low: float = 0.02, high: float = 2.0) -> float:
    """Bisection on a log scale for the highest rate passing ``check`` (``low`` if none does)."""
    if check(high):
        return high
    for _ in range(steps):
        middle = math.sqrt(low * high)
        if check(middle):
            low = middle
        else:
            high = middle
    return low


def throughput(cluster_name: str, trace_name: str, policy: str, alpha: float, plan: Plan) -> float:
    instances = cluster(cluster_name)

    def check(rate: float) -> bool:
        jobs = trace(trace_name, rate, plan.throughput_jobs, seed=11)
        return attainment(instances, jobs, policy, alpha) >= 0.95

    return max_rate(check, plan.throughput_steps)


def stage_shares(result: RunResult) -> dict[str, dict[str, float]]:
    """Per stage kind (IR, GEN, REVISE, ...): share of its calls each instance served."""
    counts: dict[str, dict[str, int]] = {}
    for record in result.requests:
        kind = record.stage.rstrip("0123456789") or record.stage
        per = counts.setdefault(kind, {})
        per[record.instance] = per.get(record.instance, 0) + 1
    return {
        kind: {name: count / sum(per.values()) for name, count in sorted(per.items())} for kind, per in counts.items()
    }


def _ratio(setting: Setting, target: str) -> float:
    table = setting.min_scale_95 if target == "95" else setting.min_scale_99
    return table[BASELINE] / table[OURS]


def run_bench(quick: bool) -> dict[str, Any]:
    plan = QUICK if quick else FULL
    started = time.perf_counter()
    pool = ProcessExecutor(max_workers=2)
    settings: list[Setting] = []
    shares: dict[str, Any] = {}
    try:
        for trace_name in plan.traces:
            for rate in plan.rates:
                for cluster_name in plan.clusters:
                    setting = Setting(trace_name, rate, cluster_name)
                    results = run_setting(setting, plan, pool)
                    settings.append(setting)
                    if not shares:
                        shares = {
                            "setting": setting.as_json(),
                            "before": stage_shares(results[BASELINE]),
                            "after": stage_shares(results[OURS]),
                        }
        tune_seconds = {rate: _time_retune(pool, rate) for rate in (0.5, 1.0)}
    finally:
        pool.close()
    alphas = {(s.cluster, s.trace): s.alpha for s in settings if s.rate == plan.rates[0]}
    throughputs: list[dict[str, Any]] = []
    for cluster_name in plan.clusters:
        for trace_name in plan.throughput_traces:
            alpha = alphas.get((cluster_name, trace_name), 0.0)
            base = throughput(cluster_name, trace_name, BASELINE, 0.0, plan)
            ours = throughput(cluster_name, trace_name, OURS, alpha, plan)
            throughputs.append(
                {"cluster": cluster_name, "trace": trace_name, BASELINE: base, OURS: ours, "ratio": ours / base}
            )
    snapshot = _snapshot(settings[0])
    ratios_95 = [_ratio(s, "95") for s in settings]
    figures: dict[str, Any] = {
        "settings": [s.as_json() for s in settings],
        "ratio_95_avg": statistics.fmean(ratios_95),
        "ratio_95_max": max(ratios_95),
        "ratio_99_avg": statistics.fmean(_ratio(s, "99") for s in settings),
        "throughput_ratio_avg": statistics.fmean(t["ratio"] for t in throughputs),
        "throughput_ratio_max": max(t["ratio"] for t in throughputs),
        "throughput": throughputs,
        "throughput_slo_scale": THROUGHPUT_SCALE,
        "alpha_tune_seconds": tune_seconds[0.5],
        "alpha_tune_seconds_1qps": tune_seconds[1.0],
        "stage_shares": shares,
        "queue_snapshot": snapshot,
        "bench_seconds": time.perf_counter() - started,
    }
    return {"figures": figures, "settings": settings}


def _time_retune(pool: ProcessExecutor, rate: float) -> float:
    """Wall time of evaluating 11 alphas (0.0..1.0) on a 100 s hetero1 window at ``rate`` (warm pool)."""
    instances = cluster("hetero1")
    window = [
        job for job in trace("natural", rate, round(1.1 * WINDOW_S * rate), seed=2000) if job.arrival_s < WINDOW_S
    ]
    tuner = AlphaTuner(TuneConfig(instances, options=SimOptions(slo_scale=THROUGHPUT_SCALE)), pool)
    started = time.perf_counter()
    tuner.evaluate(window, ALPHAS_11)
    return time.perf_counter() - started


def _snapshot(setting: Setting) -> dict[str, Any]:
    """The longest local queue at mid-trace under ``workload-balanced+urgency``, most urgent first."""
    instances = cluster(setting.cluster)
    jobs = trace(setting.trace, setting.rate, QUICK.num_jobs, seed=7)
    captured: dict[str, Any] = {}

    def probe(sim: Any) -> None:
        name, now, entries = queue_snapshot(sim)
        captured.update(instance=name, time_s=now, queue=[asdict(entry) for entry in entries[:12]])

    at_s = 0.5 * max(job.arrival_s for job in jobs)
    scale = setting.min_scale_95[OURS]
    scale = scale if math.isfinite(scale) else THROUGHPUT_SCALE
    setup.run(instances, jobs, OURS, _options(scale), setting.alpha, on_time=(at_s, probe))
    return captured


def run(quick: bool) -> dict[str, Any]:
    """The bench entry point: figures as JSON; the full run also writes docs/results/hexgen.md."""
    outcome = run_bench(quick)
    figures = outcome["figures"]
    if not quick:
        hexgen_report.write(figures, outcome["settings"])
    summary = {
        "ratio_95_avg (target >= 1.6)": figures["ratio_95_avg"],
        "ratio_95_max": figures["ratio_95_max"],
        "throughput_ratio_avg (target >= 1.65)": figures["throughput_ratio_avg"],
        "alpha_tune_seconds (target <= 3; 100 s window at 0.5 q/s)": figures["alpha_tune_seconds"],
        "alpha_tune_seconds_1qps": figures["alpha_tune_seconds_1qps"],
        "bench_seconds": figures["bench_seconds"],
    }
    for setting in figures["settings"]:
        label = f"{setting['trace']} {setting['rate']}/s {setting['cluster']} (alpha {setting['alpha']})"
        for name, value in setting["min_scale_95"].items():
            summary[f"{label} s95 {name}"] = value
    print_figures("hexgen: Hexgen-Text2SQL in the simulator", summary)
    return figures
