"""``workloads._sampling``: lognormal parameters and quantiles, token rounding, arrival checks, GC pausing
and turning arrays into single jobs."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.job import JobKind, validate_job
from slosched.workloads._sampling import (
    build_single_jobs,
    check_arrivals,
    gc_paused,
    lognormal_params,
    lognormal_quantile,
    to_tokens,
)


@given(
    mean=st.floats(min_value=1.0, max_value=1e5),
    cv=st.floats(min_value=0.0, max_value=3.0),
)
def test_lognormal_params_reproduce_mean_and_std(mean: float, cv: float) -> None:
    std = cv * mean
    mu, sigma = lognormal_params(mean, std)
    assert math.exp(mu + sigma**2 / 2) == pytest.approx(mean, rel=1e-9)
    variance = math.expm1(sigma**2) * math.exp(2 * mu + sigma**2)
    assert math.sqrt(variance) == pytest.approx(std, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize(("mean", "std"), [(0.0, 1.0), (-1.0, 1.0), (1.0, -0.1)])
def test_lognormal_params_refuse_bad_moments(mean: float, std: float) -> None:
    with pytest.raises(ConfigError, match="lognormal"):
        lognormal_params(mean, std)


def test_lognormal_quantile() -> None:
    mu, sigma = 2.0, 0.5
    assert lognormal_quantile(mu, sigma, 0.5) == pytest.approx(math.exp(mu))
    assert lognormal_quantile(mu, sigma, 0.9) > lognormal_quantile(mu, sigma, 0.5) > lognormal_quantile(mu, sigma, 0.1)
    draws = np.random.default_rng(0).lognormal(mu, sigma, 200_000)
    assert np.quantile(draws, 0.9) == pytest.approx(lognormal_quantile(mu, sigma, 0.9), rel=0.02)


def test_to_tokens_rounds_and_clips() -> None:
    tokens = to_tokens(np.array([-3.0, 0.2, 0.6, 2.5, 3.5, 99.7, 1e12]), 100.9)
    assert tokens.dtype == np.int64
    assert tokens.tolist() == [1, 1, 1, 2, 4, 100, 100]  # banker's rounding of np.rint; cap floored to 100
    assert to_tokens(np.array([5.0]), 0.5).tolist() == [1]  # the cap is at least one token
    assert to_tokens(np.array([1e15]), math.inf).tolist() == [10**15]


@given(st.lists(st.floats(min_value=-1e6, max_value=1e9), max_size=20), st.floats(min_value=1.0, max_value=1e6))
def test_to_tokens_stay_in_range(samples: list[float], cap: float) -> None:
    tokens = to_tokens(np.array(samples, dtype=np.float64), cap)
    assert len(tokens) == len(samples)
    assert all(1 <= t <= math.floor(cap) for t in tokens.tolist())


def test_check_arrivals() -> None:
    times = check_arrivals(np.array([0, 1, 1, 3]))
    assert times.dtype == np.float64 and times.tolist() == [0.0, 1.0, 1.0, 3.0]
    assert len(check_arrivals(np.array([]))) == 0
    for bad in ([1.0, 0.5], [-1.0, 2.0], [0.0, math.nan], [0.0, math.inf]):
        with pytest.raises(ConfigError, match="non-decreasing"):
            check_arrivals(np.array(bad))
    with pytest.raises(ConfigError, match="1-D"):
        check_arrivals(np.zeros((2, 2)))


def test_gc_paused_restores_the_previous_state() -> None:
    was_enabled = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
        with pytest.raises(RuntimeError), gc_paused():
            raise RuntimeError("boom")
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        (gc.enable if was_enabled else gc.disable)()


def test_build_single_jobs_one_value_or_one_per_job() -> None:
    arrivals = np.array([0.0, 0.5, 2.0])
    jobs = build_single_jobs("az", arrivals, np.array([10, 20, 30]), np.array([1, 2, 3]), 8, "chat", 5.0)
    assert [job.id for job in jobs] == ["az-0", "az-1", "az-2"]
    for job, arrival, prompt, output in zip(jobs, arrivals.tolist(), (10, 20, 30), (1, 2, 3), strict=True):
        validate_job(job)
        assert job.kind is JobKind.SINGLE and job.arrival_s == arrival and job.slo_s == 5.0
        assert job.template == "chat"
        (call,) = job.stages[0].calls
        assert (call.input_tokens, call.output_tokens, call.max_output_tokens) == (prompt, output, 8)
        assert type(call.input_tokens) is int  # plain ints, not numpy scalars
    mixed = build_single_jobs("m", arrivals[:2], np.array([1, 1]), np.array([1, 1]), None, ["a", "b"], [None, 3.0])
    assert [(job.template, job.slo_s) for job in mixed] == [("a", None), ("b", 3.0)]
    assert mixed[0].stages[0].calls[0].max_output_tokens is None
    with pytest.raises(ValueError):
        build_single_jobs("x", arrivals, np.array([1, 1, 1]), np.array([1, 1, 1]), None, ["a"])
