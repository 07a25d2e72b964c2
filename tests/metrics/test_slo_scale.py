import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.request import Outcome
from slosched.metrics.slo_scale import (
    attainment_at,
    default_scales,
    min_scale_for,
    min_scale_from_ratios,
    slo_scale_curve,
    slowdown_ratios,
)

from .factories import job, rejected


def four_jobs():
    """Ratios 1, 2, 4 and inf (rejected)."""
    return [
        job("a", latency_s=1.0, no_contention_s=1.0),
        job("b", latency_s=4.0, no_contention_s=2.0),
        job("c", arrival_s=5.0, latency_s=2.0, no_contention_s=0.5),
        rejected("d"),
    ]


def test_ratios_are_latency_over_no_contention_and_inf_when_not_completed():
    jobs = [
        *four_jobs(),
        job("failed", latency_s=3.0, outcome=Outcome.FAILED),
        job("unknown-base", no_contention_s=math.nan),
        job("fast", latency_s=0.5, no_contention_s=1.0),
    ]
    assert slowdown_ratios(jobs).tolist() == [1.0, 2.0, 4.0, math.inf, math.inf, math.inf, 0.5]


def test_curve_counts_ratios_at_or_below_each_scale_over_all_jobs():
    curve = slo_scale_curve(four_jobs(), [0.5, 1.0, 1.5, 2.0, 4.0, 100.0])
    assert curve.tolist() == [0.0, 0.25, 0.25, 0.5, 0.75, 0.75]


def test_default_grid_is_log_spaced_from_1_to_100():
    scales = default_scales()
    assert scales[0] == 1.0 and scales[-1] == pytest.approx(100.0)
    assert np.allclose(np.diff(np.log(scales)), np.log(scales[1] / scales[0]))
    assert slo_scale_curve(four_jobs()).shape == scales.shape


@pytest.mark.parametrize(
    ("target", "expected"),
    [(0.25, 1.0), (0.5, 2.0), (0.51, 4.0), (0.75, 4.0), (0.76, math.inf), (0.95, math.inf), (1.0, math.inf)],
)
def test_min_scale_is_the_ceil_target_n_th_smallest_ratio(target, expected):
    assert min_scale_for(four_jobs(), target) == expected


def test_min_scale_95_and_99_on_twenty_jobs():
    jobs = [job(str(i), latency_s=float(i), no_contention_s=1.0) for i in range(1, 21)]
    assert min_scale_for(jobs, 0.95) == 19.0
    assert min_scale_for(jobs, 0.99) == 20.0


def test_min_scale_is_not_clamped_to_one():
    assert min_scale_for([job(latency_s=0.5, no_contention_s=1.0)], 0.95) == 0.5


def test_min_scale_survives_rounding_of_target_times_n():
    # 0.07 * 100 == 7.000000000000001 in floating point; the 7th smallest ratio is still the answer.
    ratios = np.arange(1.0, 101.0)
    assert min_scale_from_ratios(ratios, 0.07) == 7.0


def test_empty_input_is_undefined_not_an_error():
    assert np.isnan(slo_scale_curve([], [1.0, 2.0])).all()
    assert math.isnan(min_scale_for([], 0.95))


@pytest.mark.parametrize("target", [0.0, -0.1, 1.01, math.nan])
def test_target_outside_unit_interval_is_rejected(target):
    with pytest.raises(ValueError, match="target"):
        min_scale_for(four_jobs(), target)


ratio_values = st.one_of(st.floats(min_value=0.01, max_value=1e4), st.just(math.inf))
ratio_lists = st.lists(ratio_values, min_size=1, max_size=60)
targets = st.floats(min_value=1e-6, max_value=1.0)


@given(ratio_lists, st.lists(st.floats(min_value=0.0, max_value=1e5), min_size=1, max_size=30))
def test_curve_is_monotone_non_decreasing_in_scale(ratios, scales):
    curve = attainment_at(np.array(ratios), np.sort(np.array(scales)))
    assert np.all(np.diff(curve) >= 0)
    assert np.all((curve >= 0) & (curve <= 1))


@given(ratio_lists, targets)
def test_min_scale_reaches_target_and_nothing_smaller_does(ratios, target):
    array = np.array(ratios)
    scale = min_scale_from_ratios(array, target)
    assert attainment_at(array, [scale])[0] >= target
    if math.isfinite(scale):
        assert attainment_at(array, [np.nextafter(scale, -math.inf)])[0] < target
    else:
        assert np.isfinite(array).sum() / array.size < target


@given(st.lists(st.tuples(st.floats(0.01, 100.0), st.floats(0.01, 100.0), st.booleans()), min_size=1), targets)
def test_min_scale_for_jobs_matches_curve(specs, target):
    jobs = [
        job(str(i), latency_s=lat, no_contention_s=base) if ok else rejected(str(i))
        for i, (lat, base, ok) in enumerate(specs)
    ]
    scale = min_scale_for(jobs, target)
    assert slo_scale_curve(jobs, [scale])[0] >= target
