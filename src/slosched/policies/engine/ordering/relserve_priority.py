"""Ordering ``relserve-priority``: RelServe's Dynamic Priority Updater (DPU).

A job's priority (lower runs sooner) is its predicted remaining duration on this engine: its unfinished
requests decomposed into the batches the engine would run (``relserve_decompose``), with RelServe's
fitted prefill/decode lines. It is recomputed every iteration, except that a job whose requests were
all waiting at its last computation and still are (same count) keeps its value: nothing about it
changed. Uncached prompt tokens come from a sampled prefix-cache miss ratio. Starvation guard: once a
job's unit waiting time ``(now - arrival) / requests at arrival`` exceeds ``starvation_unit_wait_s``
its priority is 0. Requests of one job are ordered by arrival, then id. Keys change with time, so the
ordering is neither static nor time-invariant. Any job kind works; relQueries are what it is for.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import EngineView, SeqView
from slosched.policies.engine.base import ORDERINGS
from slosched.policies.engine.ordering.relserve_decompose import (
    BatchLimits,
    LineCoefficients,
    WaitingWork,
    estimate_miss_ratio,
    kv_blocks,
    remaining_duration_s,
)
from slosched.policies.engine.ordering.relserve_model import RelServeStepModel
from slosched.policies.engine.ordering.relserve_overhead import OverheadMeter
from slosched.policies.registry import PolicyContext, setting

_job_of = attrgetter("request.job_id")


@dataclass(slots=True)
class JobPriority:
    """What the DPU remembers of a job: its arrival, its requests at arrival, its last estimate."""

    arrival_s: float
    num_requests: int
    estimate_s: float = 0.0
    all_waiting: bool = False
    num_waiting: int = -1


def expected_output_tokens(request: Request) -> int:
    """Belief: the predicted output length within the request's limit (the limit when unpredicted)."""
    predicted = request.predicted_output_tokens
    if predicted <= 0:
        return max(1, request.max_output_tokens)
    return max(1, min(round(predicted), request.max_output_tokens))


