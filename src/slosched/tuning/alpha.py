"""The alpha tuner of Hexgen-Text2SQL (DESIGN 4.1): choose the ``workload-balanced`` router's alpha by
replaying recent traffic in the simulator.

``AlphaTuner.retune(jobs, backlog, start_s)`` replays one recorded window (the jobs that arrived in it,
with their realized stages and lengths) on top of its *backlog* (the work of earlier jobs still queued or
running at the window's start, see ``tuning.window.remaining_work``), shifted so the window starts at 0,
for every alpha of the coarse grid 0, 0.2, ..., 1.0, then for the 0.1 steps next to the best.

Objectives (``TuneConfig.objective``):

* ``slo`` (default): the highest share of the window's jobs meeting their deadline (for a fixed window this
  is also the highest goodput), ties broken by the lower mean latency;
* ``mean-latency``: the paper's objective, the lowest mean job latency.

Only the window's own jobs are scored; the backlog is load they compete with. Remaining ties go to the
smaller alpha. Candidates run on a ``CandidateExecutor`` (local worker processes by default, or Ray).
``AlphaController`` (``tuning.window``) decides *when* to retune.

Invariants: deterministic for a given window, backlog, config and seed, whatever the executor; alpha in
[0, 1].
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
from slosched.core.request import Outcome
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams, simulate
from slosched.tuning.executors import CandidateExecutor, SerialExecutor

COARSE_GRID = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
ROUTER = "workload-balanced"
OBJECTIVES = ("slo", "mean-latency")


@dataclass(slots=True, frozen=True)
class TuneConfig:
    """What a replay runs: the cluster, the engine preset and job policy served live, their parameters
    (the router's ``alpha`` is overridden per candidate), simulator options and the objective."""

    instances: tuple[InstanceSpec, ...]
    engine: str = "urgency"
    job_policy: str = "stage-budget"
    params: PolicyParams = field(default_factory=PolicyParams)
    options: SimOptions = field(default_factory=SimOptions)
    seed: int = 0
    coarse_grid: tuple[float, ...] = COARSE_GRID
    fine_step: float = 0.1
    objective: str = "slo"

    def __post_init__(self) -> None:
        if not self.instances:
            raise ConfigError("tune.instances", "need at least one instance")
        if not self.coarse_grid or any(not 0.0 <= a <= 1.0 for a in self.coarse_grid):
            raise ConfigError("tune.coarse_grid", f"alphas must be in [0, 1], got {self.coarse_grid}")
        if not 0.0 < self.fine_step <= 1.0:
            raise ConfigError("tune.fine_step", f"must be in (0, 1], got {self.fine_step}")
        if self.objective not in OBJECTIVES:
            raise ConfigError("tune.objective", f"{self.objective!r}; allowed: {', '.join(OBJECTIVES)}")


@dataclass(slots=True, frozen=True)
class ReplayScore:
    """One replay's figures over the window's own jobs. ``attainment`` in [0, 1]; ``mean_latency_s`` is
    inf when some scored job did not complete."""

    attainment: float
    mean_latency_s: float

    def key(self, objective: str) -> tuple[float, float]:
        """Lower is better."""
        if objective == "mean-latency":
            return (self.mean_latency_s, -self.attainment)
        return (-self.attainment, self.mean_latency_s)


@dataclass(slots=True)
class TuneResult:
    """Per evaluated alpha: ``scores``; ``mean_latency_s`` and ``attainment`` are views of them."""

    alpha: float
    scores: dict[float, ReplayScore]
    seconds: float
    objective: str = "slo"

    @property
    def num_candidates(self) -> int:
        return len(self.scores)

    @property
    def mean_latency_s(self) -> dict[float, float]:
        return {alpha: score.mean_latency_s for alpha, score in self.scores.items()}

    @property
    def attainment(self) -> dict[float, float]:
        return {alpha: score.attainment for alpha, score in self.scores.items()}


def rebase(jobs: Sequence[JobSpec], start_s: float | None = None) -> list[JobSpec]:
    """Jobs shifted so ``start_s`` (default: the first arrival) becomes 0, in arrival order."""
    if not jobs:
        return []
    start = min(job.arrival_s for job in jobs) if start_s is None else start_s
    shifted = [replace(job, arrival_s=max(job.arrival_s - start, 0.0)) for job in jobs]
    return sorted(shifted, key=lambda job: job.arrival_s)


ReplayTask = tuple[TuneConfig, Sequence[JobSpec], frozenset[str], float]


def replay_score(task: ReplayTask) -> ReplayScore:
    """One replay at one alpha, scored on the jobs in ``scored`` (module level: worker processes pickle it)."""
    config, jobs, scored, alpha = task
    router_params = {**config.params.router.get(ROUTER, {}), "alpha": alpha}
    params = replace(config.params, router={**config.params.router, ROUTER: router_params})
    pair = PolicyPair(ROUTER, config.engine)
    result = simulate(config.instances, jobs, pair, config.seed, config.options, params, config.job_policy)
    records = [job for job in result.jobs if job.id in scored]
    if not records:
        return ReplayScore(0.0, math.inf)
    completed = [job.outcome is Outcome.COMPLETED for job in records]
    latencies = [job.finish_s - job.arrival_s for job in records]
    met = [done and latency <= job.slo_s for done, latency, job in zip(completed, latencies, records, strict=True)]
    mean = float(np.mean(latencies)) if all(completed) and all(map(math.isfinite, latencies)) else math.inf
    return ReplayScore(float(np.mean(met)), mean)


def replay_mean_latency(task: tuple[TuneConfig, Sequence[JobSpec], float]) -> float:
    """Mean job latency of one idle-start replay at one alpha (every job scored)."""
    config, jobs, alpha = task
    return replay_score((config, jobs, frozenset(job.id for job in jobs), alpha)).mean_latency_s


class AlphaTuner:
    """Reusable: the simulator bench and a live gateway call ``retune`` on recorded windows."""

    def __init__(self, config: TuneConfig, executor: CandidateExecutor | None = None) -> None:
        self.config = config
        self.executor = executor or SerialExecutor()

    def evaluate_scores(
        self,
        jobs: Sequence[JobSpec],
        alphas: Sequence[float],
        backlog: Sequence[JobSpec] = (),
        start_s: float | None = None,
    ) -> dict[float, ReplayScore]:
        """The window replayed over its backlog at each alpha, evaluated in parallel."""
        start = start_s if start_s is not None else min(job.arrival_s for job in jobs)
        replay = rebase([*backlog, *jobs], start)
        scored = frozenset(job.id for job in jobs)
        rounded = [round(alpha, 6) for alpha in alphas]
        results = self.executor.map(replay_score, [(self.config, replay, scored, a) for a in rounded])
        return dict(zip(rounded, results, strict=True))

    def evaluate(self, jobs: Sequence[JobSpec], alphas: Sequence[float]) -> dict[float, float]:
        """Mean latency of the window (no backlog) at each alpha."""
        return {alpha: score.mean_latency_s for alpha, score in self.evaluate_scores(jobs, alphas).items()}

    def retune(
        self, jobs: Sequence[JobSpec], backlog: Sequence[JobSpec] = (), start_s: float | None = None
    ) -> TuneResult:
        """Coarse grid, then ``fine_step`` either side of the best; the best score under the objective wins."""
        started = time.perf_counter()
        if not jobs:
            raise ConfigError("tune.window", "cannot tune on an empty window")
        objective = self.config.objective
        scores = self.evaluate_scores(jobs, self.config.coarse_grid, backlog, start_s)
        best = _best(scores, objective)
        step = self.config.fine_step
        fine = [a for a in (best - step, best + step) if 0.0 <= round(a, 6) <= 1.0 and round(a, 6) not in scores]
        if fine:
            scores.update(self.evaluate_scores(jobs, fine, backlog, start_s))
        ordered = dict(sorted(scores.items()))
        return TuneResult(_best(ordered, objective), ordered, time.perf_counter() - started, objective)


def _best(scores: dict[float, ReplayScore], objective: str) -> float:
    return min(scores, key=lambda alpha: (*scores[alpha].key(objective), alpha))
