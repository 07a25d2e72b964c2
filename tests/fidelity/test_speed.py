"""``fidelity.speed``: a replay simulated at the speed its engine's core had, through a slope fitted on the
calibration steps against the speed probe."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.views import StepObservation
from slosched.fidelity.speed import (
    NO_CORRECTION,
    SpeedModel,
    at_reference_speed,
    fit_speed_model,
    predicted_s,
    replay_factor,
    scaled,
    step_model_ratio,
)
from slosched.perf.profile_fit import MeasuredProfile, fit_mean_profile
from slosched.perf.speed_probe import SpeedProbe, probe_line

PROFILE = Path(__file__).parent / "data" / "profile.json"
SHAPES = [(256, 0, 0, 0), (0, 0, 8, 4000), (64, 0, 16, 6000), (1024, 0, 4, 2000), (0, 0, 32, 9000)]


def _machine(
    slope: float, seconds: int = 60, probe_noise: float = 0.0
) -> tuple[list[tuple[float, StepObservation]], list[tuple[float, float]]]:
    """Steps of one engine on a core whose speed changes every 2 s window (probe 0.4 ms x 0.6..1.8), each step
    costing its profile time x (probe / 0.4 ms) ** ``slope``; ten probes per window, each off by a lognormal
    factor of sigma ``probe_noise``."""
    profile = MeasuredProfile.load(PROFILE)
    rng = np.random.default_rng(3)
    steps, probes = [], []
    for window in range(seconds // 2):
        relative = float(rng.uniform(0.6, 1.8))
        for index in range(40):
            prefill, context, decodes, decode_context = SHAPES[index % len(SHAPES)]
            shape = StepObservation(prefill, context, decodes, decode_context, (0.0,))
            cost = predicted_s(profile, shape) * relative**slope
            steps.append(
                (2.0 * window + 0.05 * index, StepObservation(prefill, context, decodes, decode_context, (cost,)))
            )
        noise = rng.lognormal(0.0, probe_noise, 10) if probe_noise else np.ones(10)
        probes += [(2.0 * window + 0.2 * index + 0.01, 0.0004 * relative * noise[index]) for index in range(10)]
    return steps, probes


def test_the_slope_of_step_time_on_the_probe_is_recovered() -> None:
    steps, probes = _machine(slope=0.5)
    model = fit_speed_model(steps, probes, MeasuredProfile.load(PROFILE))
    assert model.slope == pytest.approx(0.5, abs=0.02) and model.correlation > 0.99
    assert model.windows == 30 and 0.0004 * 0.6 <= model.reference_probe_s <= 0.0004 * 1.8
    # Brought to the reference speed, the steps refit to one profile: the probe explained the swing.
    refit = fit_mean_profile(at_reference_speed(steps, probes, model))
    raw = fit_mean_profile([step for _, step in steps])
    assert refit.residual_rel_std < 0.05 < raw.residual_rel_std
    # A replay on a core at 1.44x the reference probe time runs its steps 1.2x slower.
    slow = [(0.0, model.reference_probe_s * 1.44)] * 3
    assert model.factor(slow) == pytest.approx(1.44**model.slope)


def test_noisy_probes_do_not_flatten_the_slope() -> None:
    steps, probes = _machine(slope=0.9, seconds=240, probe_noise=0.6)
    profile = MeasuredProfile.load(PROFILE)
    model = fit_speed_model(steps, probes, profile)
    assert model.slope == pytest.approx(0.9, abs=0.1)
    # Least squares on the windows' probe medians flattens it (regression dilution), what the fit avoids.
    probe_medians, ratios = [], []
    for window in range(120):
        seen = [probe_s for done_s, probe_s in probes if int(done_s // 2) == window]
        inside = [step for done_s, step in steps if int(done_s // 2) == window]
        probe_medians.append(np.log(np.median(seen) / model.reference_probe_s))
        ratios.append(np.log(sum(s.durations_s[0] for s in inside) / sum(predicted_s(profile, s) for s in inside)))
    assert float(np.polyfit(probe_medians, ratios, 1)[0]) < 0.75


def test_without_probes_or_spread_nothing_is_corrected() -> None:
    steps, _ = _machine(slope=0.5)
    profile = MeasuredProfile.load(PROFILE)
    assert fit_speed_model(steps, [], profile) == NO_CORRECTION
    steady = [(float(t), 0.0004) for t in range(60)]
    model = fit_speed_model(steps, steady, profile)
    assert model.slope == 0.0 and model.factor(steady) == 1.0 and NO_CORRECTION.factor([(0.0, 1.0)]) == 1.0
    assert math.isnan(NO_CORRECTION.correlation) and NO_CORRECTION.to_json_dict()["correlation"] is None


@given(st.floats(0.2, 5.0), st.floats(0.0, 1.5))
def test_a_scaled_profile_charges_every_step_the_factor_and_keeps_the_front_end(factor: float, slope: float) -> None:
    profile = MeasuredProfile.load(PROFILE)
    faster = scaled(profile, factor)
    for shape in SHAPES:
        step = StepObservation(*shape, (0.0,))
        assert predicted_s(faster, step) == pytest.approx(factor * predicted_s(profile, step))
    assert faster.request_overhead_s == profile.request_overhead_s
    assert faster.source["speed_factor"] == round(factor, 4)
    model = SpeedModel(0.0004, slope, 10, 0.9)
    assert model.factor([(0.0, 0.0004 * factor)]) == pytest.approx(factor**slope)


def test_a_replay_is_charged_the_mean_of_its_local_factors_not_its_median_probe() -> None:
    model = SpeedModel(0.0004, 1.0, 10, 0.9)
    # Six seconds at the reference speed, then four at half speed (probe time doubled), ten probes a second:
    # the engine's time adds up to 0.6 x 1 + 0.4 x 2 = 1.4x; the median probe says 1.0x.
    probes = [(0.1 * index, 0.0004 if index < 60 else 0.0008) for index in range(100)]
    assert model.factor(probes) == pytest.approx(1.0)
    assert replay_factor(probes, model) == pytest.approx(1.4, abs=0.03)
    assert replay_factor([], model) == 1.0
    steady = [(0.1 * index, 0.0005) for index in range(30)]
    assert replay_factor(steady, model) == pytest.approx(model.factor(steady)) == pytest.approx(1.25)


@given(st.lists(st.floats(0.0002, 0.002), min_size=1, max_size=40), st.floats(0.0, 1.5))
def test_a_replay_factor_lies_within_its_probes_factors(probe_times: list[float], slope: float) -> None:
    model = SpeedModel(0.0004, slope, 10, 0.9)
    probes = [(0.3 * index, probe_s) for index, probe_s in enumerate(probe_times)]
    each = [model.factor([probe]) for probe in probes]
    assert min(each) * (1 - 1e-9) <= replay_factor(probes, model) <= max(each) * (1 + 1e-9)


def test_the_step_model_ratio_is_engine_time_over_the_charged_time() -> None:
    profile = MeasuredProfile.load(PROFILE)
    steps, _ = _machine(slope=1.0)  # every step at its window's speed, 0.6..1.8x the profile
    speeds = [step.durations_s[0] / predicted_s(profile, step) for _, step in steps]
    assert min(speeds) < 0.9 and max(speeds) > 1.1
    engine_s = sum(step.durations_s[0] for _, step in steps)
    charged_s = sum(predicted_s(profile, step) for _, step in steps)
    assert step_model_ratio(steps, profile, 1.0) == pytest.approx(engine_s / charged_s)
    assert step_model_ratio(steps, profile, engine_s / charged_s) == pytest.approx(1.0)
    # An observation holding two steps of its shape is charged twice.
    twice = [(0.0, StepObservation(256, 0, 0, 0, (0.01, 0.03)))]
    assert step_model_ratio(twice, profile, 1.0) == pytest.approx(0.04 / (2 * predicted_s(profile, twice[0][1])))
    assert math.isnan(step_model_ratio([], profile, 1.0))


def test_the_probe_times_a_fixed_workload_and_writes_a_line() -> None:
    probe = SpeedProbe()
    assert 0 < probe.time_s() < 1.0
    assert probe_line(0.00041234567, 12.5) == '{"probe_s": 0.0004123, "done_s": 12.5}\n'
