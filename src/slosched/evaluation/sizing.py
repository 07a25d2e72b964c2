"""How long a run is: its measured arrival window and its discarded warm-up prefix, both in units of the
workload's p90 no-contention job latency (each job alone on the cluster's fastest instance, on true lengths:
these size runs and are never a policy input; a workflow's latency is its critical path).

**The measured window** (``steady.py`` regrows a search's count to it) spans at least ``WINDOW_FACTOR`` (20)
p90 latencies of arrivals at the run's rate, so that a backlog has time to show (``jobs_needed``).

**The warm-up prefix** spans at least ``WARMUP_SHARE`` (half) of that, 10 p90 latencies of arrivals, and at
least a quarter of the measured jobs (learned state grows with the run); the time rule asks for no more jobs
than the run measures, so a run sized to the window always gets it and a shorter one (a quick form, a test)
stays as short as it was asked to be. The p90 is taken over the history sample (past traffic, another
seed's jobs: what the deployer has seen).

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
WARMUP_SHARE = 0.5  # of the measured window's floor: the prefix spans WARMUP_SHARE x WINDOW_FACTOR p90 latencies


def p90_no_contention_s(instances: Sequence[InstanceSpec], jobs: Sequence[JobSpec]) -> float:
    """The 90th percentile over ``jobs`` of each job's no-contention latency alone on the fastest instance
    of ``instances`` (true lengths: it sizes runs, it is never a policy input); 0.0 without jobs."""
    if not jobs:
        return 0.0
    latency = FastestLatency([InstanceModels.build(spec) for spec in instances])
    return float(np.percentile([latency.job_s(job) for job in jobs], 90))


def jobs_needed(p90_s: float, rate: float, floor: int) -> int:
    """Measured jobs a run at ``rate`` needs for an arrival window of ``WINDOW_FACTOR`` x ``p90_s`` (n jobs
    at unit rate span n - 1 seconds), and at least ``floor``."""
    if not (math.isfinite(p90_s) and math.isfinite(rate)) or p90_s <= 0 or rate <= 0:
        return floor
    return max(floor, math.ceil(WINDOW_FACTOR * p90_s * rate) + 1)


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
# What a run whose JSON names no rule ran under (figures made before the time rule).
OLD_PREFIX_RULE_NAME = "a quarter of the run (before 2026-12-05)"
