"""Self-tuning of the ``slosched`` stack: choose its knobs by replaying recent traffic in the simulator, as
Hexgen-Text2SQL chooses alpha (``tuning.alpha``), so that no workload needs hand settings.

``StackTuner.retune(jobs, backlog, start_s)`` replays one recorded window (jobs that already finished, with
their realized stages and lengths; never the jobs being served) under candidate settings of the stack's
parameter block and returns the best. The knobs are searched one at a time (coordinate descent over
``KNOBS``, in order, each over its values with the others at the best so far): a full grid would cost the
product of the value counts, and the knobs act on different layers, so they interact little.

**Scored under load.** A window replayed from idle at the rate it arrived mostly shows an idle cluster,
where every setting meets every deadline. Each candidate is therefore replayed at each of ``load_factors``
(arrival times divided by the factor: 1x, and 1.5x and 2x the window's rate), and scored by its SLO
attainment averaged over them: a setting that holds as load grows beats one that only fits the past load.
Only the window's own jobs are scored; the backlog is load they compete with. Attainment counts a job's token
SLOs too, as the scoreboard does.

**A change must be worth it.** A knob moves off the value it holds (the default, at first) only when a
candidate meets more of the window's jobs, pooled over the loads, by at least ``MIN_NET_GAIN`` of them (at
least ``MIN_NET_JOBS``), or meets as many with a mean latency at 1x lower by ``LATENCY_MARGIN``. Without the
margin the tuner chased noise: on the mixed workload every candidate met the same 59 of 60 jobs give or take
one, and the choice fell to a 0.01 s latency difference (``token_budget`` 256 with ``prefix_wait``, a knob
searched then), which then cost the full runs 7% of capacity against the defaults. Among candidates that
clear the margin, the best by pooled attainment, then mean latency at 1x, then order wins.

The replays run on the cluster's step-time models as a deployment profiled them (in the simulator: the
instances as specified); policies inside the replay read nothing more than they do live.
Invariants: deterministic for a window, backlog, config and seed, whatever the executor; the chosen
settings are always one of the candidates.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.request import Outcome
from slosched.metrics.summary import token_slo_missed_jobs
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams, simulate
from slosched.tuning.alpha import rebase
from slosched.tuning.executors import CandidateExecutor, SerialExecutor

STACK = "slosched"
# The knobs searched, in order, and their values (the stack's default first where it is one of them).
# The step budget's ceiling first (the knob the baselines' sweeps show matters most), then whether steps at
# that ceiling yield to a queue it keeps up with (``yield_to_queue``: on, it lifted code 0.98x -> 1.01x and
# relQueries' 3x goodput 0.99 -> 1.19 of their own capacity, and cost mixed 14% on one seed of five and 10%
# of its 3x goodput, docs/stack.md; it acts on the steps the ceiling shapes, so it follows it), then the
# best-effort tier's share. Not searched: ``prefix_wait`` (SGLang's in-batch prefix rule holds next to nobody
# on a vLLM v1 prefix cache, which caches a block when a step is scheduled to compute it: calls admitted beside a leader
# already share what it computes; ``sim/kv.py``; 0-1% of capacity in ``bench relquery-order``), and, to keep
# a retune short, the concurrency cap (``max_concurrency``: 128, the strongest baseline's cap, left the
# stack's quick capacity on the KV-limited code workload unchanged, two seeds) and the router's affinity bound
# (its default was chosen on the stack bench's quick runs, docs/results/stack.md).
KNOBS: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("token_budget", (2048, 1024, 512, 256)),
    ("yield_to_queue", (True, False)),
    ("best_effort_share", (0.25, 0.1, 0.5)),
)
LOAD_FACTORS = (1.0, 1.5, 2.0)
# The most recent jobs a window keeps: replays cost in proportion to the jobs, and older traffic says less
# about the load to come.
MAX_WINDOW_JOBS = 60
# The margin a change of a knob must clear (module docstring): 2% of the pooled replays (60 jobs x 3 loads: 4
# jobs), at least 2 jobs; or as many jobs met with a 10% lower mean latency at 1x.
MIN_NET_GAIN = 0.02
MIN_NET_JOBS = 2
LATENCY_MARGIN = 0.10
Settings = tuple[tuple[str, Any], ...]


@dataclass(slots=True, frozen=True)
class StackTuneConfig:
    """What a replay runs: the cluster, the stack and its job policy, the stack's base parameter block (the
    searched knobs override it), simulator options and the history its deadlines learn from."""

    instances: tuple[InstanceSpec, ...]
    base: Settings = ()
    policy: str = STACK
    job_policy: str = STACK
    options: SimOptions = field(default_factory=SimOptions)
    history: tuple[JobSpec, ...] = ()
    seed: int = 0
    knobs: tuple[tuple[str, tuple[Any, ...]], ...] = KNOBS
    load_factors: tuple[float, ...] = LOAD_FACTORS
    max_window_jobs: int = MAX_WINDOW_JOBS

    def __post_init__(self) -> None:
        if not self.instances:
            raise ConfigError("tune.instances", "need at least one instance")
        if not self.load_factors or any(not factor > 0 for factor in self.load_factors):
            raise ConfigError("tune.load_factors", f"must be > 0, got {self.load_factors}")
        if any(not values for _, values in self.knobs):
            raise ConfigError("tune.knobs", "every knob needs at least one value")
        if self.max_window_jobs < 1:
            raise ConfigError("tune.max_window_jobs", f"must be >= 1, got {self.max_window_jobs}")
        stack_name(self.policy)

    @property
    def pair(self) -> PolicyPair:
        return PolicyPair.parse(self.policy)


@dataclass(slots=True, frozen=True)
class StackScore:
    """One candidate's figures over the window's own jobs: attainment at each load factor (in [0, 1]), the
    mean latency at 1x (inf when a scored job did not complete) and how many jobs each replay scored."""

    attainment: tuple[float, ...]
    mean_latency_s: float
    scored: int = 0

    @property
    def mean_attainment(self) -> float:
        return float(np.mean(self.attainment)) if self.attainment else 0.0

    @property
    def met_jobs(self) -> int:
        """Jobs that met their SLO, summed over the replays at every load."""
        return round(sum(self.attainment) * self.scored)

    def key(self) -> tuple[float, float]:
        """Lower is better."""
        return (-round(self.mean_attainment, 9), self.mean_latency_s)

    def improves_on(self, incumbent: StackScore) -> bool:
        """Whether this score clears the margin a change needs over ``incumbent``'s (module docstring)."""
        margin = max(MIN_NET_JOBS, math.ceil(MIN_NET_GAIN * incumbent.scored * len(incumbent.attainment)))
        net = self.met_jobs - incumbent.met_jobs
        faster = self.mean_latency_s <= (1.0 - LATENCY_MARGIN) * incumbent.mean_latency_s
        return net >= margin or (net >= 0 and faster)


