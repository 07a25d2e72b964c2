"""The scoreboard: every paper policy against the strongest baseline users run today (DESIGN section 9).

For one ``Workbench`` (a workload on a cluster):

1. **Engine sweep.** ``chunked-fcfs`` with each static token budget and ``static-concurrency`` with each
   static max concurrency, behind the reference router ``least-tokens``: the best budget and the best cap
   are chosen after the fact (as SABER's paper chooses its best static cap).
2. **Router sweep.** Every baseline router (``least-tokens``, ``least-loaded``, ``power-of-two``,
   ``cache-aware``, ``predicted-latency``, ``prism``) with the best budget and the best cap.
3. **The strongest baseline** is the candidate of steps 1-2 with the highest median SLO capacity.
4. **Paper policies** (and labelled oracles, and the paper's own baseline) get their SLO capacity too.
5. **Overload**: attainment and goodput of the paper policies, the paper's baseline and every baseline at
   fixed multiples (0.5x-2x) of the strongest baseline's capacity; at each load the strongest baseline
   *at that load* (highest goodput) is chosen after the fact too.
6. **Convergence**: the paper policy (or the stack) and the strongest baseline are searched again at 4x the
   run length on the same seeds (``capacity_4x``; ``steady_state`` where the two agree within 5%).

SLO capacity = the highest rate at which >= 90% (and 95%) of jobs meet their SLO, to 2%, per seed, in
steady state (``steady.py``: runs sized to the workload, judged on all jobs and on the second half of the
window); the figure is the median over seeds with the min-max spread. Runs spread over local worker processes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from slosched.evaluation.capacity import Spread
from slosched.evaluation.formatting import ratio
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.steady import (
    SteadyCapacity,
    SteadySearch,
    converged,
    long_search,
    steady_capacity,
    steady_jobs,
)
from slosched.evaluation.workbench import Candidate, RunFigures, Workbench

SCOREBOARD_API_READY = True

BASELINE_ROUTERS = ("least-tokens", "least-loaded", "power-of-two", "cache-aware", "predicted-latency", "prism")
REFERENCE_ROUTER = "least-tokens"
TARGETS = (0.90, 0.95)
LOADS = (0.5, 1.0, 1.5, 2.0)
PRESIZED_GROWTH = 1.25  # first bracket step of a presized search (the step regrown rounds take too)


@dataclass(slots=True, frozen=True)
class BaselinePlan:
    """What the strongest-baseline search sweeps: token budgets, caps, routers. ``best_engine_only`` (quick
    forms): step 2 runs every router with the better of the two engine settings of step 1 only (the best
    budget or the best cap, whichever carried more behind the reference router), not with both."""

    token_budgets: tuple[int, ...] = (256, 512, 1024, 2048)
    caps: tuple[int, ...] = (16, 32, 64, 128, 256)
    routers: tuple[str, ...] = BASELINE_ROUTERS
    best_engine_only: bool = False

    @classmethod
    def quick(cls) -> BaselinePlan:
        return cls(token_budgets=(512, 2048), caps=(32, 128))


@dataclass(slots=True)
class CapacityResult:
    """One candidate's SLO capacity at 90% and 95% over seeds; ``searches``: each seed's steady-state search
    (its job count, attainment at capacity); ``capacity_4x``: the 90% capacity at 4x the run length
    (convergence; the 95% one is not searched at 4x, as nothing reads it)."""

    candidate: Candidate
    capacity: dict[float, Spread]
    searches: tuple[SteadyCapacity, ...] = ()
    capacity_4x: dict[float, Spread] = field(default_factory=dict)

    @property
    def median_90(self) -> float:
        return self.capacity[TARGETS[0]].median

    @property
    def median_90_4x(self) -> float:
        return self.capacity_4x[TARGETS[0]].median if self.capacity_4x else math.nan

    @property
    def steady_state(self) -> bool:
        """The 90% capacity agrees with its value at 4x the run length within 5%."""
        return converged(self.median_90, self.median_90_4x)

    def run_json(self) -> dict[str, Any]:
        """How the search ran: job counts per seed, whether they were long enough, attainment at capacity."""
        return {
            "num_jobs": [search.num_jobs for search in self.searches],
            "sized": all(search.sized for search in self.searches),
            "attainment_all": Spread.of([search.attainment[0] for search in self.searches]).as_json(),
            "attainment_second_half": Spread.of([search.attainment[1] for search in self.searches]).as_json(),
        }


@dataclass(slots=True)
class Scoreboard:
    """Results of one workbench: capacities, the strongest baseline, overload figures."""

    workbench: str
    num_jobs: int
    seeds: tuple[int, ...]
    truth: tuple[str, ...] = ()  # the software stack(s) of the cluster's ground-truth models
    baselines: dict[str, CapacityResult] = field(default_factory=dict)
    others: dict[str, CapacityResult] = field(default_factory=dict)
    strongest: str = ""
    overload: dict[str, dict[float, tuple[Spread, Spread]]] = field(default_factory=dict)
    # Every baseline at every load: the strongest baseline *at a load* is chosen after the fact among them.
    overload_baselines: dict[str, dict[float, tuple[Spread, Spread]]] = field(default_factory=dict)

    def strongest_at(self, load: float) -> tuple[str, float]:
        """(label, median goodput) of the baseline with the highest median goodput at ``load`` (the
        strongest-by-capacity one when the per-load runs are missing)."""
        runs = {label: per_load[load] for label, per_load in self.overload_baselines.items() if load in per_load}
        if not runs and self.strongest in self.overload and load in self.overload[self.strongest]:
            runs = {self.strongest: self.overload[self.strongest][load]}
        if not runs:
            return self.strongest, math.nan
        label = max(runs, key=lambda name: _finite_or_minus(runs[name][1].median))
        return label, runs[label][1].median

    def converged(self) -> dict[str, CapacityResult]:
        """The results that carry a capacity at 4x the run length, by label."""
        return {label: result for label, result in {**self.baselines, **self.others}.items() if result.capacity_4x}

    @property
    def steady_state(self) -> bool:
        """Every capacity measured at 4x the run length agrees with it within 5% (False when none was)."""
        results = self.converged()
        return bool(results) and all(result.steady_state for result in results.values())

    def capacity_of(self, label: str) -> float:
        result = self.baselines.get(label) or self.others[label]
        return result.median_90

    def ratio(self, label: str, versus: str | None = None) -> float:
        """Median 90% capacity of ``label`` over ``versus`` (default: the strongest baseline)."""
        base = self.capacity_of(versus or self.strongest)
        return self.capacity_of(label) / base if base > 0 else math.nan

    def as_json(self, paper_policy: str | None = None, paper_baseline: str | None = None) -> dict[str, Any]:
        """The fields every benchmark's JSON carries (issue 13, item 4)."""
        figures: dict[str, Any] = {
            "workbench": self.workbench,
            "num_jobs": self.num_jobs,
            "seeds": list(self.seeds),
            "baselines": {label: result.median_90 for label, result in self.baselines.items()},
            "strongest_baseline": self.strongest,
            "capacity": {
                label: {f"slo_{round(100 * t)}": spread.as_json() for t, spread in result.capacity.items()}
                for label, result in {**self.baselines, **self.others}.items()
            },
            "capacity_4x": {label: result.median_90_4x for label, result in self.converged().items()},
            "steady_state_by_policy": {label: result.steady_state for label, result in self.converged().items()},
            "steady_state": self.steady_state,
            "runs": {label: result.run_json() for label, result in {**self.baselines, **self.others}.items()},
            "truth": list(self.truth),
            "overload": {
                label: {
                    f"{load}x": {"attainment": att.as_json(), "goodput_jobs_per_s": good.as_json()}
                    for load, (att, good) in per_load.items()
                }
                for label, per_load in self.overload.items()
            },
        }
        loads = sorted({load for per_load in self.overload.values() for load in per_load})
        figures["strongest_per_load"] = {
            f"{load}x": dict(zip(("label", "goodput_jobs_per_s"), self.strongest_at(load), strict=True))
            for load in loads
        }
        if paper_policy is not None:
            figures["paper_policy"] = paper_policy
            figures["ratio_vs_strongest"] = self.ratio(paper_policy)
            ours = self.overload.get(paper_policy, {})
            figures["goodput_ratio_vs_strongest_per_load"] = {
                f"{load}x": ratio(ours[load][1].median, self.strongest_at(load)[1]) for load in loads if load in ours
            }
        if paper_policy is not None and paper_baseline is not None:
            figures["paper_baseline"] = paper_baseline
            figures["ratio_vs_paper_baseline"] = self.ratio(paper_policy, paper_baseline)
        return figures


