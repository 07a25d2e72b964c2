"""``slosched bench convergence``: per workload, the stack's and its strongest baseline's steady-state SLO
capacity @90% on a ladder of run lengths (``setup``), every seed; per rung the median [min-max] over seeds,
the median measured jobs per run, and the ratio to the rung below; the verdict is the shortest rung that
holds at the next within 5% for both policies."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import slosched.bench.convergence.setup as setup
import slosched.bench.stack.setup as stack_setup
from slosched.bench.convergence.report import PAGE, merged, read_results, write_page
from slosched.evaluation.capacity import Spread
from slosched.evaluation.formatting import print_figures
from slosched.evaluation.judgement import JUDGEMENT_NAME
from slosched.evaluation.rows import row_finished
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.sizing import NO_WORK_RULE_NAME, PREFIX_RULE_NAME, WORK_RULE_NAME
from slosched.evaluation.steady import SteadyCapacity, SteadySearch, long_search, steady_capacity
from slosched.evaluation.task_cache import TALLY

Ladder = list[tuple[float, int]]  # per rung: (capacity @90%, measured jobs per run of its last search)


def climb(task: tuple[str, str, int, bool, int]) -> Ladder:
    """One seed's ladder of one policy on one workload (workers pickle the task): the steady search at the
    workload's own length, then each rung the 4x search of the rung below."""
    name, label, seed, quick, num_rungs = task
    workload = stack_setup.workload(name)
    bench = workload.workbench(quick)
    candidate = setup.candidate(label)
    search = SteadySearch(guess=workload.guess, targets=(setup.TARGET,))
    found: SteadyCapacity = steady_capacity(bench, candidate, seed, search)
    ladder = [(found.capacity[setup.TARGET], found.num_jobs)]
    for _ in range(num_rungs - 1):
        found = steady_capacity(bench, candidate, seed, long_search(found, search))
        ladder.append((found.capacity[setup.TARGET], found.num_jobs))
    return ladder


def run(quick: bool) -> dict[str, Any]:
    started, tally_before = time.perf_counter(), TALLY.figures()
    seeds = setup.QUICK_SEEDS if quick else setup.FULL_SEEDS
    num_rungs = setup.rungs(quick)
    policies = {name: setup.policies(name) for name in setup.workload_names(quick)}
    tasks = [
        (name, label, seed, quick, num_rungs) for name, labels in policies.items() for label in labels for seed in seeds
    ]
    ladders = run_tasks(climb, tasks, f"convergence: {len(tasks)} ladders of {num_rungs} rungs")
    workloads: dict[str, Any] = {}
    for name, labels in policies.items():
        rows = {
            label: _row([ladder for task, ladder in zip(tasks, ladders, strict=True) if task[:2] == (name, label)])
            for label in labels
        }
        workloads[name] = {
            "policies": rows,
            "steady_from": _steady_from(list(rows.values())[:2], num_rungs),  # the oracle is no contender
            "stack_vs_baseline": stack_vs_baseline(rows),
        }
        if stack_setup.ORACLE_LABEL in rows:
            workloads[name]["oracle_vs_baseline"] = oracle_vs_baseline(rows)
        row_finished(name, workloads[name])
    tally = {key: value - tally_before[key] for key, value in TALLY.figures().items()}
    figures = {
        "mode": "quick" if quick else "full",
        "seeds": list(seeds),
        "rungs": num_rungs,
        "target": setup.TARGET,
        "tolerance": setup.TOLERANCE,
        "workloads": workloads,
        "wall_s": time.perf_counter() - started,
        "task_cache": tally,
        "warmup": PREFIX_RULE_NAME,
        "work_rule": NO_WORK_RULE_NAME if quick else WORK_RULE_NAME,
        "judgement": JUDGEMENT_NAME,
    }
    print_figures(
        "convergence: the shortest steady rung (0 = the stack bench's own length)",
        {name: row["steady_from"] for name, row in workloads.items()},
    )
    if not quick:  # the page keeps the ladders of workloads this run did not climb
        write_page(PAGE, merged(read_results(PAGE), figures))
    return figures


def _row(ladders: list[Ladder]) -> dict[str, Any]:
    """One policy's rungs over seeds: capacity spread, median jobs, and each rung's median over the last."""
    rungs: list[dict[str, Any]] = []
    for index in range(len(ladders[0])):
        capacity = Spread.of([ladder[index][0] for ladder in ladders])
        jobs = statistics.median(ladder[index][1] for ladder in ladders)
        below = rungs[-1]["capacity"]["median"] if rungs else math.nan
        ratio = capacity.median / below if below > 0 else math.nan
        rungs.append({"capacity": capacity.as_json(), "num_jobs": jobs, "vs_rung_below": ratio})
    return {"rungs": rungs}


def stack_vs_baseline(rows: dict[str, dict[str, Any]]) -> list[float]:
    """Per rung, the stack's median capacity over the baseline's (the first row is the stack's, the second
    the baseline's): the verdict of ``bench stack`` at each length."""
    stack, baseline = (row["rungs"] for row in list(rows.values())[:2])
    return [
        mine["capacity"]["median"] / theirs["capacity"]["median"] if theirs["capacity"]["median"] > 0 else math.nan
        for mine, theirs in zip(stack, baseline, strict=True)
    ]


def oracle_vs_baseline(rows: dict[str, dict[str, Any]]) -> list[float]:
    """Per rung, the ORACLE twin's median capacity over the baseline's (the second row is the baseline's)."""
    baseline = list(rows.values())[1]
    return stack_vs_baseline({"oracle": rows[stack_setup.ORACLE_LABEL], "baseline": baseline})


def _steady_from(rows: list[dict[str, Any]], num_rungs: int) -> int | None:
    """The shortest rung from which every policy's median holds, within the tolerance, at each longer rung
    of the ladder (0: the stack bench's own length); None when not even the last step holds."""
    for index in range(num_rungs - 1):
        ratios = [row["rungs"][step + 1]["vs_rung_below"] for row in rows for step in range(index, num_rungs - 1)]
        if all(math.isfinite(ratio) and abs(ratio - 1.0) <= setup.TOLERANCE for ratio in ratios):
            return index
    return None
