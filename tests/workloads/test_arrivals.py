"""Arrival processes: rates, burstiness, replay, and spec validation."""

from __future__ import annotations

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.workloads.arrivals import ArrivalSpec, gamma, on_off, poisson, replay

NUM = 20_000


def _rate(times: np.ndarray) -> float:
    return (len(times) - 1) / times[-1]


def _cv(times: np.ndarray) -> float:
    gaps = np.diff(times)
    return float(gaps.std() / gaps.mean())


def _check_shape(times: np.ndarray, count: int) -> None:
    assert times.shape == (count,)
    assert times.dtype == np.float64
    assert times[0] == 0.0
    assert np.all(np.diff(times) >= 0)


def test_poisson_rate_and_cv() -> None:
    times = poisson(NUM, 5.0, np.random.default_rng(0))
    _check_shape(times, NUM)
    assert _rate(times) == pytest.approx(5.0, rel=0.03)
    assert _cv(times) == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("cv", [0.5, 1.0, 3.0])
def test_gamma_rate_and_cv(cv: float) -> None:
    times = gamma(NUM, 2.0, cv, np.random.default_rng(1))
    _check_shape(times, NUM)
    assert _rate(times) == pytest.approx(2.0, rel=0.03 * cv + 0.02)
    assert _cv(times) == pytest.approx(cv, rel=0.1)


def test_on_off_mean_rate_and_bursts() -> None:
    times = on_off(NUM, rate_on=10.0, mean_on_s=5.0, mean_off_s=15.0, rng=np.random.default_rng(2))
    _check_shape(times, NUM)
    assert _rate(times) == pytest.approx(10.0 * 5 / 20, rel=0.1)
    assert _cv(times) > 2.0  # OFF periods make gaps far more variable than Poisson
    assert np.max(np.diff(times)) > 5.0


def test_processes_are_deterministic_by_seed() -> None:
    for make in (
        lambda rng: poisson(100, 1.0, rng),
        lambda rng: gamma(100, 1.0, 2.0, rng),
        lambda rng: on_off(100, 3.0, 1.0, 1.0, rng),
    ):
        assert np.array_equal(make(np.random.default_rng(9)), make(np.random.default_rng(9)))
        assert not np.array_equal(make(np.random.default_rng(9)), make(np.random.default_rng(10)))


def test_zero_jobs() -> None:
    rng = np.random.default_rng(0)
    assert len(poisson(0, 1.0, rng)) == 0
    assert len(on_off(0, 1.0, 1.0, 1.0, rng)) == 0
    assert len(replay([5.0, 6.0], num_jobs=0)) == 0


def test_replay_keeps_timing_without_target() -> None:
    stamps = [10.0, 10.5, 12.0, 12.0, 20.0]
    assert replay(stamps).tolist() == [0.0, 0.5, 2.0, 2.0, 10.0]


def test_replay_rescales_to_target_rate_preserving_order() -> None:
    stamps = np.array([3.0, 4.0, 4.5, 8.0, 13.0])
    times = replay(stamps, target_rate=2.0)
    _check_shape(times, 5)
    assert _rate(times) == pytest.approx(2.0)
    # Every gap is scaled by one factor: order and relative burstiness are kept.
    ratios = np.diff(times) / np.diff(stamps)
    assert np.allclose(ratios, ratios[0])


def test_replay_prefix_and_repetition() -> None:
    stamps = [0.0, 1.0, 3.0]
    assert replay(stamps, num_jobs=2).tolist() == [0.0, 1.0]
    # Repeats start one mean gap (1.5 s) after the previous copy ended.
    assert replay(stamps, num_jobs=7).tolist() == [0.0, 1.0, 3.0, 4.5, 5.5, 7.5, 9.0]
    assert _rate(replay(stamps, target_rate=4.0, num_jobs=7)) == pytest.approx(4.0)


def test_replay_rejects_bad_timestamps() -> None:
    with pytest.raises(ConfigError, match="non-decreasing"):
        replay([1.0, 0.5])
    with pytest.raises(ConfigError, match="target_rate"):
        replay([1.0, 1.0], target_rate=2.0)
    with pytest.raises(ConfigError, match="target_rate"):
        replay([1.0, 2.0], target_rate=0.0)


@pytest.mark.parametrize(
    "spec",
    [
        {"process": "poisson", "rate": 3.0},
        {"process": "gamma", "rate": 3.0, "cv": 2.0},
        {"process": "on_off", "rate_on": 6.0, "mean_on_s": 2.0, "mean_off_s": 2.0},
        {"process": "replay", "trace": "azure-conv", "rate": 3.0},
        {"process": "replay", "timestamps": [0.0, 1.0, 1.5, 4.0]},
    ],
)
def test_spec_samples_its_process(spec: dict[str, object]) -> None:
    arrival = ArrivalSpec.from_mapping(spec)
    times = arrival.sample(4000, np.random.default_rng(3))
    _check_shape(times, 4000)
    assert _rate(times) == pytest.approx(arrival.mean_rate, rel=0.15)
    assert np.array_equal(times, arrival.sample(4000, np.random.default_rng(3)))


def test_spec_replay_of_bundled_trace_keeps_its_timing() -> None:
    spec = ArrivalSpec(process="replay", trace="azure-code")
    times = spec.sample(500, np.random.default_rng(0))
    assert times[0] == 0.0 and np.all(np.diff(times) >= 0)
    assert spec.mean_rate == pytest.approx(2.57, rel=0.02)


@pytest.mark.parametrize(
    ("spec", "field", "fragment"),
    [
        ({"process": "poisson", "rate": -1.0}, "arrivals.rate", "greater than 0"),
        ({"process": "poisson", "rate": 0}, "arrivals.rate", "greater than 0"),
        ({"process": "poisson", "rate": float("inf")}, "arrivals.rate", "finite"),
        ({"process": "poisson", "rate": "fast"}, "arrivals.rate", "valid number"),
        ({"process": "poisson"}, "arrivals.rate", "required"),
        ({"process": "gamma", "rate": 1.0, "cv": 0.0}, "arrivals.cv", "greater than 0"),
        ({"process": "gamma", "rate": 1.0, "cv": -2.0}, "arrivals.cv", "greater than 0"),
        ({"process": "gamma", "rate": 1.0}, "arrivals.cv", "required"),
        ({"process": "poisson", "rate": 1.0, "cv": 2.0}, "arrivals.cv", "its parameters: rate"),
        (
            {"process": "on_off", "rate_on": 1.0, "mean_on_s": 0, "mean_off_s": 1},
            "arrivals.mean_on_s",
            "greater than 0",
        ),
        ({"process": "uniform", "rate": 1.0}, "arrivals.process", "'poisson', 'gamma', 'on_off' or 'replay'"),
        ({"process": "replay"}, "arrivals.trace", "exactly one of"),
        ({"process": "replay", "trace": "azure-chat"}, "arrivals.trace", "'azure-conv' or 'azure-code'"),
        ({"process": "poisson", "rate": 1.0, "burst": 2}, "arrivals.burst", "Extra inputs"),
    ],
)
def test_bad_spec_names_field_and_allowed_values(spec: dict[str, object], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ArrivalSpec.from_mapping(spec)
    assert caught.value.field == field
    assert fragment in str(caught.value)


def test_from_mapping_rejects_non_mapping() -> None:
    with pytest.raises(ConfigError, match="arrivals"):
        ArrivalSpec.from_mapping(["poisson"])