@dataclass(slots=True, frozen=True)
class _CapacityTask:
    workbench: Workbench
    candidate: Candidate
    seed: int
    search: SteadySearch


def _capacity_task(task: _CapacityTask) -> SteadyCapacity:
    # The 95% search starts from the points of the 90% one: its capacity is at most the 90% capacity.
    return steady_capacity(task.workbench, task.candidate, task.seed, task.search)


@dataclass(slots=True, frozen=True)
class _RunTask:
    workbench: Workbench
    candidate: Candidate
    rate: float
    seed: int


def _run_task(task: _RunTask) -> RunFigures:
    return task.workbench.run(task.candidate, task.rate, task.seed)


def capacities(
    workbench: Workbench,
    candidates: Sequence[Candidate],
    seeds: Sequence[int],
    guess: float,
    workers: int = 2,
    presized: bool = False,
    known: Mapping[tuple[str, int], SteadyCapacity] | None = None,
) -> dict[str, CapacityResult]:
    """Steady-state SLO capacity of every candidate on every seed (in parallel), by label. ``presized``: the
    searches start at the job count ``guess`` needs (``steady.py``; for a guess that is a sized capacity).
    ``known``: searches already run, by (label, seed), taken as they are instead of run again."""
    search = SteadySearch(guess=guess, targets=TARGETS, presized=presized)
    if presized:  # a sized guess is near: a narrow first bracket, widened (squared) where it does not hold
        search = replace(search, growth=PRESIZED_GROWTH, widen=True)
    done = known or {}
    pairs = [(candidate, seed) for candidate in candidates for seed in seeds]
    tasks = [_CapacityTask(workbench, cand, seed, search) for cand, seed in pairs if (cand.label, seed) not in done]
    ran = iter(run_tasks(_capacity_task, tasks, f"{workbench.name}: capacity of {len(candidates)} policies", workers))
    found = [done[(cand.label, seed)] if (cand.label, seed) in done else next(ran) for cand, seed in pairs]
    results: dict[str, CapacityResult] = {}
    for index, candidate in enumerate(candidates):
        per_seed = found[index * len(seeds) : (index + 1) * len(seeds)]
        results[candidate.label] = CapacityResult(candidate, _spreads(per_seed), tuple(per_seed))
    return results


