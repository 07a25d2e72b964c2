"""One workload on one cluster, run the scoreboard's way (DESIGN section 9).

A ``Workbench`` turns (candidate policy, arrival rate, seed) into the figures of one run:

- **Fixed size, common random numbers.** ``jobs(num_jobs, seed)`` gives the jobs at unit rate; every rate
  replays the same jobs with arrival times divided by the rate, so attainment falls with the rate and a
  capacity bisection is stable.
- **Warm learned state.** A discarded warm-up prefix (``num_warmup_jobs`` jobs of another seed, at the same
  rate, and at least 10x the workload's p90 no-contention latency of arrivals: ``sizing.py``) runs before
  the measured jobs: step-time models, output-length predictors, routers' learned state and prefix caches
  are warm, and the backlog a cold start builds has drained, when measurement starts.
  ``num_warmup_jobs=0`` is the cold-start experiment.
- **Leak-free deadlines.** Deadlines are learned from past traffic (the warm-up sample, which is another
  seed's jobs), from template statistics, input lengths and max_tokens; never from the measured jobs' true
  output lengths (``sim/deadlines.py``).
- **Goodput** counts SLO-meeting measured jobs per second of their arrival window.
- **Serving figures.** Each run also carries the measured requests' figures in vLLM's serving-benchmark terms
  (``metrics/serving.py``: token throughput, request goodput, TTFT / TPOT / ITL / end-to-end latency in ms),
  computed as ``slosched compare`` computes them, from the records the run has anyway.
- **Self-tuning.** A candidate with the ``SELF_TUNE`` extra (the ``slosched`` stack) tunes its parameter
  block before each run by replaying past traffic at the run's rate (``tuning/stack.py``): the history
  sample, which is another seed's jobs, never the measured ones; retuned when the rate moves by more than
  ``RETUNE_RATIO``; the cold start (no warm-up prefix: nothing served yet) keeps the defaults.
- **Steady state.** Attainment is judged on all measured jobs and on those arriving in the second half of
  the arrival window (after a backlog had time to form), the second half up to its sampling error
  (``judgement.py``); ``RunFigures.judged`` is what a search compares with its target, and a rate passes
  only where both pass (``evaluation/steady.py`` sizes the runs).

Everything here is picklable (``jobs`` and ``run`` must be module-level functions or ``functools.partial``
of them) so that runs spread over worker processes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.records import JobRecord, RunResult
from slosched.evaluation.judgement import judged_attainment
from slosched.evaluation.oracle import OracleOutputPredictor
from slosched.evaluation.sizing import p90_no_contention_s, prefix_jobs, warmup_for, work_jobs
from slosched.metrics.serving import ServingStats
from slosched.metrics.summary import serving_of, token_slo_missed_jobs
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams, simulate
from slosched.tuning.stack import MAX_WINDOW_JOBS, stack_name, tuned_params

WARMUP_PREFIX = "warmup-"
# A candidate extra: the stack tunes its own parameter block on the warm-up prefix before the measured jobs.
SELF_TUNE = "self_tune"
TUNE_PREFIX = "tune-"
RETUNE_RATIO = 1.1
HISTORY_SEED_OFFSET = 7919
HISTORY_FLOOR = 200  # jobs of past traffic at least, however short the warm-up prefix


@dataclass(slots=True, frozen=True)
class Candidate:
    """A policy as the scoreboard runs it: a ``ROUTER+ENGINE`` pair, its parameters and job policy.

    ``label`` names it in tables (``least-tokens+chunked-fcfs[token_budget=512]``); ``oracle`` marks a
    candidate that reads ground truth (an upper bound, never a baseline); ``extras`` carries what a bench's
    own ``run`` function needs (e.g. a tuned alpha).
    """

    label: str
    policy: str
    params: PolicyParams = field(default_factory=PolicyParams)
    job_policy: str = "deadline"
    oracle: bool = False
    extras: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, policy: str, engine_params: dict[str, Any] | None = None, **kwargs: Any) -> Candidate:
        """``Candidate.of("least-tokens+chunked-fcfs", {"token_budget": 512})``."""
        engine = PolicyPair.parse(policy).engine
        params = PolicyParams(engine={engine: engine_params}) if engine_params else PolicyParams()
        suffix = ",".join(f"{key}={value}" for key, value in (engine_params or {}).items())
        label = kwargs.pop("label", f"{policy}[{suffix}]" if suffix else policy)
        return cls(label=label, policy=policy, params=params, **kwargs)

    def extra(self, key: str, default: Any = None) -> Any:
        return dict(self.extras).get(key, default)


JobsFn = Callable[[int, int], list[JobSpec]]
RunFn = Callable[[Candidate, Sequence[InstanceSpec], Sequence[JobSpec], SimOptions, int, Sequence[JobSpec]], RunResult]


def simulate_candidate(
    candidate: Candidate,
    instances: Sequence[InstanceSpec],
    jobs: Sequence[JobSpec],
    options: SimOptions,
    seed: int,
    history: Sequence[JobSpec],
) -> RunResult:
    """The default ``RunFn``: the simulator with the candidate's pair, parameters and job policy; an ORACLE
    candidate gets the output predictor that reads true lengths (same seeding otherwise), so every bench
    measures its limit on the same path."""
    pair = PolicyPair.parse(candidate.policy)
    predictor = OracleOutputPredictor(jobs) if candidate.oracle else None
    return simulate(instances, jobs, pair, seed, options, candidate.params, candidate.job_policy, history, predictor)


@dataclass(slots=True, frozen=True)
class RunFigures:
    """One run's figures over its measured jobs (the warm-up prefix left out)."""

    rate: float
    seed: int
    num_jobs: int
    attainment: float
    goodput_jobs_per_s: float
    num_preemptions: int
    # Attainment of the measured jobs arriving in the second half of the arrival window (NaN: none), and
    # how many they are (its sampling error: ``judgement.py``).
    attainment_second_half: float = float("nan")
    num_jobs_second_half: int = 0
    # Attainment of the measured jobs arriving in the first eighth of the window: a start transient shows there.
    attainment_first_eighth: float = float("nan")
    # The measured requests in vLLM's serving-benchmark terms (None: figures made without the records).
    serving: ServingStats | None = None
    # Attainment of each tenant's measured jobs, by tenant name (one entry for a one-tenant workload).
    attainment_by_tenant: tuple[tuple[str, float], ...] = ()
    # The stack block a self-tuned candidate ran with (``SELF_TUNE``), knob -> value; empty otherwise.
    tuned: tuple[tuple[str, Any], ...] = ()

    @property
    def judged(self) -> float:
        """What a capacity search compares with its target: the attainment over all measured jobs, or over
        the second half of the window plus its sampling error where lower (a rate passes only where both
        pass: ``judgement.py``)."""
        if not self.num_jobs:
            return 0.0
        return judged_attainment(self.attainment, self.attainment_second_half, self.num_jobs_second_half)


