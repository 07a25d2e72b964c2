"""How many jobs per second a cluster completes, SLOs ignored: the ceiling no policy's SLO capacity can
rise far above. Two measures, for two questions:

- ``saturation_throughput``: everything queued at once (a burst); cheap, and a guess for where a capacity
  search should start.
- ``sustained_throughput``: a steady overload on a workbench; the throughput ceiling a capacity is read
  against (a burst undercounts it where queueing everything thrashes the KV cache).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.request import Outcome
from slosched.evaluation.workbench import WARMUP_PREFIX, Candidate, Workbench
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams, simulate


def saturation_throughput(
    instances: Sequence[InstanceSpec],
    jobs: Sequence[JobSpec],
    policy: str,
    seed: int = 0,
    params: PolicyParams | None = None,
) -> float:
    """Jobs per second the cluster sustains when everything is queued at once (middle 60% of finishes,
    so the start-up ramp and the drain do not count); ``params``: the policy's parameters."""
    burst = [replace(job, arrival_s=0.0) for job in jobs]
    result = simulate(instances, burst, PolicyPair.parse(policy), seed, SimOptions(noise_sigma=0.0), params)
    finishes = np.sort([job.finish_s for job in result.jobs if job.outcome is Outcome.COMPLETED])
    low, high = int(0.2 * len(finishes)), int(0.8 * len(finishes))
    return (high - low) / float(finishes[high] - finishes[low])


def sustained_throughput(bench: Workbench, candidate: Candidate, rate: float, seed: int) -> float:
    """Measured jobs completed per second from the first arrival to the last finish when ``candidate``
    serves ``bench``'s workload at ``rate`` (an overload: the queue never empties before the arrivals end,
    so the engines stay saturated but for the drain). Counting only the arrival window would miss
    workflows that outlast it; NaN when nothing finished after the first arrival."""
    jobs, history = bench.workload(rate, seed)
    result = bench.run_fn(candidate, bench.instances, jobs, bench.options, seed, history)
    measured = [job for job in result.jobs if not job.id.startswith(WARMUP_PREFIX)]
    done = [job.finish_s for job in measured if job.outcome is Outcome.COMPLETED and math.isfinite(job.finish_s)]
    start = min(job.arrival_s for job in measured)
    return len(done) / (max(done) - start) if done and max(done) > start else math.nan
