"""The SLO-capacity search: bisection precision, cache reuse, edge cases, and on a real workbench
monotone attainment in rate and reproducibility by seed."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.job import JobSpec
from slosched.evaluation.capacity import MIN_RATE, Spread, find_capacity
from slosched.evaluation.workbench import Candidate, Workbench
from slosched.sim.options import SimOptions
from slosched.workloads.generators import make_workload
from tests.conftest import make_instance


def _step(threshold: float, rate: float) -> float:
    return 1.0 if rate <= threshold else 0.5


@settings(max_examples=60, deadline=None)
@given(threshold=st.floats(0.01, 500.0), guess=st.floats(0.01, 500.0))
def test_finds_a_step_threshold_within_two_percent(threshold: float, guess: float) -> None:
    found = find_capacity(functools.partial(_step, threshold), 0.9, guess)
    assert found <= threshold
    assert found >= threshold / 1.02


def test_reuses_cached_points_and_never_reevaluates() -> None:
    calls: list[float] = []

    def attainment(rate: float) -> float:
        calls.append(rate)
        return 1.0 - rate / 10.0  # 0.9 at rate 1, 0.95 at rate 0.5

    cache: dict[float, float] = {}
    at_90 = find_capacity(attainment, 0.9, 3.0, cache=cache)
    evaluated = len(calls)
    at_95 = find_capacity(attainment, 0.95, 3.0, cache=cache)
    assert at_90 == pytest.approx(1.0, rel=0.02)
    assert at_95 == pytest.approx(0.5, rel=0.02)
    assert at_95 <= at_90
    assert len(calls) == len(set(calls))  # every rate evaluated once
    assert len(calls) - evaluated < evaluated  # the second search starts from the first one's bracket


def test_zero_when_nothing_passes_and_rejects_bad_arguments() -> None:
    assert find_capacity(lambda rate: 0.0, 0.9, 1.0) == 0.0
    assert find_capacity(lambda rate: 1.0, 0.9, MIN_RATE) > 1000
    with pytest.raises(ValueError, match="target"):
        find_capacity(lambda rate: 1.0, 1.5, 1.0)
    with pytest.raises(ValueError, match="guess"):
        find_capacity(lambda rate: 1.0, 0.9, 0.0)


def test_spread_is_median_and_range() -> None:
    spread = Spread.of([3.0, 1.0, 2.0])
    assert (spread.median, spread.low, spread.high) == (2.0, 1.0, 3.0)
    assert spread.text() == "2 [1-3]"


def _chat_jobs(num_jobs: int, seed: int) -> list[JobSpec]:
    return make_workload("azure-conv", {"process": "poisson", "rate": 1.0}, num_jobs, {}, seed=seed)


def _workbench() -> Workbench:
    instances = (make_instance("a"), make_instance("b"))
    return Workbench("chat", instances, _chat_jobs, 120, SimOptions(slo_scale=6.0), num_warmup_jobs=30)


def test_attainment_falls_with_rate_on_common_random_numbers() -> None:
    # Tight deadlines (2x the no-contention latency): on the current-engine truth two instances clear 120
    # chat jobs within 6x even when they all arrive at once, so a looser SLO would not fall at any rate.
    bench = replace(_workbench(), options=SimOptions(slo_scale=2.0))
    candidate = Candidate.of("least-tokens+chunked-fcfs")
    attainments = [bench.run(candidate, rate, seed=3).attainment for rate in (0.5, 8.0, 32.0, 128.0)]
    assert attainments == sorted(attainments, reverse=True)
    assert attainments[0] > attainments[-1]


def test_capacity_is_reproducible_by_seed() -> None:
    bench = _workbench()
    candidate = Candidate.of("least-tokens+chunked-fcfs")

    def capacity(seed: int) -> float:
        return find_capacity(lambda rate: bench.run(candidate, rate, seed).attainment, 0.9, 4.0)

    assert capacity(5) == capacity(5)


def test_warmup_prefix_is_discarded_and_precedes_measured_jobs() -> None:
    bench = _workbench()
    jobs, history = bench.workload(rate=2.0, seed=1)
    warmup = [job for job in jobs if job.id.startswith("warmup-")]
    measured = [job for job in jobs if not job.id.startswith("warmup-")]
    # The bench's 30, or more where 10x the p90 latency of arrivals asks for more (sizing.py).
    assert len(warmup) == bench.warmup_count(2.0, seed=1) >= 30 and len(measured) == 120
    assert max(job.arrival_s for job in warmup) < min(job.arrival_s for job in measured)
    assert len(history) >= 30
    figures = bench.run(Candidate.of("least-tokens+chunked-fcfs"), 2.0, seed=1)
    assert figures.num_jobs == 120


@settings(max_examples=60, deadline=None)
@given(threshold=st.floats(0.01, 500.0), guess=st.floats(0.01, 500.0), growth=st.floats(1.05, 1.5))
def test_a_widening_bracket_finds_the_threshold_from_any_guess(threshold: float, guess: float, growth: float) -> None:
    calls: list[float] = []

    def attainment(rate: float) -> float:
        calls.append(rate)
        return _step(threshold, rate)

    found = find_capacity(attainment, 0.9, guess, growth=growth, widen=True)
    assert threshold / 1.02 <= found <= threshold
    assert len(calls) <= 30  # squared steps: a far threshold takes a few probes, not hundreds of small steps
