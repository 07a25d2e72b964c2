"""``slosched bench attainment``: per workload and load, each group's pooled SLO attainment under the stack
and its strongest baseline (``setup``), every seed on the same jobs for both."""

from __future__ import annotations

import time
from typing import Any

import slosched.bench.attainment.setup as setup
import slosched.bench.convergence.setup as convergence_setup
import slosched.bench.stack.setup as stack_setup
from slosched.bench.attainment.report import PAGE, write_page
from slosched.evaluation.formatting import print_figures
from slosched.evaluation.rows import row_finished
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.workbench import SELF_TUNE, WARMUP_PREFIX, Candidate
from slosched.metrics.summary import token_slo_missed_jobs

Counts = dict[str, tuple[int, int]]  # group -> (jobs that met their SLO, jobs)


def counted(task: tuple[str, Candidate, float, int, bool]) -> Counts:
    """One run (workers pickle the task): the measured jobs' met and total per group, as ``bench stack``
    judges them (the job's deadline, and its token SLOs where it has any)."""
    name, candidate, rate, seed, quick = task
    bench = stack_setup.workload(name).workbench(quick).sized(setup.num_jobs(name, quick))
    jobs, history = bench.workload(rate, seed)
    if candidate.extra(SELF_TUNE):
        candidate = bench.self_tuned(candidate, rate, seed, history)
    result = bench.run_fn(candidate, bench.instances, jobs, bench.options, seed, history)
    missed = token_slo_missed_jobs(result.requests)
    counts: dict[str, list[int]] = {}
    for job in result.jobs:
        if job.id.startswith(WARMUP_PREFIX):
            continue
        tally = counts.setdefault(setup.group_of(job), [0, 0])
        tally[0] += job.deadline_met and job.id not in missed
        tally[1] += 1
    return {group: (met, total) for group, (met, total) in counts.items()}


def pooled(runs: list[Counts]) -> Counts:
    """The runs' counts summed per group (every seed's jobs in one pool)."""
    total: dict[str, list[int]] = {}
    for counts in runs:
        for group, (met, jobs) in counts.items():
            tally = total.setdefault(group, [0, 0])
            tally[0] += met
            tally[1] += jobs
    return {group: (met, jobs) for group, (met, jobs) in sorted(total.items())}


def _workload_row(
    name: str, labels: list[str], rates: list[float], found: dict[tuple[Any, ...], Counts]
) -> dict[str, Any]:
    """Per group and policy, [met, jobs] at each load; and each policy's attainment over all groups."""
    by_load = {
        (label, rate): pooled([counts for key, counts in found.items() if key[:3] == (name, label, rate)])
        for label in labels
        for rate in rates
    }
    groups = sorted({group for counts in by_load.values() for group in counts})
    table = {
        group: {label: [list(by_load[label, rate].get(group, (0, 0))) for rate in rates] for label in labels}
        for group in groups
    }
    overall = {
        label: [
            sum(m for m, _ in by_load[label, rate].values()) / max(sum(n for _, n in by_load[label, rate].values()), 1)
            for rate in rates
        ]
        for label in labels
    }
    return {"groups": table, "overall": overall}


def run(quick: bool) -> dict[str, Any]:
    started = time.perf_counter()
    seeds, settings, loads = setup.seeds(quick), setup.stack_settings(), setup.loads()
    stack = setup.stack_candidate(settings)
    workloads: dict[str, Any] = {}
    plans: dict[str, tuple[list[Candidate], list[float], float]] = {}
    for name in setup.workload_names(quick):
        base = setup.base_rate(name, convergence_setup.strongest_baseline(name))
        baseline = convergence_setup.candidate(setup.baseline_label(name))
        plans[name] = ([stack, baseline], [load * base for load in loads], base)
    tasks = [
        (name, candidate, rate, seed, quick)
        for name, (candidates, rates, _) in plans.items()
        for candidate in candidates
        for rate in rates
        for seed in seeds
    ]
    results = run_tasks(counted, tasks, f"attainment: {len(tasks)} runs")
    found = {(task[0], task[1].label, *task[2:4]): counts for task, counts in zip(tasks, results, strict=True)}
    for name, (candidates, rates, base) in plans.items():
        labels = [candidate.label for candidate in candidates]
        workloads[name] = {
            "policies": labels,
            "base_rate": base,
            "rates": rates,
            "num_jobs": setup.num_jobs(name, quick),
            **_workload_row(name, labels, rates, found),
        }
        row_finished(name, workloads[name])
    figures = {
        "mode": "quick" if quick else "full",
        "stack_settings": settings,
        "seeds": list(seeds),
        "loads": list(loads),
        "workloads": workloads,
        "wall_s": time.perf_counter() - started,
    }
    print_figures(
        "attainment over all groups at each load (stack / strongest baseline)",
        {
            name: " ".join(f"{a:.3f}/{b:.3f}" for a, b in zip(*row["overall"].values(), strict=True))
            for name, row in workloads.items()
        },
    )
    as_shipped = not settings and loads == setup.LOADS and seeds == setup.FULL_SEEDS and not setup.baseline_chosen()
    if not quick and as_shipped:  # a variant's figures are printed, not paged
        write_page(PAGE, figures)
    return figures
