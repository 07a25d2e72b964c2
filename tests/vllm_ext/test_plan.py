"""Properties of the per-step decision and its exact undo, on fake requests (no vLLM)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.views import StepMode, StepPlan
from slosched.vllm_ext.metadata import TRUST_UNSIGNED, MetadataProblems
from slosched.vllm_ext.plan import decide_step, restore_running
from slosched.vllm_ext.views import VllmSeq
from tests.vllm_ext.fakes import FakeRequest

LIMITS = (256, 8)


def _state(seed: int, num_running: int, num_waiting: int) -> tuple[list[FakeRequest], list[VllmSeq], random.Random]:
    rng = random.Random(seed)
    running = [
        FakeRequest(f"r{i}", 50, 30 if rng.random() < 0.3 else 60, chunk=rng.random() < 0.3) for i in range(num_running)
    ]
    problems = MetadataProblems()
    waiting = [VllmSeq(FakeRequest(f"w{i}", rng.randint(1, 300)), problems, TRUST_UNSIGNED) for i in range(num_waiting)]
    return running, waiting, rng


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    num_running=st.integers(0, 8),
    num_waiting=st.integers(0, 12),
    mode=st.sampled_from(list(StepMode)),
    budget=st.integers(-5, 1000),
    cap=st.integers(-2, 20),
    drain=st.booleans(),
    stalled=st.booleans(),
)
def test_decision_partitions_queues_and_respects_limits(
    seed: int, num_running: int, num_waiting: int, mode: StepMode, budget: int, cap: int, drain: bool, stalled: bool
) -> None:
    running, waiting, rng = _state(seed, num_running, num_waiting)

    def admit(free: int, room: int) -> list[VllmSeq]:
        return [seq for seq in waiting if rng.random() < 0.6][: max(free, 0)]

    d = decide_step(StepPlan(mode, budget, cap, True), running, waiting, admit, LIMITS, drain, stalled)
    ids = [id(raw) for raw in d.admitted] + [id(raw) for raw in d.held_waiting]
    assert sorted(ids) == sorted(id(seq.raw) for seq in waiting)  # every waiting request exactly once
    assert {id(raw) for raw in d.held_running} <= {id(raw) for raw in running}
    assert 1 <= d.token_budget <= LIMITS[0] and 0 <= d.max_active <= LIMITS[1]
    if running:
        assert len(d.held_running) < len(running) or d.admitted  # never an empty step by our doing
    if drain:
        assert not d.admitted
    visible_decodes = [raw for raw in running if not raw.is_prefill_chunk and raw not in d.held_running]
    assert d.token_budget >= min(len(visible_decodes), LIMITS[0])  # a decode batch is never split
    if d.mode is StepMode.DECODE_ONLY:
        assert not d.admitted and all(raw.is_prefill_chunk for raw in d.held_running)
    if d.mode is StepMode.MIXED and not d.relaxed:
        assert not d.held_running


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), size=st.integers(0, 10), new=st.integers(0, 4))
def test_restore_puts_held_requests_back_in_their_slots(seed: int, size: int, new: int) -> None:
    rng = random.Random(seed)
    original = [FakeRequest(f"r{i}") for i in range(size)]
    held = [raw for raw in original if rng.random() < 0.4]
    visible = [raw for raw in original if raw not in held]
    preempted = {id(raw) for raw in visible if rng.random() < 0.2}
    admitted = [FakeRequest(f"n{i}") for i in range(new)]
    after = [raw for raw in visible if id(raw) not in preempted] + admitted  # what vLLM's schedule() does
    restored = restore_running(original, held, after)
    assert restored == [raw for raw in original if id(raw) not in preempted] + admitted


def test_mode_semantics_on_a_fixed_state() -> None:
    decode = FakeRequest("d", 50, 60)
    chunk = FakeRequest("c", 500, 128, chunk=True)
    waiting = [VllmSeq(FakeRequest("w", 100), MetadataProblems(), TRUST_UNSIGNED)]

    def admit(free: int, room: int) -> list[VllmSeq]:
        return waiting[:free]

    def run(mode: StepMode, budget: int = 256, cap: int = 8) -> object:
        return decide_step(StepPlan(mode, budget, cap, True), [decode, chunk], waiting, admit, LIMITS)

    only_decode = run(StepMode.DECODE_ONLY)
    assert only_decode.held_running == [chunk] and not only_decode.admitted  # type: ignore[attr-defined]
    prefill = run(StepMode.PREFILL_FIRST)
    assert prefill.held_running == [decode] and prefill.admitted == [waiting[0].raw]  # type: ignore[attr-defined]
    mixed = run(StepMode.MIXED, budget=64, cap=2)
    assert mixed.token_budget == 64 and mixed.max_active == 2 and not mixed.admitted  # type: ignore[attr-defined]
    huge = run(StepMode.MIXED, budget=10**6, cap=10**6)
    assert (huge.token_budget, huge.max_active) == LIMITS  # type: ignore[attr-defined]  # never above configured