@dataclass(slots=True, frozen=True)
class Workbench:
    """``jobs(num_jobs, seed)`` returns jobs with arrivals at rate 1.0 (any arrival process, rescaled)."""

    name: str
    instances: tuple[InstanceSpec, ...]
    jobs: JobsFn
    num_jobs: int
    options: SimOptions
    num_warmup_jobs: int = 0
    run_fn: RunFn = simulate_candidate
    # Past traffic the deadlines learn from, in jobs; 0: ``max(num_warmup_jobs, HISTORY_FLOOR)``. ``sized``
    # pins it, so a longer run of the same workload judges its jobs by the same deadlines.
    history_jobs: int = 0
    # False: the history follows each count (``planning``: ``compare`` at a count must reproduce the sweep's
    # run at that count, and it knows only the count).
    fixed_history: bool = True
    # The work rule's tolerance (``sizing.work_jobs``): every run of a steady-state search measures at least
    # the jobs it asks; None: off (quick forms, tests).
    work_tolerance: float | None = None

    @property
    def truth(self) -> tuple[str, ...]:
        """The software stack(s) the cluster's ground-truth step-time models describe."""
        return tuple(sorted({spec.stack for spec in self.instances}))

    def sized(self, num_jobs: int) -> Workbench:
        """The same workbench with ``num_jobs`` measured jobs per run (and at least a quarter as many warm-up
        jobs, so a longer run also starts from longer-learned state; none stays none: the cold start)."""
        if num_jobs == self.num_jobs:
            return self
        warmup = max(self.num_warmup_jobs, warmup_for(num_jobs)) if self.num_warmup_jobs else 0
        history = self.history_size if self.fixed_history else self.history_jobs
        return replace(self, num_jobs=num_jobs, num_warmup_jobs=warmup, history_jobs=history)

    def work_floor(self, jobs: Sequence[JobSpec]) -> int:
        """The measured jobs the work rule asks of runs of ``jobs``' workload (0 where it is off)."""
        return work_jobs(jobs, self.work_tolerance) if self.work_tolerance else 0

    @property
    def history_size(self) -> int:
        """Jobs of past traffic the deadlines learn from: a property of the workload, not of a run's length.
        Were it to grow with the warm-up prefix, a run 4x longer would get other deadlines for the same jobs
        (on mixed, 1-10% looser on average, up to 40% for some jobs) and the convergence check would compare
        two different SLOs rather than two run lengths."""
        return self.history_jobs or max(self.num_warmup_jobs, HISTORY_FLOOR)

    def workload(self, rate: float, seed: int, num_warmup: int | None = None) -> tuple[list[JobSpec], list[JobSpec]]:
        """(jobs to run: warm-up prefix + measured, history for the deadlines); ``num_warmup`` overrides the
        prefix's length (``bench warmup`` measures what it does), else the workbench's rule sets it."""
        history = self.jobs(self.history_size, seed + HISTORY_SEED_OFFSET)
        num_warmup = self.warmup_at(rate, history) if num_warmup is None else num_warmup
        # The warm-up prefix is the history's own jobs, or (a longer prefix) more of that stream.
        past = history if num_warmup <= len(history) else self.jobs(num_warmup, seed + HISTORY_SEED_OFFSET)
        warmup = [
            replace(job, id=f"{WARMUP_PREFIX}{job.id}", arrival_s=job.arrival_s / rate) for job in past[:num_warmup]
        ]
        # The measured jobs start one mean inter-arrival time after the last warm-up arrival.
        offset = (warmup[-1].arrival_s + 1.0 / rate) if warmup else 0.0
        measured = [replace(job, arrival_s=offset + job.arrival_s / rate) for job in self.jobs(self.num_jobs, seed)]
        return warmup + measured, history

    def warmup_at(self, rate: float, history: Sequence[JobSpec]) -> int:
        """Warm-up jobs of a run at ``rate``: ``num_warmup_jobs``, and at least the arrivals of the time a cold
        cluster takes to reach its steady state (``sizing.py``), scaled by ``history``'s p90 latency, up to the
        measured count."""
        return prefix_jobs(self.num_warmup_jobs, p90_no_contention_s(self.instances, history), rate, self.num_jobs)

    def warmup_count(self, rate: float, seed: int) -> int:
        """The warm-up jobs the run at ``rate`` on ``seed`` has (what a report states)."""
        return self.warmup_at(rate, self.jobs(self.history_size, seed + HISTORY_SEED_OFFSET))

    def run(self, candidate: Candidate, rate: float, seed: int, num_warmup: int | None = None) -> RunFigures:
        jobs, history = self.workload(rate, seed, num_warmup)
        tuned: tuple[tuple[str, Any], ...] = ()
        if candidate.extra(SELF_TUNE):
            candidate = self.self_tuned(candidate, rate, seed, history)
            if self.num_warmup_jobs:  # (a cold start runs the defaults: nothing was tuned)
                tuned = tuple(sorted(candidate.params.stack[stack_name(candidate.policy)].items()))
        result = self.run_fn(candidate, self.instances, jobs, self.options, seed, history)
        return replace(measure(result, rate, seed), tuned=tuned)

    def self_tuned(self, candidate: Candidate, rate: float, seed: int, history: Sequence[JobSpec]) -> Candidate:
        """``candidate`` with its stack block tuned on past traffic (see ``tuned_block``); with no warm-up
        prefix (the cold start: nothing served yet) it keeps its settings."""
        plain = replace(candidate, extras=tuple(item for item in candidate.extras if item[0] != SELF_TUNE))
        if not self.num_warmup_jobs:
            return plain
        name = stack_name(plain.policy)
        block = tuned_block(self, plain, rate_bucket(rate), seed, history)
        return replace(plain, params=replace(plain.params, stack={**plain.params.stack, name: block}))


