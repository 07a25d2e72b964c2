"""The structural step-time model: it recovers known parameters and converges from the bad guess."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slosched.core.views import StepObservation
from slosched.perf.roofline import RooflineModel
from slosched.perf.structural import (
    BAD_GUESS,
    StructuralParams,
    StructuralStepModel,
    observation_rows,
    predict,
    r_squared,
)

KNOWN = StructuralParams(
    tau0_s=0.004,
    w0=20.0,
    ws=1.0,
    tau_b_s=2e-5,
    tau_s_s=1e-6,
    tau_c_s=4e-8,
    tau_a_s=1e-9,
    pmax=40_000.0,
    k_b=0.2,
    k_s=1 / 400,
)


def _shapes(rng: np.random.Generator, count: int) -> list[tuple[int, int, int, int]]:
    shapes = []
    for _ in range(count):
        decodes = int(rng.integers(0, 200))
        prefill = int(rng.choice([0, 0, int(rng.integers(1, 6000))]))
        if decodes + prefill == 0:
            decodes = 1
        shapes.append(
            (prefill, int(rng.integers(0, 3000)) if prefill else 0, decodes, decodes * int(rng.integers(50, 4000)))
        )
    return shapes


def _observation(shape: tuple[int, int, int, int], seconds: float) -> StepObservation:
    return StepObservation(shape[0], shape[1], shape[2], shape[3], (seconds,))


def _true_seconds(params: StructuralParams, obs: StepObservation) -> float:
    b, s, c, a, _ = observation_rows(obs)[0]
    return predict(params, b, s, c, a)


def test_fit_recovers_known_parameters_from_synthetic_steps() -> None:
    rng = np.random.default_rng(3)
    model = StructuralStepModel()
    for shape in _shapes(rng, 3000):
        obs = _observation(shape, 1.0)
        model.observe_step(_observation(shape, _true_seconds(KNOWN, obs) * rng.lognormal(0, 0.02)))
    assert model.num_shape_fits >= 5 and model.num_linear_fits > 50
    # Shape and peak throughput come back; predictions match on fresh shapes.
    assert model.params.k_s == pytest.approx(KNOWN.k_s, rel=0.25)
    assert model.peak_tokens_per_s(8192) == pytest.approx(8192 / predict(KNOWN, 1, 8192), rel=0.05)
    fresh = [_observation(shape, 1.0) for shape in _shapes(np.random.default_rng(4), 300)]
    truth = np.array([_true_seconds(KNOWN, obs) for obs in fresh])
    fitted = np.array([model.predict_observation_s(obs) for obs in fresh])
    assert np.median(np.abs(fitted / truth - 1)) < 0.03
    assert r_squared(fitted, truth) > 0.99


def test_converges_on_the_roofline_truth_from_the_bad_guess() -> None:
    truth = RooflineModel.build("H100", "Llama-3-8B", 1, "vidur")
    rng = np.random.default_rng(5)
    model = StructuralStepModel()
    shapes = _shapes(rng, 1500)
    seconds = [truth.step_time_s(*shape) for shape in shapes]
    before = np.array([model.predict_observation_s(_observation(shape, 1.0)) for shape in shapes])
    assert np.median(np.abs(before / np.array(seconds) - 1)) > 1.0  # the initial guess really is bad
    for shape, value in zip(shapes, seconds, strict=True):
        model.observe_step(_observation(shape, value * rng.lognormal(0, 0.05)))
    after = np.array([model.predict_observation_s(_observation(shape, 1.0)) for shape in shapes])
    assert r_squared(after, np.array(seconds)) > 0.95
    assert all(value >= 0 for value in model.params.linear())


def test_nothing_is_fitted_while_predicting() -> None:
    model = StructuralStepModel()
    before = model.params
    for _ in range(100):
        model.predict_s(8, 1024, 1000.0)
    assert model.params is before is BAD_GUESS


def test_a_decode_run_gives_spread_rows_with_growing_context() -> None:
    rows = observation_rows(StepObservation(0, 0, 4, 100, tuple([0.01] * 10)))
    assert len(rows) == 4
    assert [row[2] for row in rows] == [100.0, 112.0, 124.0, 136.0]
    assert all(row[0] == 4 and row[1] == 4 for row in rows)


def test_r_squared_edges() -> None:
    assert math.isnan(r_squared(np.array([1.0]), np.array([1.0])))
    assert r_squared(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0])) == pytest.approx(1.0)
