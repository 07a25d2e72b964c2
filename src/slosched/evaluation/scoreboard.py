"""The scoreboard: every paper policy against the strongest baseline users run today (DESIGN section 9).

For one ``Workbench`` (a workload on a cluster):

1-2. **The baseline search** (``baseline_plan.py``, in rounds): ``chunked-fcfs`` with each static token
   budget and ``static-concurrency`` with each static max concurrency behind the reference router
   ``least-tokens`` (walked past the grid's edge where the best lies on it), then every baseline router
   (``least-loaded``, ``power-of-two``, ``cache-aware``, ``predicted-latency``, ``prism``) with the best
   budget and the best cap, then every router-engine row near the best over its engine's settings.
3. **The strongest baseline** is the candidate of steps 1-2 with the highest median SLO capacity. Steps 1-2
   are screened (``screening.py``): every baseline is searched on the first seed, the contenders on all.
4. **Paper policies** (and labelled oracles, and the paper's own baseline) get their SLO capacity too.
5. **Overload**: attainment and goodput of the paper policies, the paper's baseline and every baseline at
   fixed multiples (0.5x-2x) of the strongest baseline's capacity (the baselines screened the same way); at
   each load the strongest baseline *at that load* (highest goodput) is chosen after the fact too.
6. **Convergence**: the paper policy (or the stack) and the strongest baseline are searched again at 4x the
   run length on the same seeds (``capacity_4x``; ``steady_state`` where the two agree within 5%).

SLO capacity = the highest rate at which >= 90% (and 95%) of jobs meet their SLO, to 2%, per seed, in
steady state (``steady.py``: runs sized to the workload, judged on all jobs and on the second half of the
window); the figure is the median over seeds with the min-max spread. Runs spread over local worker processes.
What it finds (``Scoreboard``, ``CapacityResult``, their JSON with the serving figures of every run at a
load) is ``board.py``'s; each finished scoreboard is a finished row of the bench (``rows.py``), kept on Ctrl-C.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from slosched.evaluation.baseline_plan import BASELINE_ROUNDS, BaselinePlan, baseline_candidates
from slosched.evaluation.board import TARGETS, CapacityResult, Checkpoint, Scoreboard
from slosched.evaluation.capacity import Spread
from slosched.evaluation.overload import others_overload
from slosched.evaluation.rows import row_finished
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.screening import contenders
from slosched.evaluation.steady import SteadyCapacity, SteadySearch, long_search, steady_capacity
from slosched.evaluation.workbench import Candidate, Workbench

SCOREBOARD_API_READY = True

LOADS = (0.5, 1.0, 1.5, 2.0)
PRESIZED_GROWTH = 1.25  # first bracket step of a presized search (the step regrown rounds take too)


@dataclass(slots=True, frozen=True)
class _CapacityTask:
    workbench: Workbench
    candidate: Candidate
    seed: int
    search: SteadySearch


def _capacity_task(task: _CapacityTask) -> SteadyCapacity:
    # The 95% search starts from the points of the 90% one: its capacity is at most the 90% capacity.
    return steady_capacity(task.workbench, task.candidate, task.seed, task.search)


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
    resume: Scoreboard | None = None,
    checkpoint: Checkpoint | None = None,
) -> Scoreboard:
    """The whole scoreboard of one workbench. ``others``: paper policies, their ablations, oracles and the
    paper's baselines (never chosen as the strongest baseline). ``overload_labels``: which of ``others``
    get the overload figures beside the strongest baseline (default: all of them). ``converge_labels``:
    which of ``others`` get the capacity at 4x the run length beside the strongest baseline (default: the
    first of ``others``, the paper policy). ``presized`` (quick forms): every search after the pilot starts
    at the job count the pilot's capacity needs, not at the floor (``steady.py``). ``checkpoint`` is handed the
    board after each step (each baseline round's searches, the others' capacities, their 4x runs), and a board
    it was handed is a ``resume``: the measurement goes on from the step after it, to the board an
    uninterrupted one gives (the screen's bar is the best first-seed capacity of the baselines it holds)."""
    plan = plan or BaselinePlan()
    board = resume or Scoreboard(workbench.name, workbench.num_jobs, tuple(seeds), workbench.truth)
    guess, known = pilot(workbench, plan, seeds, guess, workers, presized)
    bar = max((result.searches[0].capacity[TARGETS[0]] for result in board.baselines.values()), default=0.0)
    screen = Screen(workbench, seeds, guess, workers, presized, bar, list(board.screened_out))
    measure_baselines(screen, board, plan, known, checkpoint)
    measure_others(
        workbench,
        board,
        others,
        guess,
        loads,
        overload_labels,
        workers,
        converge_labels,
        presized,
        checkpoint=checkpoint,
        keep_measured=resume is not None,
    )
    return board


def measure_baselines(
    screen: Screen,
    board: Scoreboard,
    plan: BaselinePlan,
    known: Mapping[tuple[str, int], SteadyCapacity] | None = None,
    checkpoint: Checkpoint | None = None,
) -> list[str]:
    """Each round of the baseline search (``baseline_plan.BASELINE_ROUNDS``) on what the board lacks, screened
    by ``screen``; then the strongest baseline. Returns the labels measured (on a board saved before a round
    existed: that round's). ``checkpoint``: handed the board after each round's searches."""
    added: list[str] = []
    for run in BASELINE_ROUNDS:
        # Each round until it asks for nothing new: a step past a grid's edge that is the best asks for the next.
        while new := [candidate for candidate in run(board, plan) if candidate.label not in board.baselines]:
            board.baselines.update(screen.capacities(new, known))
            added += [candidate.label for candidate in new]
            board.screened_out += [label for label in screen.screened_out if label not in board.screened_out]
            if checkpoint:
                checkpoint(board)
    full = [label for label in board.baselines if label not in board.screened_out]
    board.strongest = max(full, key=lambda label: board.baselines[label].median_90)
    return added


def pilot(
    workbench: Workbench,
    plan: BaselinePlan,
    seeds: Sequence[int],
    guess: float,
    workers: int = 2,
    presized: bool = False,
) -> tuple[float, dict[tuple[str, int], SteadyCapacity]]:
    """The guess every later search starts from: the first sweep candidate's capacity on the first seed,
    searched from ``guess``; and, presized (quick), that search by (label, seed), taken as it is."""
    first = baseline_candidates(plan, None, None)[:1]
    found = next(iter(capacities(workbench, first, seeds[:1], guess, workers).values()))
    known = {(found.candidate.label, seeds[0]): found.searches[0]} if presized else {}
    return max(found.median_90, 1e-3), known


def measure_others(
    workbench: Workbench,
    board: Scoreboard,
    others: Sequence[Candidate],
    guess: float,
    loads: Sequence[float] = LOADS,
    overload_labels: Sequence[str] = (),
    workers: int = 2,
    converge_labels: Sequence[str] | None = None,
    presized: bool = False,
    keep_baseline_runs: bool = False,
    checkpoint: Checkpoint | None = None,
    keep_measured: bool = False,
) -> None:
    """Steps 4-6 on a board whose baselines are measured: ``others``' capacities (searched from the pilot's
    ``guess``), the convergence runs of those lacking them, and every overload run, replacing what the board
    held of them (``evaluate``; a saved board whose own policies changed is measured again this way).
    ``keep_baseline_runs``: the baselines' overload runs the board holds are kept (``others_overload``);
    ``keep_measured``: so are ``others``' capacities where it holds them all (a resumed ``evaluate``);
    ``checkpoint``: handed the board after the capacities, after the 4x runs and during the overload runs."""
    seeds = board.seeds
    if not (keep_measured and all(candidate.label in board.others for candidate in others)):
        board.others = capacities(workbench, others, seeds, guess, workers, presized) if others else {}
        if checkpoint:
            checkpoint(board)
    labels = [others[0].label] if converge_labels is None and others else list(converge_labels or ())
    every_result = {**board.baselines, **board.others}
    unconverged = [every_result[label] for label in dict.fromkeys([*labels, board.strongest])]
    lacking = [result for result in unconverged if not result.capacity_4x]
    convergence(workbench, lacking, seeds, workers)
    if checkpoint and lacking:
        checkpoint(board)
    chosen = list(overload_labels) if overload_labels else [candidate.label for candidate in others]
    others_overload(workbench, board, chosen, loads, workers, keep_baseline_runs, checkpoint)
    # A finished row: what an interrupted bench still shows (``evaluation/rows.py``).
    row_finished(board.workbench, board.as_json(others[0].label if others else None))


@dataclass(slots=True)
class Screen:
    """The baseline steps' searches, screened (``screening.py``): every candidate on the first seed, the
    contenders on the others; ``bar``: the best first-seed capacity of the steps so far."""

    workbench: Workbench
    seeds: Sequence[int]
    guess: float
    workers: int
    presized: bool
    bar: float = 0.0
    screened_out: list[str] = field(default_factory=list)

    def capacities(
        self, candidates: Sequence[Candidate], known: Mapping[tuple[str, int], SteadyCapacity] | None = None
    ) -> dict[str, CapacityResult]:
        seeds, done = self.seeds, dict(known or {})
        first = capacities(self.workbench, candidates, seeds[:1], self.guess, self.workers, self.presized, done)
        if len(seeds) == 1:
            return first
        figures = {label: result.median_90 for label, result in first.items()}
        kept = contenders(figures, self.bar)
        self.bar = max([self.bar, *figures.values()])
        self.screened_out += [label for label in first if label not in kept]
        done.update({(label, seeds[0]): first[label].searches[0] for label in kept})
        rest = [first[label].candidate for label in kept]
        full = capacities(self.workbench, rest, seeds, self.guess, self.workers, self.presized, done)
        return {label: full.get(label, result) for label, result in first.items()}


def unscreen(workbench: Workbench, board: Scoreboard, label: str, workers: int = 2) -> None:
    """Search a screened-out baseline on every seed after all: one a bench reports beside the strongest (SABER's
    paper baseline, the best static cap, is chosen among the swept baselines after the fact)."""
    if label not in board.screened_out:
        return
    result = board.baselines[label]
    known = {(label, board.seeds[0]): result.searches[0]}
    # Its own first-seed capacity is the guess: the other seeds' capacities lie near it.
    guess = max(result.median_90, 1e-3)
    board.baselines.update(capacities(workbench, [result.candidate], board.seeds, guess, workers, False, known))
    board.screened_out.remove(label)


def cold_start(workbench: Workbench, candidates: Sequence[Candidate], seeds: Sequence[int], guess: float) -> Scoreboard:
    """The same capacities with no warm-up prefix (learned state starts cold): its own table."""
    cold = replace(workbench, name=f"{workbench.name} (cold start)", num_warmup_jobs=0)
    board = Scoreboard(cold.name, cold.num_jobs, tuple(seeds), cold.truth)
    board.others = capacities(cold, candidates, seeds, guess)
    return board