@dataclass(slots=True)
class StackTuneResult:
    """The chosen settings (knob -> value, every searched knob), each evaluated candidate's score in the
    order evaluated, and the wall time the search took."""

    settings: dict[str, Any]
    scores: dict[Settings, StackScore]
    seconds: float

    @property
    def num_candidates(self) -> int:
        return len(self.scores)

    def as_json(self) -> dict[str, Any]:
        return {
            "settings": dict(self.settings),
            "candidates": [
                {
                    "settings": dict(s),
                    "attainment": list(v.attainment),
                    "met_jobs": v.met_jobs,
                    "scored_jobs": v.scored * len(v.attainment),
                    "mean_latency_s": v.mean_latency_s,
                }
                for s, v in self.scores.items()
            ],
            "seconds": self.seconds,
        }


ReplayTask = tuple[StackTuneConfig, Sequence[JobSpec], frozenset[str], Settings]


def replay_stack_score(task: ReplayTask) -> StackScore:
    """One candidate's replays at every load factor (module level: worker processes pickle it)."""
    config, jobs, scored, settings = task
    block = {**dict(config.base), **dict(settings)}
    params = PolicyParams(stack={stack_name(config.policy): block})
    pair = config.pair
    attainments: list[float] = []
    mean_latency = math.inf
    for index, factor in enumerate(config.load_factors):
        compressed = [replace(job, arrival_s=job.arrival_s / factor) for job in jobs]
        result = simulate(
            config.instances,
            compressed,
            pair,
            config.seed,
            config.options,
            params,
            config.job_policy,
            config.history or None,
        )
        records = [job for job in result.jobs if job.id in scored]
        missed = token_slo_missed_jobs(result.requests)
        met = [job.deadline_met and job.id not in missed for job in records]
        attainments.append(float(np.mean(met)) if met else 0.0)
        if index == 0 and records and all(job.outcome is Outcome.COMPLETED for job in records):
            mean_latency = float(np.mean([job.finish_s - job.arrival_s for job in records]))
    return StackScore(tuple(attainments), mean_latency, len(scored))


