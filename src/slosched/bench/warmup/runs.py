"""``slosched bench warmup``: per workload, the stack's and its strongest baseline's attainment of the same
measured jobs after warm-up prefixes of several lengths, every seed (``setup``); per prefix the median
[min-max] over seeds of the attainment over all measured jobs, over the first eighth of their window and over
its second half; the verdict is the shortest prefix after which attainment has settled."""

from __future__ import annotations

import statistics
import time
from typing import Any

import slosched.bench.convergence.setup as convergence_setup
import slosched.bench.stack.setup as stack_setup
import slosched.bench.warmup.setup as setup
from slosched.bench.warmup.report import PAGE, merged, read_results, write_page
from slosched.evaluation.capacity import Spread
from slosched.evaluation.formatting import print_figures
from slosched.evaluation.rows import row_finished
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.sizing import p90_no_contention_s
from slosched.evaluation.steady import steady_jobs
from slosched.evaluation.task_cache import TALLY
from slosched.evaluation.workbench import HISTORY_SEED_OFFSET

Task = tuple[str, str, int, bool, float, float | None]  # workload, policy label, seed, quick, rate, prefix
FIGURES = ("attainment", "first_eighth", "second_half")


def measure_prefix(task: Task) -> dict[str, float]:
    """One run (workers pickle the task): the seed's measured jobs at the rate after the prefix."""
    name, label, seed, quick, rate, factor = task
    workbench = stack_setup.workload(name).workbench(quick)
    if not quick:  # as long as the steady-state window asks at this rate; quick keeps the bench's floor
        workbench = workbench.sized(steady_jobs(workbench, seed, rate))
    history = workbench.jobs(workbench.history_size, seed + HISTORY_SEED_OFFSET)
    p90 = p90_no_contention_s(workbench.instances, history)
    count = setup.prefix_count(factor, workbench.num_jobs, p90, rate)
    figures = workbench.run(convergence_setup.candidate(label), rate, seed, num_warmup=count)
    return {
        "attainment": figures.attainment,
        "first_eighth": figures.attainment_first_eighth,
        "second_half": figures.attainment_second_half,
        "prefix_jobs": count,
        "prefix_s": count / rate,
        "p90_s": p90,
        "num_jobs": figures.num_jobs,
    }


def run(quick: bool) -> dict[str, Any]:
    started, tally_before = time.perf_counter(), TALLY.figures()
    seeds = setup.QUICK_SEEDS if quick else setup.FULL_SEEDS
    plans = {name: setup.policies(name) for name in setup.workload_names(quick)}
    rates = {name: setup.operating_rate(name, labels[1]) for name, labels in plans.items()}
    tasks: list[Task] = [
        (name, label, seed, quick, rates[name], factor)
        for name, labels in plans.items()
        for label in labels
        for factor in setup.PREFIXES
        for seed in seeds
    ]
    results = run_tasks(measure_prefix, tasks, f"warmup: {len(tasks)} runs")
    workloads: dict[str, Any] = {}
    for name, labels in plans.items():
        rows = {label: _row(name, label, tasks, results) for label in labels}
        workloads[name] = {
            "rate": rates[name],
            "policies": rows,
            "settled_from": settled_from(list(rows.values())),
        }
        row_finished(name, workloads[name])
    figures = {
        "mode": "quick" if quick else "full",
        "seeds": list(seeds),
        "prefixes": [setup.prefix_label(factor) for factor in setup.PREFIXES],
        "tolerance": setup.TOLERANCE,
        "workloads": workloads,
        "wall_s": time.perf_counter() - started,
        "task_cache": {key: value - tally_before[key] for key, value in TALLY.figures().items()},
    }
    print_figures(
        "warmup: the shortest prefix after which attainment has settled",
        {name: row["settled_from"] or "not within the prefixes tried" for name, row in workloads.items()},
    )
    if not quick:  # the page keeps the rows of workloads this run did not measure
        write_page(PAGE, merged(read_results(PAGE), figures))
    return figures


def _row(name: str, label: str, tasks: list[Task], results: list[dict[str, float]]) -> dict[str, Any]:
    """One policy's runs by prefix: each figure's spread over seeds, the median prefix length and jobs."""
    prefixes: dict[str, Any] = {}
    for factor in setup.PREFIXES:
        runs = [
            result
            for task, result in zip(tasks, results, strict=True)
            if task[:2] == (name, label) and task[5] == factor
        ]
        entry: dict[str, Any] = {figure: Spread.of([run[figure] for run in runs]).as_json() for figure in FIGURES}
        for key in ("prefix_jobs", "prefix_s", "p90_s", "num_jobs"):
            entry[key] = statistics.median(run[key] for run in runs)
        prefixes[setup.prefix_label(factor)] = entry
    return {"prefixes": prefixes}


def settled_from(rows: list[dict[str, Any]]) -> str | None:
    """The shortest timed prefix from which every longer one keeps each policy's median attainment within
    ``TOLERANCE`` of the longest prefix's (None where even the next-to-longest does not)."""
    timed = [setup.prefix_label(factor) for factor in setup.PREFIXES if factor is not None]
    for index, label in enumerate(timed[:-1]):
        if all(
            abs(row["prefixes"][later]["attainment"]["median"] - row["prefixes"][timed[-1]]["attainment"]["median"])
            <= setup.TOLERANCE
            for row in rows
            for later in timed[index:]
        ):
            return label
    return None
