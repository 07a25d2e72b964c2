"""Run lengths: the measured window (20 p90 latencies of arrivals, and in full forms enough jobs that their
work averages out: the work rule) and the warm-up prefix (a quarter of the run
in jobs, and half the window in time, so that a cold cluster settles before the measured jobs arrive)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.evaluation import sizing
from slosched.evaluation.sizing import (
    jobs_needed,
    p90_no_contention_s,
    prefix_jobs,
    warmup_for,
    work_jobs,
    work_tolerance,
)
from slosched.evaluation.workbench import HISTORY_SEED_OFFSET, WARMUP_PREFIX, Workbench
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
    assert (needed - 1) / rate >= sizing.WINDOW_FACTOR * p90 * (1 - 1e-9)  # n jobs at unit rate span n - 1 s
    assert jobs_needed(p90, 2 * rate, floor) >= needed and jobs_needed(2 * p90, rate, floor) >= needed


def test_sizing_without_a_latency_or_rate_is_the_floor() -> None:
    assert jobs_needed(0.0, 3.0, 80) == 80 and jobs_needed(math.nan, 3.0, 80) == 80 and jobs_needed(1.0, 0.0, 80) == 80


def test_p90_latency_is_of_the_jobs_on_the_fastest_instance() -> None:
    jobs = _chat_jobs(60, 0)
    both, slow_only = p90_no_contention_s(make_cluster(1, 1), jobs), p90_no_contention_s(make_cluster(0, 1), jobs)
    assert 0 < both <= p90_no_contention_s(make_cluster(1, 0), jobs) + 1e-12
    assert slow_only > both  # the A6000 alone is slower than the A100
    assert p90_no_contention_s(make_cluster(1, 1), []) == 0.0


@given(st.integers(1, 5000), st.floats(0.01, 100.0), st.floats(0.01, 1000.0))
def test_a_sized_run_warms_up_for_ten_p90_latencies_of_arrivals_and_never_fewer_jobs_than_the_floor(
    floor: int, p90: float, rate: float
) -> None:
    measured = jobs_needed(p90, rate, floor)  # a run as long as the steady-state rule asks
    count = prefix_jobs(floor, p90, rate, measured)
    assert count >= floor
    assert count / rate >= sizing.prefix_factor() * p90 * (1 - 1e-9)
    assert prefix_jobs(floor, p90, 2 * rate, 2 * measured) >= count
    assert prefix_jobs(floor, 2 * p90, rate, 2 * measured) >= count


@given(st.integers(1, 500), st.integers(1, 500), st.floats(0.01, 100.0), st.floats(0.01, 1000.0))
def test_a_short_run_keeps_its_prefix_within_its_own_length(floor: int, measured: int, p90: float, rate: float) -> None:
    count = prefix_jobs(floor, p90, rate, measured)
    assert floor <= count <= max(floor, measured)


def test_a_cold_start_stays_cold_and_an_unknown_latency_keeps_the_floor() -> None:
    assert prefix_jobs(0, 30.0, 2.0, 1000) == 0  # the cold-start experiment runs no prefix at any rate
    assert prefix_jobs(25, math.nan, 2.0, 1000) == 25 and prefix_jobs(25, 0.0, 2.0, 1000) == 25
    assert prefix_jobs(25, 1.0, 0.0, 1000) == 25
    assert warmup_for(400) == 100


def test_a_run_at_a_higher_rate_warms_up_for_the_same_time_on_more_of_the_past_traffic() -> None:
    bench = Workbench("chat", make_cluster(1, 1), _chat_jobs, 2000, SimOptions(slo_scale=3.0), num_warmup_jobs=10)
    history = _chat_jobs(bench.history_size, 5 + HISTORY_SEED_OFFSET)
    p90 = p90_no_contention_s(bench.instances, history)
    assert bench.num_jobs >= jobs_needed(p90, 8.0, 10)  # long enough for the steady-state rule at both rates
    spans = []
    for rate in (2.0, 8.0):
        jobs, seen = bench.workload(rate, seed=5)
        assert seen == history  # the deadlines' past traffic does not move with the rate
        prefix = [job for job in jobs if job.id.startswith(WARMUP_PREFIX)]
        assert len(prefix) == bench.warmup_at(rate, history) > bench.num_warmup_jobs
        # The prefix is the past traffic's own stream, never a measured job, at the run's rate.
        past = _chat_jobs(len(prefix), 5 + HISTORY_SEED_OFFSET)
        assert [job.stages for job in prefix] == [job.stages for job in past]
        assert [job.arrival_s for job in prefix] == [job.arrival_s / rate for job in past]
        measured = [job for job in jobs if not job.id.startswith(WARMUP_PREFIX)]
        assert measured[0].arrival_s > prefix[-1].arrival_s  # then the measured jobs, at the run's rate
        spans.append(len(prefix) / rate)
    assert all(span >= sizing.prefix_factor() * p90 * (1 - 1e-9) for span in spans)
    assert abs(spans[0] - spans[1]) <= 1.0  # the same time at either rate (to within one job)


def _jobs_of_tokens(tokens: list[int]) -> list[JobSpec]:
    """One single-call job per entry, its prompt and output splitting the entry's tokens."""
    return [
        JobSpec(f"j{i}", JobKind.SINGLE, float(i), (StageSpec("s", (CallSpec(count - count // 2, count // 2),)),))
        for i, count in enumerate(tokens)
    ]


def test_jobs_of_one_size_need_one_over_the_tolerance_squared() -> None:
    assert work_jobs(_jobs_of_tokens([500] * 30), 0.05) == 400  # Poisson arrivals alone: 1 / 0.05^2
    assert work_jobs(_jobs_of_tokens([500] * 30), 0.10) == 100


@given(st.lists(st.integers(2, 100_000), min_size=2, max_size=200), st.floats(0.02, 0.5))
def test_the_work_rule_grows_with_the_spread_of_job_sizes(tokens: list[int], tolerance: float) -> None:
    sizes = np.array(tokens, dtype=float)
    spread = sizes.var() / sizes.mean() ** 2
    needed = work_jobs(_jobs_of_tokens(tokens), tolerance)
    assert needed == math.ceil((1 + spread) / tolerance**2)
    assert work_jobs(_jobs_of_tokens(tokens), tolerance / 2) >= 4 * needed - 4  # half the tolerance: 4x the jobs


def test_at_the_count_the_rule_asks_the_work_of_a_run_fluctuates_by_the_tolerance() -> None:
    """The rule's claim, by simulation: runs of ``work_jobs`` Poisson arrivals of these jobs (a relQuery-like
    spread: 1-100 rows) bring tokens whose standard deviation over runs is the tolerance of their mean."""
    rng = np.random.default_rng(7)
    tokens = [int(200 * rows) for rows in rng.integers(1, 101, 300)]
    needed = work_jobs(_jobs_of_tokens(tokens), 0.05)
    assert 500 <= needed <= 600  # the spread of 1-100 rows asks about 540 jobs
    # A window that expects `needed` arrivals: a Poisson count of jobs, each drawn from the sizes.
    totals = [rng.choice(tokens, rng.poisson(needed)).sum() for _ in range(4000)]
    assert np.std(totals) / np.mean(totals) == pytest.approx(0.05, rel=0.08)


def test_the_work_rule_is_off_without_sizes_and_adds_to_the_time_rule() -> None:
    assert work_jobs(_jobs_of_tokens([500]), 0.05) == 0 and work_jobs([], 0.05) == 0
    assert work_jobs(_jobs_of_tokens([500, 700]), 0.0) == 0
    assert jobs_needed(1.0, 2.0, 10, work=400) == 400 and jobs_needed(100.0, 2.0, 10, work=400) == 4001
    assert jobs_needed(math.nan, 2.0, 10, work=400) == 400  # no latency: the floor and the work rule
    assert work_tolerance(quick=False) == sizing.WORK_TOLERANCE and work_tolerance(quick=True) is None


def test_a_workbench_asks_the_work_rule_only_where_it_is_on() -> None:
    jobs = _chat_jobs(200, 3)
    bench = Workbench("chat", make_cluster(1, 1), _chat_jobs, 80, SimOptions())
    assert bench.work_floor(jobs) == 0
    assert dataclasses.replace(bench, work_tolerance=0.05).work_floor(jobs) == work_jobs(jobs, 0.05) > 400


def test_a_report_qualifies_its_job_count_only_where_the_work_rule_ran() -> None:
    assert sizing.work_rule_name(0.05) == sizing.WORK_RULE_NAME and sizing.work_rule_name(None) == "off"
    assert sizing.work_rule_clause("off") == "" and sizing.work_rule_clause(None) == ""
    assert "work rule" in sizing.work_rule_clause(sizing.WORK_RULE_NAME)
