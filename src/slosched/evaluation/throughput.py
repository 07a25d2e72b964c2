"""How many jobs per second a cluster completes, SLOs ignored: the ceiling no policy's SLO capacity can
rise far above. Two measures, for two questions:

- ``saturation_throughput``: everything queued at once (a burst); cheap, and a guess for where a capacity
  search should start.
- ``sustained_throughput``: a steady overload on a workbench, in a run long enough for the backlog to form,
  counted over the second half of the arrival window; the throughput ceiling a capacity is read against (a
  burst undercounts it where queueing everything thrashes the KV cache).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.request import Outcome
from slosched.evaluation.steady import steady_jobs
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
    """Jobs per second ``candidate`` completes on ``bench``'s cluster at saturation: the workload offered at
    ``rate`` (an overload) in a run sized by the steady-state rule at that rate (``steady.steady_jobs``), the
    completions counted from the middle of the arrival window to its end, when the backlog has formed and the
    engines are saturated, and before the drain (a run's start would count a ramp, and its drain a tail
    that a short run lets finish at leisure). NaN when the window is empty."""
    sized = bench.sized(steady_jobs(bench, seed, rate))
    jobs, history = sized.workload(rate, seed)
    result = sized.run_fn(candidate, sized.instances, jobs, sized.options, seed, history)
    measured = [job for job in result.jobs if not job.id.startswith(WARMUP_PREFIX)]
    if len(measured) < 2:
        return math.nan
    first, last = min(job.arrival_s for job in measured), max(job.arrival_s for job in measured)
    middle = first + (last - first) / 2
    done = [
        job
        for job in result.jobs  # warm-up jobs finishing in the window use the cluster too
        if job.outcome is Outcome.COMPLETED and math.isfinite(job.finish_s) and middle <= job.finish_s <= last
    ]
    return len(done) / (last - middle) if last > middle else math.nan
