"""``vllm_ext.observe``: step shapes from vLLM's scheduled-token map, pairing scheduled outputs with their
completion (synchronous and async scheduling), batched hand-off to the policy's observers, and the stats
export."""

from __future__ import annotations

import pytest

from slosched.core.belief import StepObservation
from slosched.perf.linear import LinearStepPredictor
from slosched.vllm_ext.observe import StepClock, StepShape, StepStats, step_shape


class Recorder:
    def __init__(self) -> None:
        self.seen: list[StepObservation] = []

    def observe_step(self, observation: StepObservation) -> None:
        self.seen.append(observation)


def test_step_shape_splits_prefill_and_decode() -> None:
    computed_after = {"new": 512, "chunk": 1024, "dec1": 101, "dec2": 51, "first-token": 1, "gone": None}
    scheduled = {"new": 512, "chunk": 512, "dec1": 1, "dec2": 1, "first-token": 1, "gone": 7}
    shape = step_shape(scheduled, computed_after.get)
    # "first-token": a one-token prompt is a prefill (no context before it); "gone": unknown -> no context.
    assert shape == StepShape(
        num_prefill_tokens=512 + 512 + 1 + 7,
        prefill_context_tokens=0 + 512 + 0 + 0,
        num_decode_seqs=2,
        decode_context_tokens=100 + 50,
    )
    assert step_shape({}, computed_after.get) == StepShape(0, 0, 0, 0)


def _clock(observers: list[Recorder] | None = None, interval_s: float = 1.0) -> tuple[StepClock, LinearStepPredictor]:
    predictor = LinearStepPredictor()
    return StepClock(predictor, observers or [], interval_s), predictor


SHAPE = StepShape(100, 0, 2, 300)


def test_synchronous_steps_last_from_schedule_to_completion() -> None:
    clock, predictor = _clock()
    clock.scheduled(1, SHAPE, now=10.0)
    observation = clock.completed(1, now=10.04)
    assert observation is not None
    assert (observation.num_prefill_tokens, observation.num_decode_seqs, observation.decode_context_tokens) == (
        100,
        2,
        300,
    )
    assert observation.durations_s == (pytest.approx(0.04),)
    assert predictor.num_observations == 1
    assert clock.completed(1, now=11.0) is None  # each output completes once


def test_empty_steps_are_not_timed() -> None:
    clock, predictor = _clock()
    clock.scheduled(1, StepShape(0, 0, 0, 0), now=1.0)
    assert clock.completed(1, now=2.0) is None
    assert predictor.num_observations == 0


def test_async_steps_last_from_the_previous_completion() -> None:
    clock, _ = _clock()
    clock.scheduled(1, SHAPE, now=0.0)
    clock.scheduled(2, SHAPE, now=0.01)  # scheduled while step 1 still runs
    first = clock.completed(1, now=0.05)
    second = clock.completed(2, now=0.09)
    assert first is not None and second is not None
    assert first.durations_s[0] == pytest.approx(0.05)
    assert second.durations_s[0] == pytest.approx(0.04)  # the pipeline's period, not 0.08
    clock.scheduled(3, SHAPE, now=0.5)  # idle in between: from its own scheduling
    third = clock.completed(3, now=0.53)
    assert third is not None and third.durations_s[0] == pytest.approx(0.03)


def test_observers_get_batches_every_interval() -> None:
    recorder = Recorder()
    clock, _ = _clock([recorder], interval_s=1.0)
    for key in range(3):
        clock.scheduled(key, SHAPE, now=0.1 * key)
        clock.completed(key, now=0.1 * key + 0.05)
    assert clock.flush(now=0.5) == 0 and recorder.seen == []  # less than an interval since the start
    assert clock.flush(now=1.0) == 3 and len(recorder.seen) == 3
    assert clock.flush(now=5.0) == 0  # nothing new
    clock.scheduled(9, SHAPE, now=1.1)
    clock.completed(9, now=1.2)
    assert clock.flush(now=1.5) == 0  # new, but not due (the last hand-off was at 1.0)
    assert clock.flush(now=1.5, force=True) == 1 and len(recorder.seen) == 4


def test_without_observers_nothing_is_batched() -> None:
    clock, _ = _clock([])
    clock.scheduled(1, SHAPE, now=0.0)
    clock.completed(1, now=0.1)
    assert clock.flush(now=10.0, force=True) == 0


def test_stats_export() -> None:
    stats = StepStats()
    empty = stats.to_dict()
    assert empty["num_steps"] == 0 and empty["mean_step_s"] == 0.0 and empty["plugin_us_per_step"] == 0.0
    stats.num_steps, stats.num_timed_steps = 4, 2
    stats.plugin_s, stats.base_schedule_s, stats.step_s = 0.0004, 0.002, 0.1
    stats.count(stats.modes, "gated")
    stats.count(stats.modes, "gated")
    stats.count(stats.relaxed, "kv")
    stats.num_held_running, stats.num_held_waiting = 1, 3
    figures = stats.to_dict()
    assert figures["plugin_us_per_step"] == pytest.approx(100.0)
    assert figures["vllm_schedule_us_per_step"] == pytest.approx(500.0)
    assert figures["mean_step_s"] == pytest.approx(0.05)
    assert (figures["modes"], figures["relaxed"]) == ({"gated": 2}, {"kv": 1})
    assert (figures["held_running"], figures["held_waiting"]) == (1, 3)
    assert figures["totals"] == {"plugin_s": 0.0004, "base_schedule_s": 0.002, "step_s": 0.1, "num_timed_steps": 2}
    figures["modes"]["gated"] = 99  # type: ignore[index]
    assert stats.modes == {"gated": 2}  # the export is a copy
