"""Steady-state SLO capacity (DESIGN section 9): a rate counts as carried only when the run was long enough
for a backlog to show.

A run of ``n`` jobs at ``rate`` jobs/s spans an arrival window of about ``n / rate`` seconds. If that window
is short against how long a job takes, the cluster clears the whole run as one burst and a "capacity" far
above what it sustains passes. So:

- **Sizing** (``sizing.py``). A run's arrival window must be at least ``WINDOW_FACTOR`` (20) x the p90 no-contention job
  latency of the workload on the cluster's fastest instance (its ground-truth model; for a workflow, the
  critical path through its stages: ``sim/deadlines.FastestLatency``). At ``rate`` that needs
  ``jobs_needed = max(floor, ceil(20 x p90 x rate) + 1)`` measured jobs, ``floor`` being the bench's own
  job count; where the workbench has the work rule on (full forms), also at least the jobs that rule asks
  (enough that the tokens of the measured jobs fluctuate by at most 5%: ``sizing.work_jobs``, from the
  floor's jobs of the seed). A rule that asks for more than the floor regrows the count as the time rule does.
- **One job count per search.** Common random numbers need every rate of a search to replay the same jobs,
  so a search runs at one count. After it, if the capacity it found needs more jobs than it used, the
  count grows to what that capacity needs (x ``GROWTH_MARGIN``, at most ``MAX_STEP`` x per round) and the
  search runs again, from the capacity found; at most ``MAX_ROUNDS`` searches and ``MAX_JOBS`` jobs
  (``SteadyCapacity.sized`` says whether the last one was long enough).
- **Sizing pass.** Each round first searches the loosest target alone, to ``SIZING_PRECISION`` (10%). If
  the capacity it finds needs more jobs than the round ran, the round is discarded and the count regrows
  at once: neither the full precision nor the stricter targets of a discarded round are ever read. A round
  long enough goes on bisecting from the bracket the pass left, to the full precision, and searches the
  other targets; its probes are the ones an uninterrupted search would have made. The last round allowed
  (``MAX_ROUNDS``, ``MAX_JOBS``, a trace run out) searches in full at once.
- **Second-half judgement.** A rate passes only if both the attainment over all measured jobs and the
  attainment over the jobs arriving in the second half of the window meet the target, the second half up
  to its sampling error (``RunFigures.judged``, ``judgement.py``): a backlog that grows through the run
  shows in its second half, chance in so few jobs does not fail a rate.
- **Convergence.** ``converged`` compares a capacity with the capacity at 4x the run length (same seeds):
  within ``STEADY_TOLERANCE`` (5%) it counts as steady. The 4x search (``long_search``) starts from a
  narrow bracket around the capacity found (``LONG_GROWTH``), widening only where it does not hold, and
  searches the loosest target only (the one the check and ``capacity_4x`` read).
- **Presized start** (``SteadySearch.presized``, the quick bench form): where the guess is already a sized
  capacity of a similar policy (the pilot's), the first round runs at the job count the guess needs (x
  ``GROWTH_MARGIN``) instead of the floor; its first, short rounds would only find a burst capacity the next
  rounds discard. The end is the same rule: the last search's runs are as long as its capacity needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from slosched.evaluation.capacity import find_capacity
from slosched.evaluation.sizing import jobs_needed, p90_no_contention_s
from slosched.evaluation.workbench import Candidate, RunFigures, Workbench
from slosched.metrics.serving import ServingStats

GROWTH_MARGIN = 1.25
MAX_ROUNDS = 4
MAX_STEP = 4
MAX_JOBS = 20_000
STEADY_TOLERANCE = 0.05
# A round's sizing pass bisects the loosest target to 10%: enough to tell whether the round's count is long
# enough (the count has a GROWTH_MARGIN of 25% over what the capacity needs).
SIZING_PRECISION = 0.10
LONG_FACTOR = 4  # the convergence figure: capacity at this many times the run length
# The 4x search's first bracket step: the check only asks whether the 4x capacity lies within 5% of the
# capacity found, so [c, 1.1c] or [c/1.1, c] holds it wherever the answer is "steady"; three bisection probes
# take that bracket to the 2% precision of every capacity (the same figure an unbracketed search finds).
LONG_GROWTH = 1.1
TARGETS = (0.90, 0.95)


def converged(capacity: float, capacity_long: float, tolerance: float = STEADY_TOLERANCE) -> bool:
    """Whether a capacity and its value at 4x the run length agree within ``tolerance`` (relative to the
    longer run's, the better estimate of the steady state); False where either is not a positive number."""
    if not (math.isfinite(capacity) and math.isfinite(capacity_long)) or capacity <= 0 or capacity_long <= 0:
        return False
    return abs(capacity - capacity_long) <= tolerance * capacity_long


@dataclass(slots=True)
class SteadyCapacity:
    """One seed's steady-state capacity search."""

    capacity: dict[float, float]  # target -> jobs/s
    num_jobs: int  # measured jobs per run of the last search
    needed_jobs: int  # what the window rule needs at the loosest target's capacity
    available_jobs: int  # jobs the workload could give (a trace may hold fewer than asked for)
    p90_latency_s: float
    rounds: int
    attainment: tuple[float, float] = (math.nan, math.nan)  # (all, second half) at the loosest capacity
    judged: float = math.nan  # what the search compared with its target there (``RunFigures.judged``)
    serving: ServingStats | None = None  # the run at the loosest capacity, in vLLM's serving terms
    tuned: tuple[tuple[str, Any], ...] = ()  # the self-tuned stack block of that run (``RunFigures.tuned``)

    @property
    def sized(self) -> bool:
        """The last search's runs were as long as the capacity it found needs (and the workload had them)."""
        return self.needed_jobs <= self.num_jobs and self.available_jobs >= self.num_jobs


@dataclass(slots=True, frozen=True)
class SteadySearch:
    """How a steady-state search runs: targets, precision, its first guess and bracket step, its floor."""

    guess: float
    targets: tuple[float, ...] = TARGETS
    precision: float = 0.02
    growth: float = 2.0
    floor: int | None = None  # default: the workbench's own job count
    widen: bool = False  # square the bracket step while it does not hold (``find_capacity``)
    presized: bool = False  # first round at the job count ``guess`` needs (module docstring)
    sizing_precision: float = SIZING_PRECISION  # the sizing pass's (module docstring); <= precision: none


@dataclass(slots=True)
class _Round:
    """One round of a steady search: runs of one job count, and the attainment each rate gave."""

    bench: Workbench
    candidate: Candidate
    seed: int
    guess: float
    growth: float
    widen: bool = False
    runs: dict[float, RunFigures] = field(default_factory=dict)
    points: dict[float, float] = field(default_factory=dict)  # rate -> judged attainment (``find_capacity``)

    def attainment(self, rate: float) -> float:
        self.runs[rate] = self.bench.run(self.candidate, rate, self.seed)
        return self.runs[rate].judged

    def capacity(self, target: float, precision: float) -> float:
        """``target``'s capacity to ``precision``, reusing every point this round has measured."""
        return find_capacity(self.attainment, target, self.guess, precision, self.points, self.growth, self.widen)


def steady_capacity(workbench: Workbench, candidate: Candidate, seed: int, search: SteadySearch) -> SteadyCapacity:
    """The capacity of ``candidate`` on ``workbench`` at each target for ``seed``, with runs sized by the
    window rule and regrown (bounded) until they are long enough for the capacity found."""
    floor = search.floor or workbench.num_jobs
    sample = workbench.jobs(floor, seed)
    p90, work = p90_no_contention_s(workbench.instances, sample), workbench.work_floor(sample)
    num_jobs, guess, rounds, available = floor, search.guess, 0, len(sample)
    if search.presized and jobs_needed(p90, guess, floor, work) > floor:
        # With the margin a regrowth takes: a capacity a little above the guess needs no second round. Still
        # bounded and regrown below: a guess above the capacity only makes the runs longer (the rule is a
        # minimum), one well below it gets a further round like any search.
        num_jobs = min(MAX_JOBS, math.ceil(jobs_needed(p90, guess, floor, work) * GROWTH_MARGIN))
        available = len(workbench.jobs(num_jobs, seed))
    ordered = sorted(search.targets)  # loosest first: a stricter search reuses its points
    while True:
        rounds += 1
        growth = search.growth if rounds == 1 else 1.25
        this = _Round(workbench.sized(num_jobs), candidate, seed, guess, growth, search.widen)
        last = rounds >= MAX_ROUNDS or num_jobs >= MAX_JOBS or available < num_jobs
        if not last and search.sizing_precision > search.precision:
            # The sizing pass: is this count long enough? A round that must regrow is discarded, so it
            # needs neither the full precision nor the stricter targets. A round that is long enough goes
            # on bisecting from the bracket the pass left (the same probes an uninterrupted search makes).
            loosest = this.capacity(ordered[0], search.sizing_precision)
            needed = jobs_needed(p90, loosest, floor, work)
            if needed > num_jobs:
                num_jobs, available, guess = _regrown(workbench, seed, num_jobs, needed, loosest, guess)
                continue
        found = {t: this.capacity(t, search.precision) for t in ordered}
        loosest = found[ordered[0]]
        needed = jobs_needed(p90, loosest, floor, work)
        if needed <= num_jobs or last:
            break
        num_jobs, available, guess = _regrown(workbench, seed, num_jobs, needed, loosest, guess)
    at = this.runs.get(loosest)
    return SteadyCapacity(
        capacity=found,
        num_jobs=num_jobs,
        needed_jobs=needed,
        available_jobs=available,
        p90_latency_s=p90,
        rounds=rounds,
        attainment=(at.attainment, at.attainment_second_half) if at else (math.nan, math.nan),
        judged=at.judged if at else math.nan,
        serving=at.serving if at else None,
        tuned=at.tuned if at else (),
    )


def _regrown(
    workbench: Workbench, seed: int, num_jobs: int, needed: int, capacity: float, guess: float
) -> tuple[int, int, float]:
    """The next round's (job count, jobs available, guess) after a round found ``capacity`` needing ``needed``.

    A short run's capacity is inflated (a burst cleared), so one round grows the count by at most MAX_STEP:
    the next search, longer, usually finds a lower capacity that needs fewer jobs."""
    grown = min(MAX_JOBS, MAX_STEP * num_jobs, math.ceil(needed * GROWTH_MARGIN))
    available = len(workbench.jobs(grown, seed))  # a trace may run out
    return grown, available, capacity if capacity > 0 else guess


def steady_jobs(workbench: Workbench, seed: int, rate: float) -> int:
    """Measured jobs a single run of ``workbench`` at ``rate`` needs (overload runs, fleet sizing)."""
    sample = workbench.jobs(workbench.num_jobs, seed)
    p90 = p90_no_contention_s(workbench.instances, sample)
    return min(MAX_JOBS, jobs_needed(p90, rate, workbench.num_jobs, workbench.work_floor(sample)))


def long_search(base: SteadyCapacity, search: SteadySearch) -> SteadySearch:
    """The convergence search of one seed: ``LONG_FACTOR`` x the job count ``base`` ended with, started at
    ``base``'s capacity with the narrow bracket ``LONG_GROWTH``, widened only where it does not hold.

    Only the loosest target is searched: ``converged`` and ``capacity_4x`` read that one alone, and a 4x run
    is the costliest run of the scoreboard. The precision stays ``search.precision``, so the figure is what
    an unbracketed search at 4x finds, to that precision; only the number of probes to reach it changes."""
    loosest = min(base.capacity)
    guess = base.capacity[loosest]
    return SteadySearch(
        guess=guess if guess > 0 else search.guess,
        targets=(loosest,),
        precision=search.precision,
        growth=LONG_GROWTH,
        floor=LONG_FACTOR * base.num_jobs,
        widen=True,
    )
