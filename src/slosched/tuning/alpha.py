"""The alpha tuner of Hexgen-Text2SQL (DESIGN 4.1): choose the ``workload-balanced`` router's alpha by
replaying recent traffic in the simulator.

``AlphaTuner.retune(jobs)`` replays one recorded window (the jobs that arrived in it, with their realized
stages and lengths, rebased to start at 0 on an idle cluster) for every alpha of the coarse grid
0, 0.2, ..., 1.0, then for the 0.1 steps next to the best, and keeps the alpha with the lowest mean job
latency (ties: the smaller alpha). Candidates run on a ``CandidateExecutor`` (local worker processes by
default, or Ray). ``AlphaController`` (``tuning.window``) decides *when* to retune.

Invariants: deterministic for a given window, config and seed, whatever the executor; alpha in [0, 1].
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams, simulate
from slosched.tuning.executors import CandidateExecutor, SerialExecutor

COARSE_GRID = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
ROUTER = "workload-balanced"


@dataclass(slots=True, frozen=True)
class TuneConfig:
    """What a replay runs: the cluster, the engine preset and job policy served live, their parameters
    (the router's ``alpha`` is overridden per candidate) and simulator options."""

    instances: tuple[InstanceSpec, ...]
    engine: str = "urgency"
    job_policy: str = "stage-budget"
    params: PolicyParams = field(default_factory=PolicyParams)
    options: SimOptions = field(default_factory=SimOptions)
    seed: int = 0
    coarse_grid: tuple[float, ...] = COARSE_GRID
    fine_step: float = 0.1

    def __post_init__(self) -> None:
        if not self.instances:
            raise ConfigError("tune.instances", "need at least one instance")
        if not self.coarse_grid or any(not 0.0 <= a <= 1.0 for a in self.coarse_grid):
            raise ConfigError("tune.coarse_grid", f"alphas must be in [0, 1], got {self.coarse_grid}")
        if not 0.0 < self.fine_step <= 1.0:
            raise ConfigError("tune.fine_step", f"must be in (0, 1], got {self.fine_step}")


@dataclass(slots=True)
class TuneResult:
    """``mean_latency_s`` per evaluated alpha (inf when some job did not finish)."""

    alpha: float
    mean_latency_s: dict[float, float]
    seconds: float

    @property
    def num_candidates(self) -> int:
        return len(self.mean_latency_s)


def rebase(jobs: Sequence[JobSpec]) -> list[JobSpec]:
    """The window's jobs shifted so the first arrives at 0 (a replay starts from an idle cluster)."""
    if not jobs:
        return []
    start = min(job.arrival_s for job in jobs)
    return [replace(job, arrival_s=job.arrival_s - start) for job in sorted(jobs, key=lambda j: j.arrival_s)]


def replay_mean_latency(task: tuple[TuneConfig, Sequence[JobSpec], float]) -> float:
    """Mean job latency of one replay at one alpha (module level: worker processes pickle it)."""
    config, jobs, alpha = task
    router_params = {**config.params.router.get(ROUTER, {}), "alpha": alpha}
    params = replace(config.params, router={**config.params.router, ROUTER: router_params})
    pair = PolicyPair(ROUTER, config.engine)
    result = simulate(config.instances, jobs, pair, config.seed, config.options, params, config.job_policy)
    latencies = [job.finish_s - job.arrival_s for job in result.jobs]
    if not latencies or not all(math.isfinite(value) for value in latencies):
        return math.inf
    return float(np.mean(latencies))


class AlphaTuner:
    """Reusable: the simulator bench and a live gateway call ``retune`` on recorded windows."""

    def __init__(self, config: TuneConfig, executor: CandidateExecutor | None = None) -> None:
        self.config = config
        self.executor = executor or SerialExecutor()

    def evaluate(self, jobs: Sequence[JobSpec], alphas: Sequence[float]) -> dict[float, float]:
        """Mean latency of the (rebased) window at each alpha, evaluated in parallel."""
        window = rebase(jobs)
        rounded = [round(alpha, 6) for alpha in alphas]
        results = self.executor.map(replay_mean_latency, [(self.config, window, a) for a in rounded])
        return dict(zip(rounded, (float(value) for value in results), strict=True))

    def retune(self, jobs: Sequence[JobSpec]) -> TuneResult:
        """Coarse grid, then ``fine_step`` either side of the best; lowest mean latency wins."""
        start = time.perf_counter()
        if not jobs:
            raise ConfigError("tune.window", "cannot tune on an empty window")
        scores = self.evaluate(jobs, self.config.coarse_grid)
        best = _best(scores)
        step = self.config.fine_step
        fine = [a for a in (best - step, best + step) if 0.0 <= round(a, 6) <= 1.0 and round(a, 6) not in scores]
        if fine:
            scores.update(self.evaluate(jobs, fine))
        return TuneResult(_best(scores), dict(sorted(scores.items())), time.perf_counter() - start)


def _best(scores: dict[float, float]) -> float:
    return min(scores, key=lambda alpha: (scores[alpha], alpha))
