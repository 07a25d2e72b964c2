"""A run's judgement (``evaluation/judgement.py``): the second half up to its sampling error, so chance in half
the jobs does not fail a rate the cluster carries while a backlog that grows through the run still does."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.evaluation.judgement import (
    SECOND_HALF_Z,
    judged_attainment,
    second_half_allowance,
    widest_allowance,
)

TARGET = 0.90


def test_the_allowance_is_z_binomial_standard_errors_at_the_overall_attainment() -> None:
    assert second_half_allowance(0.9, 270) == pytest.approx(SECOND_HALF_Z * math.sqrt(0.9 * 0.1 / 270))
    assert second_half_allowance(0.9, 270) == pytest.approx(0.0365, abs=5e-4)
    assert second_half_allowance(0.9, 1000) == pytest.approx(0.019, abs=5e-4)
    # Nothing varies at 0 or 1, and a second half without jobs judges nothing.
    assert second_half_allowance(1.0, 50) == second_half_allowance(0.0, 50) == second_half_allowance(0.9, 0) == 0.0


@given(st.floats(0, 1), st.integers(1, 10_000), st.integers(1, 10_000))
def test_the_allowance_shrinks_with_jobs_and_the_widest_bounds_it(share: float, fewer: int, more: int) -> None:
    fewer, more = min(fewer, more), max(fewer, more)
    assert second_half_allowance(share, more) <= second_half_allowance(share, fewer)
    assert second_half_allowance(share, fewer) <= widest_allowance(fewer) + 1e-12


@given(st.floats(0, 1), st.floats(0, 1), st.integers(1, 10_000))
def test_judged_is_never_above_the_whole_run_nor_below_the_strict_judgement(
    whole: float, late: float, num_late: int
) -> None:
    judged = judged_attainment(whole, late, num_late)
    assert min(whole, late) <= judged <= whole
    assert judged_attainment(whole, math.nan, num_late) == whole


def _failure_rates(true_share: float, num_jobs: int, trials: int) -> tuple[float, float, float]:
    """Over ``trials`` steady runs (every job meets its SLO with ``true_share``, independently), how often
    the whole run alone, the strict lower-of-two and this judgement fail the target."""
    rng = np.random.default_rng(7)
    half = num_jobs // 2
    early = rng.binomial(num_jobs - half, true_share, trials)
    late = rng.binomial(half, true_share, trials)
    whole, second = (early + late) / num_jobs, late / half
    judged = np.array([judged_attainment(w, s, half) for w, s in zip(whole, second, strict=True)])
    strict = np.minimum(whole, second)
    return float(np.mean(whole < TARGET)), float(np.mean(strict < TARGET)), float(np.mean(judged < TARGET))


@pytest.mark.parametrize("num_jobs", [540, 2000])
def test_a_steady_run_fails_about_as_often_as_on_all_jobs_alone(num_jobs: int) -> None:
    alone, strict, judged = _failure_rates(0.92, num_jobs, 20_000)
    # The lower of two estimates fails a carried rate markedly more often than either (the bias that made
    # short runs' capacities lower); the allowance takes the second half's share of it back out.
    assert strict > alone * 1.5
    assert judged <= alone + 0.01


def test_a_backlog_that_grows_through_the_run_still_fails() -> None:
    # The first half all met, the second at 82%: over all jobs 91% passes, the second half fails by more
    # than its sampling error.
    whole, late = (270 + 0.82 * 270) / 540, 0.82
    assert whole >= TARGET
    assert judged_attainment(whole, late, 270) < TARGET
    # Within its sampling error (88% over 270 jobs) the same whole-run figure passes.
    assert judged_attainment(0.91, 0.88, 270) >= TARGET