def rate_bucket(rate: float) -> int:
    """The bucket ``rate`` falls in: buckets are ``RETUNE_RATIO`` apart, so the stack retunes when the
    arrival rate has moved by more than that from the rate it was tuned at (and a capacity search, whose
    probes close in on one rate, retunes a few times, not at every probe)."""
    return round(math.log(rate) / math.log(RETUNE_RATIO))


def tuned_block(
    workbench: Workbench, candidate: Candidate, bucket: int, seed: int, history: Sequence[JobSpec]
) -> dict[str, Any]:
    """The stack block tuned on past traffic at the bucket's rate: the first ``MAX_WINDOW_JOBS`` jobs of the
    history sample (another seed's jobs, which the deadlines learn from and the warm-up prefix is drawn
    from), never the measured jobs. Memoised per process on everything the answer depends on."""
    params, policy, job_policy = candidate.params, candidate.policy, candidate.job_policy
    key: tuple[Any, ...] = (workbench.name, workbench.instances, workbench.options, bucket, seed, len(history))
    key += (policy, job_policy, repr(params.stack))
    cached = _TUNED.get(key)
    if cached is None:
        rate = RETUNE_RATIO**bucket
        window = [
            replace(job, id=f"{TUNE_PREFIX}{job.id}", arrival_s=job.arrival_s / rate)
            for job in history[:MAX_WINDOW_JOBS]
        ]
        tuned, _ = tuned_params(
            params, workbench.instances, window, workbench.options, seed, history, policy, job_policy
        )
        cached = _TUNED[key] = dict(tuned.stack[stack_name(policy)])
    return cached