def _spreads(searches: Sequence[SteadyCapacity], targets: Sequence[float] = TARGETS) -> dict[float, Spread]:
    return {target: Spread.of([search.capacity[target] for search in searches]) for target in targets}


def convergence(
    workbench: Workbench, results: Sequence[CapacityResult], seeds: Sequence[int], workers: int = 2
) -> None:
    """Fill ``capacity_4x`` of each result (the 90% target, the one ``steady_state`` reads): every seed's
    search again at 4x the job count it ended with, in a narrow bracket around its capacity that widens only
    where it does not hold (``steady.long_search``; same seeds, so the only change is the run length)."""
    tasks = [
        _CapacityTask(workbench, result.candidate, seed, long_search(base, SteadySearch(guess=1.0)))
        for result in results
        for seed, base in zip(seeds, result.searches, strict=True)
    ]
    found = run_tasks(_capacity_task, tasks, f"{workbench.name}: capacity at 4x the run length", workers)
    for index, result in enumerate(results):
        result.capacity_4x = _spreads(found[index * len(seeds) : (index + 1) * len(seeds)], TARGETS[:1])


def baseline_candidates(plan: BaselinePlan, best_budget: int | None, best_cap: int | None) -> list[Candidate]:
    """Step 1 (both ``best_*`` None: the engine sweep) or step 2 (every router with the best engine settings;
    one of them None: with the other only)."""
    if best_budget is None and best_cap is None:
        policy = f"{REFERENCE_ROUTER}+chunked-fcfs"
        sweep = [Candidate.of(policy, {"token_budget": budget}) for budget in plan.token_budgets]
        capped = f"{REFERENCE_ROUTER}+static-concurrency"
        return sweep + [Candidate.of(capped, {"cap": cap}) for cap in plan.caps]
    routers = [router for router in plan.routers if router != REFERENCE_ROUTER]
    budgets = [] if best_budget is None else [best_budget]
    caps = [] if best_cap is None else [best_cap]
    return [Candidate.of(f"{router}+chunked-fcfs", {"token_budget": b}) for b in budgets for router in routers] + [
        Candidate.of(f"{router}+static-concurrency", {"cap": cap}) for cap in caps for router in routers
    ]