class StackTuner:
    """Reusable: a bench and a live runtime call ``retune`` on recorded windows."""

    def __init__(self, config: StackTuneConfig, executor: CandidateExecutor | None = None) -> None:
        self.config = config
        self.executor = executor or SerialExecutor()

    def evaluate(
        self,
        jobs: Sequence[JobSpec],
        candidates: Sequence[Settings],
        backlog: Sequence[JobSpec] = (),
        start_s: float | None = None,
    ) -> dict[Settings, StackScore]:
        """The window replayed over its backlog under each candidate (in parallel on the executor)."""
        recent = sorted(jobs, key=lambda job: job.arrival_s)[-self.config.max_window_jobs :]
        start = start_s if start_s is not None else recent[0].arrival_s
        replay = rebase([*backlog, *recent], start)
        scored = frozenset(job.id for job in recent)
        results = self.executor.map(replay_stack_score, [(self.config, replay, scored, c) for c in candidates])
        return dict(zip(candidates, results, strict=True))

    def searched_knobs(self) -> tuple[tuple[str, tuple[Any, ...]], ...]:
        """``config.knobs`` less those the base block sets: a value an operator (or an ablation) wrote down
        is pinned, never searched over (``bench ablation``'s ``-yield-to-queue`` row would otherwise measure
        the tuner's choice, not the switch)."""
        pinned = dict(self.config.base)
        return tuple((name, values) for name, values in self.config.knobs if name not in pinned)

    def retune(
        self, jobs: Sequence[JobSpec], backlog: Sequence[JobSpec] = (), start_s: float | None = None
    ) -> StackTuneResult:
        """Coordinate descent over the searched knobs: each knob's values with the others at the best so far;
        a knob keeps its value unless a candidate clears the margin over it (``StackScore.improves_on``)."""
        if not jobs:
            raise ConfigError("tune.window", "cannot tune on an empty window")
        started = time.perf_counter()
        knobs = self.searched_knobs()
        best = {name: values[0] for name, values in knobs}
        scores: dict[Settings, StackScore] = {}
        for name, values in knobs:
            incumbent = settings_of(best)
            candidates = [settings_of({**best, name: value}) for value in values]
            fresh = [c for c in candidates if c not in scores]
            scores.update(self.evaluate(jobs, fresh, backlog, start_s))
            better = [c for c in candidates if c != incumbent and scores[c].improves_on(scores[incumbent])]
            if better:
                chosen: Settings = min(better, key=lambda c: (*scores[c].key(), candidates.index(c)))
                best = dict(chosen)
        return StackTuneResult(best, scores, time.perf_counter() - started)


def stack_name(policy: str) -> str:
    """The stack ``policy`` names; a ``ConfigError`` when it names a ``ROUTER+ENGINE`` pair (only a stack has
    one parameter block to tune)."""
    stack = PolicyPair.parse(policy).stack
    if stack is None:
        raise ConfigError("self_tune", f"tunes a stack's parameter block; {policy!r} is not a stack")
    return stack


def settings_of(values: Mapping[str, Any]) -> Settings:
    """Settings in a canonical, hashable form (sorted by knob name)."""
    return tuple(sorted(values.items()))


def tuned_params(
    params: PolicyParams,
    instances: Sequence[InstanceSpec],
    window: Sequence[JobSpec],
    options: SimOptions,
    seed: int,
    history: Sequence[JobSpec] = (),
    policy: str = STACK,
    job_policy: str = STACK,
) -> tuple[PolicyParams, StackTuneResult | None]:
    """``params`` with the stack's block tuned on ``window`` (traffic already served); unchanged, with no
    result, when the window is empty (a cold start keeps the defaults)."""
    name = stack_name(policy)
    if not window:
        return params, None
    base = dict(params.stack.get(name, {}))
    config = StackTuneConfig(tuple(instances), settings_of(base), policy, job_policy, options, tuple(history), seed)
    result = StackTuner(config).retune(window)
    return replace(params, stack={**params.stack, name: {**base, **result.settings}}), result