_TUNED: dict[tuple[Any, ...], dict[str, Any]] = {}


def measured_only(result: RunResult) -> RunResult:
    """``result`` without its warm-up prefix (its jobs and their requests): what a summary should count."""
    return replace(
        result,
        jobs=[job for job in result.jobs if not job.id.startswith(WARMUP_PREFIX)],
        requests=[request for request in result.requests if not request.job_id.startswith(WARMUP_PREFIX)],
    )


def measure(result: RunResult, rate: float, seed: int) -> RunFigures:
    """Attainment (all measured jobs, and those arriving in the second half of the window), goodput and the
    serving figures of the measured jobs of ``result`` (the warm-up prefix is discarded)."""
    measured = [job for job in result.jobs if not job.id.startswith(WARMUP_PREFIX)]
    missed_tokens = token_slo_missed_jobs(result.requests)
    met = [(job.arrival_s, job.deadline_met and job.id not in missed_tokens) for job in measured]
    num_met = sum(1 for _, ok in met if ok)
    first, last = (min(a for a, _ in met), max(a for a, _ in met)) if met else (0.0, 0.0)
    window = last - first
    return RunFigures(
        rate=rate,
        seed=seed,
        num_jobs=len(measured),
        attainment=num_met / len(measured) if measured else 0.0,
        goodput_jobs_per_s=num_met / window if window > 0 else float("nan"),
        num_preemptions=sum(stats.num_preemptions for stats in result.instances),
        attainment_second_half=second_half_attainment(met, first + window / 2),
        num_jobs_second_half=sum(1 for arrival, _ in met if arrival >= first + window / 2),
        attainment_first_eighth=window_attainment(met, first, first + window / 8),
        serving=serving_of(measured_only(result)),
        attainment_by_tenant=tenant_attainment(measured, [ok for _, ok in met]),
    )


def tenant_attainment(jobs: Sequence[JobRecord], met: Sequence[bool]) -> tuple[tuple[str, float], ...]:
    """Each tenant's share of its jobs that met their SLO (``met`` in the order of ``jobs``), by tenant name."""
    counts: dict[str, list[int]] = {}
    for job, ok in zip(jobs, met, strict=True):
        tally = counts.setdefault(job.tenant, [0, 0])
        tally[0] += ok
        tally[1] += 1
    return tuple((tenant, hits / total) for tenant, (hits, total) in sorted(counts.items()))


def window_attainment(met: Sequence[tuple[float, bool]], start: float, end: float) -> float:
    """The share of ``(arrival_s, met)`` pairs arriving in ``[start, end)`` that met their SLO (NaN: none)."""
    inside = [ok for arrival, ok in met if start <= arrival < end]
    return sum(inside) / len(inside) if inside else float("nan")


def second_half_attainment(met: Sequence[tuple[float, bool]], middle: float) -> float:
    """The share of ``(arrival_s, met)`` pairs arriving at or after ``middle`` that met their SLO (NaN: none)."""
    late = [ok for arrival, ok in met if arrival >= middle]
    return sum(late) / len(late) if late else float("nan")
