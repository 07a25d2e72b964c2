"""Steady-state SLO capacity: the sizing rule, the second-half judgement, regrowth and the steady flag."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.job import JobSpec
from slosched.evaluation import steady
from slosched.evaluation.steady import (
    SteadySearch,
    converged,
    jobs_needed,
    long_search,
    p90_no_contention_s,
    steady_capacity,
)
from slosched.evaluation.workbench import Candidate, RunFigures, Workbench, second_half_attainment
from slosched.sim.options import SimOptions
from slosched.workloads.generators import make_workload
from tests.conftest import make_cluster


def _chat_jobs(num_jobs: int, seed: int) -> list[JobSpec]:
    return make_workload("azure-conv", {"process": "poisson", "rate": 1.0}, num_jobs, {}, seed=seed)


@given(
    st.floats(0.01, 100.0),
    st.floats(0.01, 1000.0),
    st.integers(1, 5000),
)
def test_runs_span_twenty_p90_latencies_and_never_fewer_jobs_than_the_floor(
    p90: float, rate: float, floor: int
) -> None:
    needed = jobs_needed(p90, rate, floor)
    assert needed >= floor
    assert (needed - 1) / rate >= steady.WINDOW_FACTOR * p90 * (1 - 1e-9)  # n jobs at unit rate span n - 1 s
    assert jobs_needed(p90, 2 * rate, floor) >= needed and jobs_needed(2 * p90, rate, floor) >= needed


def test_sizing_without_a_latency_or_rate_is_the_floor() -> None:
    assert jobs_needed(0.0, 3.0, 80) == 80 and jobs_needed(math.nan, 3.0, 80) == 80 and jobs_needed(1.0, 0.0, 80) == 80


def test_p90_latency_is_of_the_jobs_on_the_fastest_instance() -> None:
    jobs = _chat_jobs(60, 0)
    both, slow_only = p90_no_contention_s(make_cluster(1, 1), jobs), p90_no_contention_s(make_cluster(0, 1), jobs)
    assert 0 < both <= p90_no_contention_s(make_cluster(1, 0), jobs) + 1e-12
    assert slow_only > both  # the A6000 alone is slower than the A100
    assert p90_no_contention_s(make_cluster(1, 1), []) == 0.0


@given(st.lists(st.tuples(st.floats(0, 1000), st.booleans()), min_size=1, max_size=60))
def test_the_second_half_is_judged_on_late_arrivals_only(met: list[tuple[float, bool]]) -> None:
    first, last = min(a for a, _ in met), max(a for a, _ in met)
    middle = first + (last - first) / 2
    late = [ok for arrival, ok in met if arrival >= middle]
    value = second_half_attainment(met, middle)
    assert late  # the last arrival is always in the second half
    assert value == pytest.approx(sum(late) / len(late))


@given(st.floats(0, 1), st.floats(0, 1))
def test_a_rate_passes_only_where_both_halves_pass(whole: float, late: float) -> None:
    figures = RunFigures(1.0, 0, 100, whole, 1.0, 0, attainment_second_half=late)
    assert figures.judged == min(whole, late)
    assert (figures.judged >= 0.9) == (whole >= 0.9 and late >= 0.9)
    assert RunFigures(1.0, 0, 100, whole, 1.0, 0).judged == whole  # no second half: the whole run


@pytest.mark.parametrize(
    ("short", "long", "expected"),
    [(1.0, 1.0, True), (1.04, 1.0, True), (0.96, 1.0, True), (1.06, 1.0, False), (0.9, 1.0, False)],
)
def test_steady_only_where_the_4x_run_agrees_within_five_percent(short: float, long: float, expected: bool) -> None:
    assert converged(short, long) is expected


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True, allow_infinity=True))
def test_steady_needs_two_positive_finite_capacities(short: float, long: float) -> None:
    if not (math.isfinite(short) and math.isfinite(long) and short > 0 and long > 0):
        assert converged(short, long) is False
    else:
        assert converged(short, long) == (abs(short - long) <= 0.05 * long)


TRUE_CAPACITY = 2.0
BURST_JOBS = 400  # a run shorter than this clears a burst: its apparent capacity is inflated


def test_a_short_search_regrows_until_its_runs_are_long_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake cluster whose apparent capacity is inflated by short runs (``2 x max(1, 400 / n)``): the search
    grows its job count (one count per search) until it is as long as the capacity it finds needs."""
    calls: list[tuple[int, float]] = []

    def run(self: Workbench, candidate: Candidate, rate: float, seed: int) -> RunFigures:
        calls.append((self.num_jobs, rate))
        ok = rate <= TRUE_CAPACITY * max(1.0, BURST_JOBS / self.num_jobs)
        return RunFigures(rate, seed, self.num_jobs, 0.95 if ok else 0.5, rate, 0, 0.95 if ok else 0.5)

    monkeypatch.setattr(Workbench, "run", run)
    # The 2023 engine's slower no-contention latencies make the needed job count exceed BURST_JOBS, which
    # this fake relies on (on vllm-v1 the same jobs need fewer).
    cluster = tuple(dataclasses.replace(spec, stack="splitwise") for spec in make_cluster(1, 1))
    bench = Workbench("fake", cluster, _chat_jobs, 80, SimOptions(), num_warmup_jobs=20)
    found = steady_capacity(bench, Candidate.of("least-tokens+chunked-fcfs"), 1, SteadySearch(guess=1.0))
    assert found.rounds >= 2 and found.sized
    assert found.capacity[0.9] == pytest.approx(TRUE_CAPACITY, rel=0.03)
    assert found.num_jobs >= jobs_needed(found.p90_latency_s, found.capacity[0.9], 80)
    assert found.attainment == (0.95, 0.95)
    counts = [count for count, _ in calls]
    assert counts[0] == 80 and counts == sorted(counts)  # one count per search, growing between searches
    assert len(set(counts)) == found.rounds
    longer = long_search(found, SteadySearch(guess=1.0))
    assert longer.floor == steady.LONG_FACTOR * found.num_jobs and longer.guess == found.capacity[0.9]


def test_regrowth_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster that clears any run as a burst never gets a sized answer, but the search stops."""

    def run(self: Workbench, candidate: Candidate, rate: float, seed: int) -> RunFigures:
        return RunFigures(rate, seed, self.num_jobs, 1.0 if rate <= 50.0 else 0.0, rate, 0, 1.0)

    monkeypatch.setattr(Workbench, "run", run)
    monkeypatch.setattr(steady, "MAX_JOBS", 2_000)
    bench = Workbench("fake", make_cluster(1, 1), _chat_jobs, 80, SimOptions(), num_warmup_jobs=20)
    found = steady_capacity(bench, Candidate.of("least-tokens+chunked-fcfs"), 1, SteadySearch(guess=1.0))
    assert found.rounds <= steady.MAX_ROUNDS and found.num_jobs <= 2_000
    assert not found.sized