def evaluate(
    workbench: Workbench,
    seeds: Sequence[int],
    others: Sequence[Candidate] = (),
    plan: BaselinePlan | None = None,
    guess: float = 1.0,
    loads: Sequence[float] = LOADS,
    overload_labels: Sequence[str] = (),
    workers: int = 2,
    converge_labels: Sequence[str] | None = None,
    presized: bool = False,
) -> Scoreboard:
    """The whole scoreboard of one workbench. ``others``: paper policies, their ablations, oracles and the
    paper's baselines (never chosen as the strongest baseline). ``overload_labels``: which of ``others``
    get the overload figures beside the strongest baseline (default: all of them). ``converge_labels``:
    which of ``others`` get the capacity at 4x the run length beside the strongest baseline (default: the
    first of ``others``, the paper policy). ``presized`` (quick forms): every search after the pilot starts
    at the job count the pilot's capacity needs, not at the floor (``steady.py``)."""
    plan = plan or BaselinePlan()
    board = Scoreboard(workbench.name, workbench.num_jobs, tuple(seeds), workbench.truth)
    sweep = baseline_candidates(plan, None, None)
    pilot = next(iter(capacities(workbench, sweep[:1], seeds[:1], guess, workers).values()))
    guess = max(pilot.median_90, 1e-3)
    # Presized (quick): the pilot is the first candidate's search on the first seed, taken as it is.
    known = {(pilot.candidate.label, seeds[0]): pilot.searches[0]} if presized else {}
    board.baselines = capacities(workbench, sweep, seeds, guess, workers, presized, known)
    best_budget, best_cap = _best_settings(board, plan)
    board.baselines.update(
        capacities(workbench, baseline_candidates(plan, best_budget, best_cap), seeds, guess, workers, presized)
    )
    board.strongest = max(board.baselines, key=lambda label: board.baselines[label].median_90)
    board.others = capacities(workbench, others, seeds, guess, workers, presized) if others else {}
    labels = [others[0].label] if converge_labels is None and others else list(converge_labels or ())
    every_result = {**board.baselines, **board.others}
    convergence(workbench, [every_result[label] for label in dict.fromkeys([*labels, board.strongest])], seeds, workers)
    chosen = list(overload_labels) if overload_labels else [candidate.label for candidate in others]
    every = overload(workbench, board, [*chosen, *board.baselines], seeds, loads, workers)
    board.overload = {label: every[label] for label in [board.strongest, *chosen] if label in every}
    board.overload_baselines = {label: every[label] for label in board.baselines if label in every}
    return board


def _finite_or_minus(value: float) -> float:
    return value if math.isfinite(value) else -math.inf


def _best_settings(board: Scoreboard, plan: BaselinePlan) -> tuple[int | None, int | None]:
    """(best token budget, best cap) of the engine sweep; with ``plan.best_engine_only`` the weaker of the
    two (behind the reference router) is None, so step 2 runs the routers with the stronger one only."""
    budget = _best_param(board, plan.token_budgets, "chunked-fcfs", "token_budget")
    cap = _best_param(board, plan.caps, "static-concurrency", "cap")
    if not plan.best_engine_only:
        return budget, cap
    chunked = Candidate.of(f"{REFERENCE_ROUTER}+chunked-fcfs", {"token_budget": budget}).label
    capped = Candidate.of(f"{REFERENCE_ROUTER}+static-concurrency", {"cap": cap}).label
    return (budget, None) if board.capacity_of(chunked) >= board.capacity_of(capped) else (None, cap)


def _best_param(board: Scoreboard, values: Sequence[int], engine: str, key: str) -> int:
    def capacity(value: int) -> float:
        label = Candidate.of(f"{REFERENCE_ROUTER}+{engine}", {key: value}).label
        return board.baselines[label].median_90

    return max(values, key=capacity)


def overload(
    workbench: Workbench,
    board: Scoreboard,
    labels: Sequence[str],
    seeds: Sequence[int],
    loads: Sequence[float],
    workers: int = 2,
) -> dict[str, dict[float, tuple[Spread, Spread]]]:
    """(attainment, goodput) spreads at ``loads`` x the strongest baseline's capacity."""
    every = {**board.baselines, **board.others}
    chosen = [board.strongest, *dict.fromkeys(label for label in labels if label != board.strongest)]
    base_rate = board.capacity_of(board.strongest)
    if not base_rate > 0:
        return {}
    # Each seed's runs at every load replay one job count: what the highest load needs (common random numbers).
    sized = {seed: workbench.sized(steady_jobs(workbench, seed, max(loads) * base_rate)) for seed in seeds}
    tasks = [
        _RunTask(sized[seed], every[label].candidate, load * base_rate, seed)
        for label in chosen
        for load in loads
        for seed in seeds
    ]
    figures = run_tasks(_run_task, tasks, f"{workbench.name}: overload runs", workers)
    out: dict[str, dict[float, tuple[Spread, Spread]]] = {}
    position = 0
    for label in chosen:
        out[label] = {}
        for load in loads:
            runs = figures[position : position + len(seeds)]
            position += len(seeds)
            out[label][load] = (
                Spread.of([run.attainment for run in runs]),
                Spread.of([run.goodput_jobs_per_s for run in runs]),
            )
    return out


def cold_start(workbench: Workbench, candidates: Sequence[Candidate], seeds: Sequence[int], guess: float) -> Scoreboard:
    """The same capacities with no warm-up prefix (learned state starts cold): its own table."""
    cold = replace(workbench, name=f"{workbench.name} (cold start)", num_warmup_jobs=0)
    board = Scoreboard(cold.name, cold.num_jobs, tuple(seeds), cold.truth)
    board.others = capacities(cold, candidates, seeds, guess)
    return board
