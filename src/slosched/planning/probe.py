"""One question the fleet searches ask over and over: does this cluster carry ``rate`` at ``target`` on this
seed? And over seeds: does it carry the rate?

- **One run per (cluster, seed, rate)**, sized by the steady-state rule at that rate
  (``evaluation/steady.steady_jobs``: an arrival window of at least 20 x the p90 no-contention latency, and
  the workbench's own floor), with its warm-up prefix and leak-free deadlines (``Workbench``). The count
  search and the capacity search of a fleet both ask through ``probe``, so the run that says a fleet carries
  ``R`` is the very run the fleet's capacity search holds at ``R``.
- **Cut short when decided.** A run the cluster cannot carry builds a backlog, and simulating its drain costs
  far more than the run itself (one A100 at 10 jobs/s: 0.25 of the window in 7 s, the whole run in 344 s). So
  the run first goes to a horizon (``CUTS``, shares of the measured arrival window). A simulation stopped at
  a horizon is the whole run's prefix: a job finished by then ended as it does in the whole run, and a job
  not finished by then whose deadline had passed misses it there too. Those definite misses bound the whole
  run's attainment from above; a bound under the target fails the run, exactly. Otherwise, if the misses
  so far look like a passing run's, the run goes whole; if not, to the next horizon.
- **Over seeds** a cluster carries the rate when more than half of the seeds pass (``seeds_needed``):
  then its median capacity over seeds is at least the rate (each of those seeds' capacity search holds a
  passing run at the rate), which a median of attainments (two seeds: their mean) does not promise. Seeds
  run in order and stop as soon as the verdict is decided; the figure shown is the lower median of the runs
  made, at or above the target exactly when the cluster carries the rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from slosched.core.records import RunResult
from slosched.core.request import Outcome
from slosched.evaluation.judgement import widest_allowance
from slosched.evaluation.steady import steady_jobs
from slosched.evaluation.workbench import WARMUP_PREFIX, Candidate, Workbench, measure
from slosched.metrics.summary import token_slo_missed_jobs

# Horizons tried before a whole run, as shares of the measured jobs' arrival window.
CUTS = (0.25, 0.5, 1.0)


@dataclass(slots=True, frozen=True)
class Probe:
    """One run's judged attainment (``RunFigures.judged``); ``exact`` False: an upper bound under the target
    from a run cut short once its misses decided it."""

    value: float
    exact: bool = True

    def passes(self, target: float) -> bool:
        return self.value >= target


def probe(bench: Workbench, candidate: Candidate, seed: int, rate: float, target: float) -> Probe:
    """Whether ``bench``'s cluster carries ``rate`` on ``seed``: the steady-sized run, cut short where its
    definite misses already put it under ``target`` (module docstring)."""
    sized = bench.sized(steady_jobs(bench, seed, rate))
    jobs, history = sized.workload(rate, seed)
    arrivals = [job.arrival_s for job in jobs if not job.id.startswith(WARMUP_PREFIX)]
    first, last = (min(arrivals), max(arrivals)) if arrivals else (0.0, 0.0)
    for share in CUTS if arrivals else ():
        # Never past the scenario's own horizon: the cut must be a prefix of the run it stands for.
        horizon = min(first + share * (last - first), sized.options.horizon_s)
        options = replace(sized.options, horizon_s=horizon)
        bound, looks_passing = miss_bound(
            sized.run_fn(candidate, sized.instances, jobs, options, seed, history), horizon, target
        )
        if bound < target:
            return Probe(bound, exact=False)
        if looks_passing:  # its misses so far are a passing run's: the whole run, no further cut
            break
    whole = sized.run_fn(candidate, sized.instances, jobs, sized.options, seed, history)
    return Probe(measure(whole, rate, seed).judged)


def miss_bound(result: RunResult, horizon_s: float, target: float) -> tuple[float, bool]:
    """An upper bound on the judged attainment of the whole run whose prefix to ``horizon_s`` is ``result``
    (every measured job not known to miss counted as meeting its SLO, over all measured jobs and over the
    second half of the window with its widest allowance: ``evaluation/judgement.py``), and whether the misses
    among the jobs already decided stay within ``1 - target`` (a passing run's look: not worth a later
    horizon)."""
    missed_tokens = token_slo_missed_jobs(result.requests)
    misses: list[tuple[float, bool]] = []  # (arrival, definitely missed) per measured job
    decided = 0
    for job in result.jobs:
        if job.id.startswith(WARMUP_PREFIX):
            continue
        if job.outcome is Outcome.COMPLETED:
            decided += 1
            misses.append((job.arrival_s, not job.deadline_met or job.id in missed_tokens))
        else:  # not finished by the horizon (or failed before it): a miss once its deadline has passed
            late = job.arrival_s + job.slo_s < horizon_s
            decided += late
            misses.append((job.arrival_s, late))
    if not misses:
        return 0.0, False
    first, last = min(a for a, _ in misses), max(a for a, _ in misses)
    middle = first + (last - first) / 2
    half = [missed for arrival, missed in misses if arrival >= middle]
    missed = sum(missed for _, missed in misses)
    # The second half is judged up to its sampling error at the whole run's attainment, not known yet: the
    # widest allowance keeps the bound a bound.
    second_half_bound = 1.0 - sum(half) / len(half) + widest_allowance(len(half)) if half else 1.0
    bound = min(1.0 - missed / len(misses), second_half_bound)
    return bound, missed <= (1.0 - target) * max(1, decided)


def seeds_needed(num_seeds: int) -> int:
    """Passing seeds a cluster needs to carry a rate: more than half (two of two, two of three)."""
    return num_seeds // 2 + 1


def seeds_verdict(runs: Sequence[Probe], num_seeds: int, target: float) -> bool | None:
    """True (carries) or False once ``runs`` (the first seeds' probes) decide it, None while they do not."""
    passing = sum(run.passes(target) for run in runs)
    needed = seeds_needed(num_seeds)
    if passing >= needed:
        return True
    return False if len(runs) - passing > num_seeds - needed else None


def lower_median(runs: Sequence[Probe]) -> Probe:
    """The runs' lower median: at or above the target exactly when more than half of them pass (with all the
    seeds run; with early-stopped seeds, when the verdict is to carry)."""
    ordered = sorted(runs, key=lambda run: run.value)
    return ordered[(len(ordered) - 1) // 2]


@dataclass(slots=True, frozen=True)
class SeedsProbe:
    """One cluster at one rate over seeds: its verdict and the figure shown for it."""

    carries: bool
    figure: Probe
    runs: tuple[Probe, ...]


def probe_seeds(bench: Workbench, candidate: Candidate, seeds: Sequence[int], rate: float, target: float) -> SeedsProbe:
    """``probe`` over ``seeds`` in order, stopping once the verdict is decided."""
    runs: list[Probe] = []
    for seed in seeds:
        runs.append(probe(bench, candidate, seed, rate, target))
        verdict = seeds_verdict(runs, len(seeds), target)
        if verdict is not None:
            return SeedsProbe(verdict, lower_median(runs), tuple(runs))
    raise AssertionError("every seed run leaves no verdict undecided")  # pragma: no cover