class DynamicPriorityUpdater:
    static_keys = False
    time_invariant = False

    def __init__(
        self,
        model: RelServeStepModel | None = None,
        num_samples: int = 4,
        starvation_unit_wait_s: float | None = 2.0,
        meter: OverheadMeter | None = None,
    ) -> None:
        self.model = model if model is not None else RelServeStepModel()
        self.num_samples = num_samples
        self.starvation_unit_wait_s = starvation_unit_wait_s
        self.meter = meter if meter is not None else OverheadMeter()
        self.jobs: dict[str, JobPriority] = {}
        self.priority: dict[str, float] = {}
        self.waiting_by_job: dict[str, list[SeqView]] = {}
        self.running_by_job: dict[str, list[SeqView]] = {}
        self.top_waiting_job: str | None = None
        self.num_recomputed = 0
        self.num_reused = 0
        self._stamp: tuple[float, int, int] | None = None

    def observe_step(self, observation: Any) -> None:
        self.model.observe_step(observation)

    def key(self, seq: SeqView, engine: EngineView) -> Any:
        if self._stamp != (engine.now_s, engine.num_running, len(engine.waiting)):
            self.refresh(engine)
        request = seq.request
        job = request.job_id
        return (self.priority.get(job, 0.0), request.job_arrival_s, job, request.arrival_s, request.id)

    def refresh(self, engine: EngineView) -> Mapping[str, float]:
        """Priorities of every job with requests on this engine; idempotent within one iteration."""
        stamp = (engine.now_s, engine.num_running, len(engine.waiting))
        if stamp == self._stamp:
            return self.priority
        start = time.perf_counter()
        self._stamp = stamp
        self.model.bind_prior(engine.step_predictor)
        waiting = engine.waiting
        counts = Counter(map(_job_of, waiting))
        running_by_job: dict[str, list[SeqView]] = {}
        if engine.num_running:
            for seq in engine.running_seqs:
                running_by_job.setdefault(seq.request.job_id, []).append(seq)
        stale = [job for job, count in counts.items() if self._must_recompute(job, count, running_by_job)]
        waiting_by_job: dict[str, list[SeqView]] = {job: [] for job in stale}
        if stale:
            for seq in waiting:
                bucket = waiting_by_job.get(seq.request.job_id)
                if bucket is not None:
                    bucket.append(seq)
        lines = LineCoefficients(*self.model.coefficients())
        limits = _limits(engine)
        now = engine.now_s
        jobs: dict[str, JobPriority] = {}
        priority: dict[str, float] = {}
        for job in counts.keys() | running_by_job.keys():
            state = self._state(job, waiting_by_job.get(job), running_by_job.get(job), counts[job])
            if job in waiting_by_job or job not in counts:
                pending = waiting_by_job.get(job, [])
                running = running_by_job.get(job, [])
                state.estimate_s = self._estimate(pending, running, engine, limits, lines)
                state.all_waiting = not running
                state.num_waiting = len(pending)
                self.num_recomputed += 1
            else:
                self.num_reused += 1
            jobs[job] = state
            priority[job] = self._guarded(state, now)
        self.jobs, self.priority = jobs, priority
        self.waiting_by_job, self.running_by_job = waiting_by_job, running_by_job
        self.top_waiting_job = min(counts, key=lambda job: (priority[job], jobs[job].arrival_s, job), default=None)
        self.meter.dpu_s += time.perf_counter() - start
        self.meter.num_dpu_updates += 1
        return priority

    def _must_recompute(self, job: str, num_waiting: int, running: Mapping[str, list[SeqView]]) -> bool:
        state = self.jobs.get(job)
        # The reuse rule: every request of the job was waiting last time and still is.
        return state is None or job in running or not state.all_waiting or state.num_waiting != num_waiting

    def _state(
        self, job: str, waiting: list[SeqView] | None, running: list[SeqView] | None, num_waiting: int
    ) -> JobPriority:
        state = self.jobs.get(job)
        if state is None:
            seqs = waiting or running
            assert seqs, "a job on the engine has at least one request"
            state = JobPriority(seqs[0].request.job_arrival_s, num_waiting + len(running or ()))
        return state

    def _guarded(self, state: JobPriority, now_s: float) -> float:
        threshold = self.starvation_unit_wait_s
        if threshold is not None and (now_s - state.arrival_s) / max(1, state.num_requests) > threshold:
            return 0.0
        return state.estimate_s

    def _estimate(
        self,
        waiting: Sequence[SeqView],
        running: Sequence[SeqView],
        engine: EngineView,
        limits: BatchLimits,
        lines: LineCoefficients,
    ) -> float:
        pool = [seq.request for seq in (waiting or running)]
        miss = estimate_miss_ratio(pool, engine.cached_prefix_tokens, limits.block_size, self.num_samples)
        block = limits.block_size
        groups: Counter[tuple[int, int]] = Counter()
        extra_tokens = extra_requests = 0
        for seq in running:
            expected = expected_output_tokens(seq.request)
            remaining = max(1, expected - seq.num_output_tokens)
            left_to_prefill = seq.num_prompt_tokens - seq.num_computed_tokens
            if left_to_prefill > 0:  # chunked prefill in progress: it still has prompt to compute
                extra_tokens += left_to_prefill
                extra_requests += 1
            else:
                groups[(remaining, kv_blocks(miss * seq.num_prompt_tokens + expected, block))] += 1
        running_groups = [(remaining, count, blocks) for (remaining, blocks), count in groups.items()]
        count = len(waiting) + extra_requests
        if not count:
            return remaining_duration_s(WaitingWork(0, 0.0, 1, 1), running_groups, limits, lines)
        prompt = sum(seq.num_prompt_tokens - seq.num_computed_tokens for seq in waiting)
        uncached = (miss * prompt + extra_tokens) / count
        first = (waiting or running)[0].request
        # Rows of a job share the output belief; preempted rows already produced part of it.
        output = max(1, expected_output_tokens(first) - min(seq.num_output_tokens for seq in waiting or running))
        work = WaitingWork(count, uncached, output, kv_blocks(uncached + output, block))
        return remaining_duration_s(work, running_groups, limits, lines)


def _limits(engine: EngineView) -> BatchLimits:
    spec = engine.spec
    return BatchLimits(spec.max_batched_tokens, spec.max_running, engine.num_kv_blocks, spec.block_size)


@dataclass(frozen=True, slots=True)
class RelservePriorityParams:
    num_samples: int = setting(4, "rows sampled per job for the prefix-cache miss ratio (>= 1)")
    starvation_unit_wait_s: float | None = setting(
        2.0, "starvation guard: seconds of wait per request of the job at arrival (> 0); none disables it"
    )

    def __post_init__(self) -> None:
        if self.num_samples < 1:
            raise ConfigError("relserve.num_samples", f"must be >= 1, got {self.num_samples}")
        threshold = self.starvation_unit_wait_s
        if threshold is not None and not threshold > 0:
            raise ConfigError("relserve.starvation_unit_wait_s", f"must be > 0 or null, got {threshold}")


def build_dpu(
    params: RelservePriorityParams, model: RelServeStepModel | None, meter: OverheadMeter | None
) -> DynamicPriorityUpdater:
    """A DPU with ``params``' sample count and starvation guard."""
    return DynamicPriorityUpdater(model, params.num_samples, params.starvation_unit_wait_s, meter)


@ORDERINGS.register("relserve-priority", params=RelservePriorityParams)
def build(params: RelservePriorityParams, context: PolicyContext) -> DynamicPriorityUpdater:
    return build_dpu(params, None, None)
