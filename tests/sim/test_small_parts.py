"""The simulator's small parts on their own: noise stream, decode runs, the belief feed, job DAG state."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.belief import StepObservation
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.core.records import JobRecord
from slosched.core.request import Outcome
from slosched.sim.belief import BeliefFeed
from slosched.sim.decode_run import DecodeRun, decode_step_times
from slosched.sim.jobs import JobState
from slosched.sim.noise import NoiseStream


@settings(max_examples=40, deadline=None)
@given(chunks=st.lists(st.integers(1, 5000), min_size=1, max_size=6))
def test_noise_factor_k_does_not_depend_on_how_steps_are_grouped(chunks: list[int]) -> None:
    grouped = NoiseStream(np.random.default_rng(3), 0.1)
    taken = [value for count in chunks for value in grouped.take(count)]
    one_by_one = NoiseStream(np.random.default_rng(3), 0.1)
    assert taken == [one_by_one.take(1)[0] for _ in range(len(taken))]


def test_noise_gives_back_unused_factors_and_is_exact_without_sigma() -> None:
    stream = NoiseStream(np.random.default_rng(1), 0.2)
    first = stream.take(10)
    stream.give_back(4)
    assert stream.take(4) == first[6:]
    assert NoiseStream(np.random.default_rng(1), 0.0).take(3) == [1.0, 1.0, 1.0]
    factors = NoiseStream(np.random.default_rng(2), 0.3).take(20000)
    assert np.mean(factors) == pytest.approx(1.0, abs=0.01)  # mean-one lognormal


class _Recorder:
    def __init__(self) -> None:
        self.observations: list[StepObservation] = []

    def predict_s(self, *args: int) -> float:
        return 0.0

    def observe(self, observation: StepObservation) -> None:
        self.observations.append(observation)

    def observe_step(self, observation: StepObservation) -> None:
        self.observations.append(observation)


def test_decode_run_cut_and_deliver_report_each_step_once() -> None:
    recorder = _Recorder()
    feed = BeliefFeed(recorder)
    run = DecodeRun(first_clock=0, num_decode_seqs=4, context_tokens=100, start_s=1.0, durations=[0.5] * 6)
    assert run.end_s == pytest.approx(4.0)
    assert run.steps_done(2.2) == 2
    assert run.cut(2.2) == 3  # the step in progress at 2.2 (the third) still ends; three are dropped
    assert run.end_s == pytest.approx(2.5)
    run.deliver(2.1, feed)
    run.deliver(2.1, feed)  # nothing new
    run.deliver(10.0, feed)
    feed.flush()
    assert len(recorder.observations) == 1  # contiguous decode steps merge into one observation
    observation = recorder.observations[0]
    assert (observation.num_decode_seqs, observation.decode_context_tokens) == (4, 100)
    assert list(observation.durations_s) == [0.5, 0.5, 0.5]


def test_belief_feed_merges_only_contiguous_identical_decode_steps_and_feeds_observers() -> None:
    predictor, observer = _Recorder(), _Recorder()
    feed = BeliefFeed(predictor, [observer])  # type: ignore[list-item]
    feed.record(0, 0, 2, 10, [0.1])
    feed.record(0, 0, 2, 12, [0.1, 0.1])  # contiguous: context grew by 2 per step
    feed.record(0, 0, 2, 99, [0.1])  # not contiguous
    feed.record(64, 0, 2, 101, [0.3])  # a prefill step never merges
    assert predictor.observations == []  # nothing reaches the predictor before a flush
    feed.flush()
    assert [len(o.durations_s) for o in predictor.observations] == [3, 1, 1]
    assert observer.observations == predictor.observations
    feed.flush()
    assert len(predictor.observations) == 3


class _BatchRecorder(_Recorder):
    """A predictor with the optional ``observe_steps``: the feed hands it a tick's steps in one call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def observe_steps(self, steps: list[tuple[int, int, int, int, list[float]]]) -> None:
        self.calls += 1
        self.observations.extend(StepObservation(*step) for step in steps)


def _feed_ticks(feed: BeliefFeed) -> None:
    feed.record(0, 0, 2, 10, [0.1])
    feed.record(0, 0, 2, 12, [0.2, 0.3])
    feed.record(64, 0, 2, 101, [0.3])
    feed.flush()
    feed.flush()  # nothing pending: no call
    feed.record(0, 0, 3, 50, [0.4])
    feed.flush()


def test_belief_feed_hands_a_tick_to_observe_steps_in_one_call_unless_observers_need_observations() -> None:
    one, batched, observed = _Recorder(), _BatchRecorder(), _BatchRecorder()
    observer = _Recorder()
    _feed_ticks(BeliefFeed(one))
    _feed_ticks(BeliefFeed(batched))
    _feed_ticks(BeliefFeed(observed, [observer]))  # type: ignore[list-item]
    assert batched.observations == one.observations == observed.observations == observer.observations
    assert [list(o.durations_s) for o in one.observations] == [[0.1, 0.2, 0.3], [0.3], [0.4]]
    assert (batched.calls, observed.calls) == (2, 0)


def test_decode_step_times_sum_their_ends_one_step_at_a_time() -> None:
    factors = [1.0, 0.9, 1.1, 1.05]
    durations, ends = decode_step_times(0.01, 1e-7, 1000, 8, factors, 3.0)
    assert durations == [(0.01 + (1000 + 8 * k) * 1e-7) * factors[k] for k in range(4)]
    assert DecodeRun(0, 8, 992, 3.0, durations).ends == ends
    assert decode_step_times(0.01, 1e-7, 1000, 8, [], 3.0) == ([], [])


def _record(spec: JobSpec, slo_s: float) -> JobRecord:
    return JobRecord(spec.id, spec.kind, "", spec.arrival_s, Outcome.FAILED, spec.num_calls, slo_s, 1.0)


def test_job_state_releases_stages_when_all_parents_finish() -> None:
    call = (CallSpec(10, 5),)
    stages = (
        StageSpec("a", call, after=()),
        StageSpec("b", call, after=()),
        StageSpec("c", call, after=("a", "b")),
    )
    spec = JobSpec("j", JobKind.WORKFLOW, 2.0, stages)
    state = JobState.start(spec, _record(spec, 10.0))
    assert state.deadline_s == 12.0
    assert [stage.name for stage in state.ready_stages()] == ["a", "b"]
    state.calls_left["a"] = 1
    state.calls_left["b"] = 1
    assert state.stage_finished("a") == []
    assert [stage.name for stage in state.stage_finished("b")] == ["c"]
    view = state.view("c")
    assert (view.stage, view.finished_stages, view.deadline_s) == ("c", ("a", "b"), 12.0)
    state.finish(Outcome.COMPLETED, 5.0)
    assert state.done and state.record.outcome is Outcome.COMPLETED and state.record.latency_s == 3.0


def test_job_state_without_slo_has_no_deadline() -> None:
    spec = JobSpec("j", JobKind.SINGLE, 0.0, (StageSpec("s", (CallSpec(1, 1),)),))
    assert math.isinf(JobState.start(spec, _record(spec, math.inf)).deadline_s)
