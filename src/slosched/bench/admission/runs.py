"""``slosched bench admission``: does the stack turn overload into work done on time? (``setup.py``)

Per workload: the plain stack's steady-state SLO capacity @90% (``evaluation/steady.py``, per seed; the median
sets the loads), then every variant at ``LOADS`` x that capacity, each run as long as the steady-state rule
asks at its rate (``steady_jobs``: 20x the p90 no-contention latency, so a 3x run is 3x as many jobs). Figures
per workload: ``capacity_rps``, ``goodput`` and ``attainment`` per variant and load (medians over seeds;
``attainment_by_tenant`` per tenant), ``goodput_vs_capacity`` (goodput over the plain stack's goodput at 1x)
and ``holds`` per variant (that ratio >= 1 at every load above 1x: no collapse). ``--quick``: one seed,
Text-to-SQL only. The full run writes ``docs/results/admission.md`` (``SLOSCHED_ADMISSION_REPORT=DIR``: any
run, to ``DIR``).
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from slosched.bench.admission.setup import (
    FULL_SEEDS,
    LOADS,
    PLAIN,
    QUICK_SEEDS,
    QUICK_WORKLOADS,
    VARIANTS,
    WORKLOADS,
    Variant,
)
from slosched.bench.stack.setup import StackWorkload, workload
from slosched.evaluation.formatting import finite_ratio, print_figures
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.steady import SteadySearch, steady_capacity, steady_jobs
from slosched.evaluation.workbench import RunFigures

RESULTS_DIR = Path("docs/results")  # relative to the working directory, like the other benches
REPORT_ENV = "SLOSCHED_ADMISSION_REPORT"  # a directory: the page is written there by any run, quick too
_CapacityTask = tuple[str, int, bool]
_RunTask = tuple[str, str, float, int, bool]


def _variant(label: str) -> Variant:
    return next(variant for variant in VARIANTS if variant.label == label)


def _capacity(task: _CapacityTask) -> float:
    name, seed, quick = task
    chosen = workload(name)
    found = steady_capacity(PLAIN.workbench(chosen, quick), PLAIN.candidate(), seed, SteadySearch(chosen.guess))
    return found.capacity[min(found.capacity)]


def _run(task: _RunTask) -> RunFigures:
    name, label, rate, seed, quick = task
    variant = _variant(label)
    bench = variant.workbench(workload(name), quick)
    return bench.sized(steady_jobs(bench, seed, rate)).run(variant.candidate(), rate, seed)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _tenant_medians(figures: list[RunFigures]) -> dict[str, float]:
    """Each tenant's attainment, median over the runs (seeds)."""
    tenants = sorted({tenant for run in figures for tenant, _ in run.attainment_by_tenant})
    return {
        tenant: _median([value for run in figures for name, value in run.attainment_by_tenant if name == tenant])
        for tenant in tenants
    }


def _workload_figures(
    chosen: StackWorkload, capacity: float, runs: dict[tuple[str, float], list[RunFigures]]
) -> dict[str, Any]:
    variants = [variant for variant in VARIANTS if variant.applies_to(chosen)]
    goodput = {
        variant.label: {
            f"{load:g}x": _median([r.goodput_jobs_per_s for r in runs[variant.label, load]]) for load in LOADS
        }
        for variant in variants
    }
    attainment = {
        variant.label: {f"{load:g}x": _median([r.attainment for r in runs[variant.label, load]]) for load in LOADS}
        for variant in variants
    }
    by_tenant = {
        variant.label: {f"{load:g}x": _tenant_medians(runs[variant.label, load]) for load in LOADS}
        for variant in variants
    }
    at_capacity = goodput[PLAIN.label]["1x"]
    versus = {
        label: {load: finite_ratio(value, at_capacity) for load, value in loads.items()}
        for label, loads in goodput.items()
    }
    holds = {
        label: all(ratio >= 1.0 for load, ratio in loads.items() if load != "1x") for label, loads in versus.items()
    }
    return {
        "description": chosen.description,
        "capacity_rps": capacity,
        "goodput": goodput,
        "attainment": attainment,
        # Tenant classes: each tenant's attainment per variant and load (one tenant: one entry).
        "attainment_by_tenant": by_tenant,
        "goodput_vs_capacity": versus,
        "holds": holds,
        "num_jobs": {f"{load:g}x": _median([r.num_jobs for r in runs[PLAIN.label, load]]) for load in LOADS},
    }


def run(quick: bool) -> dict[str, Any]:
    start = time.perf_counter()
    seeds = QUICK_SEEDS if quick else FULL_SEEDS
    workloads = QUICK_WORKLOADS if quick else WORKLOADS
    tasks = [(chosen.name, seed, quick) for chosen in workloads for seed in seeds]
    found = run_tasks(_capacity, tasks, "admission: the stack's capacity")
    capacity = {
        name: _median([c for (n, _, _), c in zip(tasks, found, strict=True) if n == name]) for name, _, _ in tasks
    }
    loads = [
        (chosen.name, variant.label, load * capacity[chosen.name], seed, quick)
        for chosen in workloads
        for variant in VARIANTS
        if variant.applies_to(chosen)
        for load in LOADS
        for seed in seeds
    ]
    results = run_tasks(_run, loads, "admission: overload runs")
    figures: dict[str, Any] = {
        "workloads": {},
        "loads": list(LOADS),
        "seeds": list(seeds),
        "mode": "quick" if quick else "full",
    }
    for chosen in workloads:
        runs: dict[tuple[str, float], list[RunFigures]] = {}
        for (name, label, rate, _, _), result in zip(loads, results, strict=True):
            if name == chosen.name:
                runs.setdefault((label, round(rate / capacity[name], 6)), []).append(result)
        figures["workloads"][chosen.name] = _workload_figures(chosen, capacity[chosen.name], runs)
    figures["wall_s"] = time.perf_counter() - start
    _print(figures)
    directory = os.environ.get(REPORT_ENV)
    if directory or not quick:
        from slosched.bench.admission.report import write_report

        write_report(Path(directory) if directory else RESULTS_DIR, figures)
    return figures


def _print(figures: dict[str, Any]) -> None:
    summary: dict[str, Any] = {}
    for name, row in figures["workloads"].items():
        summary[f"{name}: stack capacity (jobs/s)"] = row["capacity_rps"]
        for label, loads in row["goodput_vs_capacity"].items():
            summary[f"{name}: {label} goodput / stack's at 1x"] = " ".join(f"{k} {v:.2f}" for k, v in loads.items())
    summary["wall_s"] = figures["wall_s"]
    print_figures("admission", summary)
