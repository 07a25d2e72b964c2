"""A simulated model instance: queues, KV cache, and steps timed by the ground-truth model.

Decoding requests form a cohort advanced by one clock (``cohort.py``), so a step costs O(prefill work),
not O(batch). A decode-only step whose batch cannot change until a request finishes (nothing waits, or
every engine policy is time-invariant) starts a *run*: the durations of all its steps are computed at
once and the cohort advances lazily. An arrival cuts the run at the end of the step in progress, exactly
where a step-by-step engine would next look at its queue, so results equal stepping (``max_run_steps=1``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from slosched.core.belief import StepPredictor, StepTimeModel
from slosched.core.instance import InstanceSpec
from slosched.core.records import InstanceStats
from slosched.core.request import Request
from slosched.policies.engine.base import EnginePolicy
from slosched.policies.engine.queue import DEFAULT_WAKE_S, PolicyQueue
from slosched.sim.belief import BeliefFeed
from slosched.sim.decode_run import DecodeRun, decode_step_times
from slosched.sim.engine_state import EngineState
from slosched.sim.kernel import EventKernel
from slosched.sim.noise import NoiseStream
from slosched.sim.seq import Seq
from slosched.sim.step import StepFormer, StepWork

FinishCallback = Callable[[Seq, int, float], None]


def _finished_after_run(seq: Seq, index: int, now_s: float) -> None:
    """What a detached instance calls when a request finishes: nothing (its run is over)."""


class SimInstance(EngineState):
    """Implements ``core.views.EngineView`` for its engine policy."""

    # ``detach`` drops the step former (mypyc allows deleting only the attributes listed here).
    __deletable__ = ("_former",)

    def __init__(
        self,
        index: int,
        spec: InstanceSpec,
        num_kv_blocks: int,
        truth: StepTimeModel,
        noise: NoiseStream,
        engine: EnginePolicy,
        belief: BeliefFeed,
        kernel: EventKernel,
        on_finish: FinishCallback,
        max_run_steps: int,
    ) -> None:
        super().__init__(spec, num_kv_blocks, kernel)
        self.index = index
        self.truth = truth
        self.noise = noise
        self.engine = engine
        self._batching = engine.batching  # read on every step
        self.belief = belief
        self.on_finish = on_finish
        self.max_run_steps = max_run_steps
        self.queue: PolicyQueue[Seq] = PolicyQueue(engine)
        self.waiting = self.queue.waiting  # the same list object for the instance's lifetime
        self._former = StepFormer(self, self, self.queue)
        self._outstanding = 0.0
        self._busy = False
        self._run: DecodeRun | None = None
        # The prefill step in progress (start, end); start is NaN between steps. Read only by ``sample``.
        self._step_start_s = math.nan
        self._step_end_s = math.nan
        self._version = 0
        self._enqueued = 0

    def detach(self) -> None:
        """Break the instance's reference cycles once its run is over (the finish callback, a bound method of
        the simulation, and the step former, which points back here), so the finished run is freed by
        reference counting. The run leaves its objects in the collector's oldest generation, seldom walked
        in full: held by these cycles, each finished run stayed there as garbage, jobs and records included
        (~28 MB per 600-job Text-to-SQL run; a bench worker reached 13 GB). The instance stays readable
        (stats, queue, KV); it cannot step again."""
        self.on_finish = _finished_after_run
        del self._former

    # ---- EngineView -------------------------------------------------------------------------------------
    @property
    def now_s(self) -> float:
        return self.kernel.now_s

    @property
    def running_seqs(self) -> list[Seq]:
        """Running requests with current token counts (costs O(batch); baselines never need it)."""
        self.sync()
        for seq in self.cohort.members.values():
            self.cohort.materialize(seq)
        return list(self.running.values())

    @property
    def num_running(self) -> int:
        return len(self.running)

    # ---- InstanceView (fresh: the cluster syncs before routing) ------------------------------------------
    @property
    def snapshot_s(self) -> float:
        return self.kernel.now_s

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def waiting_requests(self) -> list[Request]:
        return [seq.request for seq in self.waiting]

    @property
    def exported(self) -> Mapping[str, float]:
        return self.engine.export_state(self)

    @property
    def num_free_kv_blocks(self) -> int:
        self.sync()
        return self.kv.num_free

    @property
    def outstanding_decode_tokens(self) -> float:
        """Predicted output tokens still to come (belief); synced lazily, only when someone reads it."""
        self.sync()
        return self._outstanding

    @property
    def num_kv_blocks(self) -> int:
        return self.kv.num_blocks

    @property
    def step_predictor(self) -> StepPredictor:
        return self.belief.predictor

    def cached_prefix_tokens(self, request: Request) -> int:
        self.sync()
        return self.kv.cached_prefix_blocks(request.prefix) * self.kv.block_size

    # ---- queues ----------------------------------------------------------------------------------------
    def enqueue(self, seq: Seq) -> None:
        self._enqueued += 1
        seq.order = self._enqueued
        self.wait_again(seq)
        predicted = seq.request.predicted_output_tokens
        self._outstanding += predicted if predicted > 1.0 else 1.0
        if not self._busy:
            self._start_step()
        elif self._run is not None:
            self._cut_run()

    def wait_again(self, seq: Seq) -> None:
        self.waiting_prefill_tokens += seq.num_prompt_tokens - seq.num_computed_tokens
        self.queue.push(seq, self)

    # ---- steps -----------------------------------------------------------------------------------------
    def _start_step(self) -> None:
        if not self.running and not self.waiting:
            self._busy = False
            return
        kernel = self.kernel
        now = kernel.now_s
        work = self._former.form(self._batching.plan(self))
        self._busy = True
        self._version += 1
        if work.prefills:
            factor = self.noise.take_one()
            duration = factor * self.truth.step_time_s(
                work.num_prefill_tokens,
                work.prefill_context_tokens,
                work.num_decode_seqs,
                work.decode_context_tokens,
            )
            self._step_start_s = now
            self._step_end_s = end = now + duration
            kernel.schedule(end, self._on_step_end, (self._version, work, duration))
        elif work.num_decode_seqs:
            self._start_run(work, now)
        else:
            self._wait_for_change(now, work.preempted)

    def _wait_for_change(self, now: float, preempted: bool) -> None:
        """Nothing could be scheduled: look again when the policy's decision can change (its queue's
        ``next_wake_s``). A time-invariant policy changes its mind only on an arrival, so the instance idles
        (the next ``enqueue`` starts a step) unless the mechanism stalled it (a preemption frees KV for the
        next step only, or requests still run): then it looks again after the default interval."""
        queue: Any = self.queue  # read through Any: a policy's wake time may be a numpy number (step.py)
        wake = queue.next_wake_s(self)
        if wake is None:
            if not preempted and not self.running:
                self._busy = False
                return
            wake = now + DEFAULT_WAKE_S
        self.kernel.schedule(float(wake), self._on_retry, self._version)

    def _start_run(self, work: StepWork, now: float) -> None:
        length = self.max_run_steps
        # A run is only valid while the next step would repeat this one: every running request decodes, and
        # waiting requests stay blocked (a preemption just freed KV, so after one they may not).
        if self.prefilling or (self.waiting and (work.preempted or not self.engine.time_invariant)):
            length = 1
        cohort = self.cohort
        if length > 1:
            until_finish = cohort.steps_to_next_finish()
            length = cohort.max_steps_within(self.kv.num_free, until_finish if until_finish < length else length)
        batch, context = work.num_decode_seqs, work.decode_context_tokens
        base, per_token = self.truth.decode_step_terms(batch)
        # Step k reads context + (k + 1) * batch tokens: the same floats step_time_s gives, without numpy.
        durations, ends = decode_step_times(base, per_token, context + batch, batch, self.noise.take(length), now)
        self._run = DecodeRun(cohort.clock, batch, context, now, durations, ends)
        self.kernel.schedule(self._run.end_s, self._on_run_end, self._version)

    def _cut_run(self) -> None:
        """An arrival: end the current run after the step in progress."""
        run = self._run
        assert run is not None
        unused = run.cut(self.kernel.now_s)
        if unused:
            self.noise.give_back(unused)
            self._version += 1
            self.kernel.schedule(run.end_s, self._on_run_end, self._version)

    def sync(self) -> None:
        """Bring a lazily advanced run up to now (tokens of finished steps, KV of the step in progress)."""
        if self._run is not None:
            self._advance_run(self._run, self.kernel.now_s)

    def _advance_run(self, run: DecodeRun, now_s: float) -> None:
        if now_s < run.next_end_s and run.allocated > run.applied:
            return  # still inside the step in progress, whose KV is already reserved
        done = run.steps_done(now_s)
        delta = done - run.applied
        if delta > 0:
            self.cohort.advance(delta)
            self._outstanding -= delta * run.num_decode_seqs
            run.applied = done
            if done < run.num_steps:
                run.next_end_s = run.ends[done]
        # Hold the KV stepping would hold now: that of every step started so far.
        started = done + 1 if done < run.num_steps else run.num_steps
        if started > run.allocated:
            needed = self.cohort.blocks_needed(run.first_clock + run.allocated, started - run.allocated)
            if not self.kv.reserve(needed):
                raise AssertionError("decode run outgrew the KV capacity it was sized for")
            run.allocated = started

    def flush_observations(self, until_s: float) -> None:
        if self._run is not None:
            self._run.deliver(until_s, self.belief)
        self.belief.flush()

    def sample(self, now_s: float) -> tuple[int, int, int, float]:
        """(waiting, running, KV blocks in use, busy seconds so far) at ``now_s``, without advancing a lazy
        run: the KV ``sync`` would reserve is counted, not reserved, so sampling never changes a result."""
        kv_used = self.kv.num_used
        busy = self.stats.busy_s
        run = self._run
        if run is not None:
            busy += min(now_s, run.end_s) - run.start_s
            started = min(run.steps_done(now_s) + 1, run.num_steps)
            if started > run.allocated:
                kv_used += self.cohort.blocks_needed(run.first_clock + run.allocated, started - run.allocated)
        elif not math.isnan(self._step_start_s):
            busy += min(now_s, self._step_end_s) - self._step_start_s
        return len(self.waiting), len(self.running), kv_used, busy

    def final_stats(self) -> InstanceStats:
        self.stats.peak_kv_blocks_used = self.kv.peak_used
        return self.stats

    def _on_retry(self, version: int) -> None:
        if version == self._version:
            self._start_step()

    def _on_run_end(self, version: int) -> None:
        if version != self._version:
            return  # the run was cut short; a later event ends it
        run = self._run
        assert run is not None
        self._run = None
        # Every step is done: apply what is left without searching (KV of all steps is reserved by now,
        # as _advance_run keeps it one step ahead and the final step adds none).
        remaining = run.num_steps - run.applied
        if remaining:
            self.cohort.advance(remaining)
            self._outstanding -= remaining * run.num_decode_seqs
        if run.allocated < run.num_steps:
            needed = self.cohort.blocks_needed(run.first_clock + run.allocated, run.num_steps - run.allocated)
            if not self.kv.reserve(needed):
                raise AssertionError("decode run outgrew the KV capacity it was sized for")
        if run.delivered < run.num_steps:
            batch = run.num_decode_seqs
            durations = run.durations if not run.delivered else run.durations[run.delivered :]
            self.belief.record(0, 0, batch, run.context_tokens + batch * run.delivered, durations)
        stats = self.stats
        stats.num_steps += run.num_steps
        stats.busy_s += sum(run.durations)
        self._finish(self.cohort.pop_finished())
        self._start_step()

    def _on_step_end(self, payload: tuple[int, StepWork, float]) -> None:
        version, work, duration = payload
        if version != self._version:
            return
        now = self.kernel.now_s
        self._step_start_s = math.nan
        self.stats.num_steps += 1
        self.stats.busy_s += duration
        self.belief.record(
            work.num_prefill_tokens,
            work.prefill_context_tokens,
            work.num_decode_seqs,
            work.decode_context_tokens,
            (duration,),
        )
        cohort = self.cohort
        if work.num_decode_seqs:
            cohort.advance(1)
            self._outstanding -= work.num_decode_seqs
        finished = cohort.pop_finished()
        for seq, tokens in work.prefills:
            seq.num_computed_tokens += tokens
            if seq.num_computed_tokens < seq.num_prompt_tokens:
                continue
            seq.num_output_tokens += 1
            self._outstanding -= 1
            if seq.first_token_s is None:
                seq.first_token_s = now
            self.prefilling.remove(seq)
            if seq.num_output_tokens >= seq.true_output_tokens:
                finished.append(seq)
            else:
                cohort.join(seq)
        self._finish(finished)
        self._start_step()

    def _finish(self, done: list[Seq]) -> None:
        if not done:
            return
        now = self.kernel.now_s
        for seq in done:
            del self.running[seq.order]
            self.kv.release(seq)
            # The belief counted max(predicted, 1) tokens; remove whatever of it is left.
            predicted = seq.request.predicted_output_tokens
            self._outstanding -= (predicted if predicted > 1.0 else 1.0) - seq.num_output_tokens
            self.on_finish(seq, self.index, now)
