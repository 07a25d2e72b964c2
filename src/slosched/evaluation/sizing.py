"""How long a run is: its measured arrival window and its discarded warm-up prefix, both in units of the
workload's p90 no-contention job latency (each job alone on the cluster's fastest instance, on true lengths:
these size runs and are never a policy input; a workflow's latency is its critical path), and in full forms
at least the jobs the work rule asks (the spread of the jobs' sizes).

**The measured window** (``steady.py`` regrows a search's count to it) spans at least ``WINDOW_FACTOR`` (20)
p90 latencies of arrivals at the run's rate, so that a backlog has time to show (``jobs_needed``).

**The work rule** (a workbench's ``work_tolerance``, on in every bench's full form): the measured jobs are at
least enough that the tokens they bring, arriving as a Poisson stream, vary by at most 5% (one standard
deviation) around their mean: ``(1 + cv^2) / 0.05^2`` jobs for a coefficient of variation ``cv`` of a job's
tokens (``work_jobs``, over the floor's jobs of the seed). The time rule sees only latency; where jobs differ
in size far more than in latency it leaves a run holding too little work to average out, and which seed drew
the big jobs decides the capacity. On ``bench stack``'s relQueries (1-100 rows batched: a p90 latency of
1.2 s, for which the time rule asks 22 jobs at capacity) the strongest baseline's capacity fell by 10% from
100 jobs to 400 (5 seeds); on mixed (chat calls beside Text-to-SQL workflows of 100x their tokens, ``cv^2``
about 4) it rose by 21% from 634 jobs to 2,536 (``slosched bench convergence``, 2026-12-05; both held from
4x on the ladder before). The rule asks about 540 and 2,000 jobs there. On Text-to-SQL and code it asks
fewer than the time rule at the capacities of the stack and its strongest baseline (463 against 814, 766
against 4,489), on chat fewer than the bench's own floor (800 then, 3,200 since 2026-12-07): those
searches run as they did (only weak candidates, whose low capacities the time rule sizes short, get longer
runs). Quick forms and tests leave it off (``None``): they are not steady-state figures.

**The warm-up prefix** spans at least ``WARMUP_SHARE`` (half) of the time rule's window, 10 p90 latencies of
arrivals, and at least a quarter of the measured jobs (learned state grows with the run); the time rule asks
for no more jobs than the run measures, so a run sized to the window always gets it and a shorter one (a
quick form, a test) stays as short as it was asked to be. The p90 is taken over the history sample (past
traffic, another seed's jobs: what the deployer has seen).

Why the prefix needs time, not only jobs: a cold cluster is not a slow steady state, its prefix caches are
empty. On Text-to-SQL (CHESS workflows whose calls share a database's schema and the earlier calls'
context) its first calls pay the full prefill, which builds a backlog that at a load near capacity drains
slowly. A prefix of a quarter of the run ended inside it: at the strongest baseline's capacity the measured
jobs of the window's first eighth met 0.56 of their deadlines, 0.94 after a prefix of 10 p90 latencies
(``slosched bench warmup``, 5 seeds), and short runs' capacities came out low and rose at 4x the run
length, whose quarter-of-the-run prefix outlasted the transient (the strongest baseline's by 14%, every
seed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.sim.deadlines import FastestLatency
from slosched.sim.models import InstanceModels

WINDOW_FACTOR = 20.0
# The work rule: one standard deviation of the tokens a run's measured jobs bring, relative to their mean
# (``work_jobs``); the convergence check's own tolerance (``steady.STEADY_TOLERANCE``).
WORK_TOLERANCE = 0.05
WARMUP_SHARE = 0.5  # of the measured window's floor: the prefix spans WARMUP_SHARE x WINDOW_FACTOR p90 latencies


def p90_no_contention_s(instances: Sequence[InstanceSpec], jobs: Sequence[JobSpec]) -> float:
    """The 90th percentile over ``jobs`` of each job's no-contention latency alone on the fastest instance
    of ``instances`` (true lengths: it sizes runs, it is never a policy input); 0.0 without jobs."""
    if not jobs:
        return 0.0
    latency = FastestLatency([InstanceModels.build(spec) for spec in instances])
    return float(np.percentile([latency.job_s(job) for job in jobs], 90))


def job_tokens(job: JobSpec) -> int:
    """The work a job brings: prompt and output tokens over all its calls (true lengths: it sizes runs)."""
    return sum(call.input_tokens + call.output_tokens for stage in job.stages for call in stage.calls)


def work_jobs(jobs: Sequence[JobSpec], tolerance: float) -> int:
    """Measured jobs for which the tokens ``n`` Poisson arrivals bring fluctuate by at most ``tolerance`` (one
    standard deviation over the mean): a compound Poisson sum's is ``sqrt((1 + cv^2) / n)``, ``cv`` being the
    coefficient of variation of a job's tokens over ``jobs`` (the module docstring says why); 0 with fewer than
    two jobs or no tokens."""
    tokens = np.array([job_tokens(job) for job in jobs], dtype=float)
    if tokens.size < 2 or tokens.mean() <= 0 or tolerance <= 0:
        return 0
    spread = float(tokens.var() / tokens.mean() ** 2)
    return math.ceil((1.0 + spread) / tolerance**2)


def jobs_needed(p90_s: float, rate: float, floor: int, work: int = 0) -> int:
    """Measured jobs a run at ``rate`` needs for an arrival window of ``WINDOW_FACTOR`` x ``p90_s`` (n jobs
    at unit rate span n - 1 seconds), and at least ``floor`` and ``work`` (what the work rule asks,
    ``work_jobs``; 0 where it is off)."""
    if not (math.isfinite(p90_s) and math.isfinite(rate)) or p90_s <= 0 or rate <= 0:
        return max(floor, work)
    return max(floor, work, math.ceil(WINDOW_FACTOR * p90_s * rate) + 1)


def work_tolerance(quick: bool) -> float | None:
    """The work rule's tolerance of a bench's form: on in full forms, off in quick ones (module docstring)."""
    return None if quick else WORK_TOLERANCE


def prefix_factor() -> float:
    """The warm-up prefix's span in p90 latencies (read at call time: a test that shrinks the window shrinks
    the prefix with it)."""
    return WARMUP_SHARE * WINDOW_FACTOR


def warmup_for(num_jobs: int) -> int:
    """The warm-up prefix a run of ``num_jobs`` measured jobs gets at least: a quarter of it."""
    return num_jobs // 4


def prefix_jobs(floor: int, p90_s: float, rate: float, measured: int) -> int:
    """Warm-up jobs of a run of ``measured`` jobs at ``rate`` jobs/s: ``floor`` (0, the cold start, stays 0),
    and at least the arrivals of ``prefix_factor()`` x ``p90_s`` seconds, but for that rule never more than
    ``measured`` (module docstring)."""
    if floor <= 0 or not (math.isfinite(p90_s) and math.isfinite(rate)) or p90_s <= 0 or rate <= 0:
        return max(floor, 0)
    return max(floor, min(measured, math.ceil(prefix_factor() * p90_s * rate)))


# How reports state the rule beside a bench's own warm-up count, and how a bench's JSON names the rule it ran.
PREFIX_RULE = f"and at least {WARMUP_SHARE * WINDOW_FACTOR:g}x the workload's p90 no-contention job latency of arrivals"
PREFIX_RULE_NAME = f"a quarter of the run and {WARMUP_SHARE * WINDOW_FACTOR:g}x p90 of arrivals"
# How a bench's JSON names the work rule its full form ran under, and what one that names none ran under.
WORK_RULE_NAME = (
    f"tokens of the measured jobs within {WORK_TOLERANCE:.0%} (at least (1 + cv^2) / {WORK_TOLERANCE:g}^2 jobs)"
)
NO_WORK_RULE_NAME = "off"


def work_rule_name(tolerance: float | None) -> str:
    """What a bench's JSON says of the work rule its runs had (``work_rule``)."""
    return WORK_RULE_NAME if tolerance else NO_WORK_RULE_NAME


def work_rule_clause(name: str | None) -> str:
    """How a report qualifies a run's stated job count: empty where the work rule was off (or not named)."""
    if not name or name == NO_WORK_RULE_NAME:
        return ""
    return f" (at least: more where the work rule asks it, {WORK_TOLERANCE:.0%} on the measured jobs' tokens)"


# What a run whose JSON names no rule ran under (figures made before the time rule).
OLD_PREFIX_RULE_NAME = "a quarter of the run (before 2026-12-05)"
