"""The simulated instance, its step former and its decode cohort, driven directly (small factories)."""

from __future__ import annotations

from typing import Any

import numpy as np

from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.core.views import EngineView, SeqView, StepMode, StepPlan
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.engine.admission.always import AlwaysAdmit
from slosched.policies.engine.base import EnginePolicy
from slosched.policies.engine.ordering.fcfs import FcfsOrdering
from slosched.policies.engine.queue import DEFAULT_WAKE_S
from slosched.sim.belief import BeliefFeed
from slosched.sim.cohort import DecodeCohort
from slosched.sim.instance import SimInstance
from slosched.sim.kernel import EventKernel
from slosched.sim.noise import NoiseStream
from slosched.sim.seq import Seq
from slosched.sim.step import StepFormer

SPEC = InstanceSpec(name="i", gpu="H100", model="m", max_running=8, max_batched_tokens=64, block_size=16)


class Truth:
    def step_time_s(self, num_prefill: int, prefill_ctx: int, num_decode: int, decode_ctx: int) -> float:
        return 0.01

    def decode_step_terms(self, num_decode_seqs: int) -> tuple[float, float]:
        return 0.01, 0.0

    def decode_run_s(self, num_decode_seqs: int, decode_context_tokens: int, num_steps: int) -> np.ndarray:
        return np.full(num_steps, 0.01)


class Chunked:
    time_invariant = True

    def plan(self, engine: EngineView) -> StepPlan:
        return StepPlan(StepMode.MIXED, 64, 8, True)


class Never:
    def __init__(self, time_invariant: bool) -> None:
        self.time_invariant = time_invariant

    def admit(self, seq: SeqView, engine: EngineView) -> bool:
        return False


def make_instance(admission: Any = None, num_blocks: int = 64) -> tuple[SimInstance, list[Seq]]:
    policy = EnginePolicy("t", FcfsOrdering(), admission or AlwaysAdmit(), Chunked())
    kernel = EventKernel()
    finished: list[Seq] = []
    instance = SimInstance(
        0,
        SPEC,
        num_blocks,
        Truth(),
        NoiseStream(np.random.default_rng(0), 0.0),
        policy,
        BeliefFeed(LinearStepPredictor()),
        kernel,
        lambda seq, index, now: finished.append(seq),
        16,
    )
    return instance, finished


def make_seq(name: str, prompt: int, output: int, arrival: float = 0.0) -> Seq:
    request = Request(
        id=name,
        job_id=name,
        stage="s",
        template="t",
        prompt_tokens=prompt,
        max_output_tokens=output,
        arrival_s=arrival,
        job_arrival_s=arrival,
    )
    return Seq(request, output, arrival, 0, prompt)


def test_chunked_step_takes_waiting_requests_in_order_within_the_token_budget() -> None:
    instance, _ = make_instance()
    former = StepFormer(instance, instance, instance.queue)
    for order, (name, prompt) in enumerate((("a", 40), ("b", 40), ("c", 8))):
        seq = make_seq(name, prompt, 4)
        seq.order = order  # what enqueue() would number it
        instance.queue.push(seq, instance)
    work = former.form(Chunked().plan(instance))
    assert [(seq.request.id, tokens) for seq, tokens in work.prefills] == [("a", 40), ("b", 24)]  # budget 64
    assert [seq.request.id for seq in instance.waiting] == ["c"]
    assert list(instance.running) == [seq.order for seq, _ in work.prefills]
    assert instance.kv.num_free == 64 - 3 - 2  # ceil(40/16) + ceil(24/16) blocks


def test_requests_run_to_completion_and_free_their_kv() -> None:
    instance, finished = make_instance()
    for name, prompt in (("a", 20), ("b", 50)):
        instance.enqueue(make_seq(name, prompt, 5))
    instance.kernel.run()
    assert sorted(seq.request.id for seq in finished) == ["a", "b"]
    assert all(seq.num_output_tokens == 5 for seq in finished)
    assert instance.kv.num_used == 0  # every block released (cached prefix blocks count as free)
    assert not instance.running and not instance.waiting


def test_a_time_invariant_hold_idles_until_an_arrival() -> None:
    instance, _ = make_instance(Never(time_invariant=True))
    instance.enqueue(make_seq("a", 20, 5))
    assert instance.kernel.pending == 0 and not instance._busy  # nothing can change until the queue does


def test_a_time_dependent_hold_looks_again_at_the_queue_wake_up() -> None:
    instance, _ = make_instance(Never(time_invariant=False))
    instance.enqueue(make_seq("a", 20, 5))
    assert instance.kernel.pending == 1
    instance.kernel.run(until_s=DEFAULT_WAKE_S)
    assert instance.kernel.now_s == DEFAULT_WAKE_S and instance.kernel.pending == 1


def test_cohort_advances_all_members_by_one_clock_and_counts_kv_blocks() -> None:
    cohort = DecodeCohort(block_size=4)
    first, second = make_seq("a", 6, 3), make_seq("b", 3, 5)
    for order, seq in enumerate((first, second)):
        seq.order, seq.num_computed_tokens, seq.num_output_tokens = order, seq.num_prompt_tokens, 1
        cohort.join(seq)
    assert cohort.context_tokens == (6 + 1) + (3 + 1)
    assert cohort.next_step_blocks() == 0  # 6 -> 7 and 3 -> 4 stay within their blocks
    cohort.advance(2)
    assert cohort.blocks_needed(cohort.clock, 4) == 2  # each member crosses one boundary in 4 steps
    assert [seq.request.id for seq in cohort.pop_finished()] == ["a"]  # 1 + 2 = 3 output tokens
    assert first.num_output_tokens == 3 and first.num_computed_tokens == 8 and len(cohort) == 1
    assert cohort.steps_to_next_finish() == 2
