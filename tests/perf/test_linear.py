from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.views import StepObservation
from slosched.perf.linear import (
    DEFAULT_PRIOR,
    LinearStepCoefficients,
    LinearStepPredictor,
    _observation_rows,
    fit_coefficients,
    prior_from_model,
    step_shape,
)
from slosched.perf.roofline import RooflineModel

TRUE = LinearStepCoefficients(0.008, 5e-5, 3e-4, 6e-8)


def true_time(p: int, pc: int, d: int, dc: int) -> float:
    return TRUE.c0_s + TRUE.prefill_s_per_token * p + TRUE.decode_s_per_seq * d + TRUE.context_s_per_token * (pc + dc)


def synthetic(rng: np.random.Generator, n: int, noise: float = 0.03) -> list[StepObservation]:
    observations = []
    for _ in range(n):
        p = int(rng.choice([0, 0, 128, 512, 2048]))
        pc = int(rng.integers(0, 2048)) if p else 0
        d = int(rng.integers(0 if p else 1, 128))
        dc = d * int(rng.integers(100, 4000))
        steps = 1 if p else int(rng.integers(1, 50))
        durations = [true_time(p, pc, d, dc + k * d) * (1.0 + noise * rng.standard_normal()) for k in range(steps)]
        observations.append(StepObservation(p, pc, d, dc, durations))
    return observations


def test_works_with_no_data() -> None:
    predictor = LinearStepPredictor()
    assert predictor.coefficients == DEFAULT_PRIOR
    assert predictor.predict_s(0, 0, 1, 100) > 0.0
    predictor.refit()  # no-op without observations
    assert predictor.num_observations == 0


def test_recovers_known_coefficients_from_noisy_steps() -> None:
    rng = np.random.default_rng(7)
    predictor = LinearStepPredictor(window=400)
    for observation in synthetic(rng, 400):
        predictor.observe(observation)
    fitted = predictor.coefficients.as_array()
    np.testing.assert_allclose(fitted, TRUE.as_array(), rtol=0.08)
    for shape in [(0, 0, 32, 32 * 1000), (512, 0, 16, 16 * 800), (2048, 1024, 0, 0)]:
        assert predictor.predict_s(*shape) == pytest.approx(true_time(*shape), rel=0.03)


def test_converges_from_a_bad_prior() -> None:
    rng = np.random.default_rng(3)
    bad = LinearStepCoefficients(1.0, 1e-2, 1e-1, 1e-5)
    predictor = LinearStepPredictor(prior=bad, window=200)
    for observation in synthetic(rng, 200, noise=0.0):
        predictor.observe(observation)
    np.testing.assert_allclose(predictor.coefficients.as_array(), TRUE.as_array(), rtol=0.01)


def test_unidentified_coefficients_stay_at_the_prior() -> None:
    predictor = LinearStepPredictor()
    for batch in (1, 4, 16, 64):  # decode only: no prefill information at all
        predictor.observe(StepObservation(0, 0, batch, batch * 500, [true_time(0, 0, batch, batch * 500)] * 3))
    assert predictor.coefficients.prefill_s_per_token == pytest.approx(DEFAULT_PRIOR.prefill_s_per_token)


def test_run_compression_is_exact_for_least_squares() -> None:
    rng = np.random.default_rng(11)
    d, dc, n = 16, 16 * 300, 500
    durations = [true_time(0, 0, d, dc + k * d) + 1e-3 * rng.standard_normal() for k in range(n)]
    observation = StepObservation(0, 0, d, dc, durations)
    compressed = _observation_rows(step_shape(observation), max_run_weight=float(n))
    expanded = [(1.0, 0.0, float(d), float(dc + k * d), durations[k]) for k in range(n)]
    tiny = 1e-12
    a = fit_coefficients(compressed, DEFAULT_PRIOR, tiny).as_array()
    b = fit_coefficients(expanded, DEFAULT_PRIOR, tiny).as_array()
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-15)
    assert len(compressed) == 2


def test_refits_lazily_and_window_is_bounded() -> None:
    predictor = LinearStepPredictor(window=8, refit_every=4)
    rng = np.random.default_rng(5)
    for observation in synthetic(rng, 40):
        predictor.observe(observation)
    assert predictor.num_observations == 40
    assert len(predictor._window) == 8
    before = predictor.coefficients
    predictor.observe(synthetic(rng, 1)[0])
    assert predictor.coefficients == before  # fewer than refit_every new observations: no refit yet


def test_empty_observation_is_ignored() -> None:
    predictor = LinearStepPredictor()
    predictor.observe(StepObservation(0, 0, 1, 10, []))
    assert predictor.num_observations == 0


def test_prior_from_roofline_predicts_its_model() -> None:
    truth = RooflineModel.build("A100", "Llama-3-8B")
    prior = prior_from_model(truth)
    assert all(v >= 0.0 for v in prior.as_array())
    predictor = LinearStepPredictor(prior=prior)
    for shape in [(0, 0, 32, 32 * 1000), (512, 0, 32, 32 * 1000)]:
        assert predictor.predict_s(*shape) == pytest.approx(truth.step_time_s(*shape), rel=0.25)


def test_observe_steps_leaves_what_observing_one_by_one_leaves() -> None:
    """The simulator's belief feed hands a tick's steps over as tuples in one call: same window, same
    counters, same refits, same predictions as ``observe`` of each (empty ones ignored)."""
    rng = np.random.default_rng(11)
    observations = synthetic(rng, 30)
    observations.insert(5, StepObservation(0, 0, 1, 10, []))
    one, batched = LinearStepPredictor(window=8, refit_every=4), LinearStepPredictor(window=8, refit_every=4)
    for start in range(0, len(observations), 7):
        chunk = observations[start : start + 7]
        for observation in chunk:
            one.observe(observation)
        batched.observe_steps([step_shape(observation) for observation in chunk])
        assert list(batched._window) == list(one._window)
        assert (batched.num_observations, batched._unrowed, batched._pending) == (
            one.num_observations,
            one._unrowed,
            one._pending,
        )
        assert batched.predict_s(128, 0, 8, 8000) == one.predict_s(128, 0, 8, 8000)  # refits both alike
    assert one.num_observations == 30
    batched.observe_steps([])
    assert batched.num_observations == 30


@settings(max_examples=40, deadline=None)
@given(batches=st.lists(st.integers(1, 12), min_size=1, max_size=12), window=st.integers(1, 9), seed=st.integers(0, 99))
def test_the_kept_matrix_is_the_windows_rows_and_fits_as_a_fresh_fit(
    batches: list[int], window: int, seed: int
) -> None:
    """However observations arrive between refits (fewer or more than the window), the matrix a refit keeps is
    the rows of the observations in the window, oldest first, and its fit is bit for bit the one of those rows
    built anew (what a refit did before it kept the matrix)."""
    rng = np.random.default_rng(seed)
    predictor = LinearStepPredictor(window=window)
    for size in batches:
        predictor.observe_steps([step_shape(observation) for observation in synthetic(rng, size)])
        predictor.refit()
        rows = [row for step in predictor._window for row in _observation_rows(step, predictor.max_run_weight)]
        assert np.array_equal(predictor._matrix, np.asarray(rows, dtype=np.float64).reshape(-1, 5))
        assert predictor.coefficients == fit_coefficients(rows, predictor.prior, predictor.prior_weight)
        assert len(predictor._row_counts) == len(predictor._window)


def test_belief_state_names_the_next_answers_and_never_refits() -> None:
    predictor = LinearStepPredictor(refit_every=4)
    prior = predictor.belief_state()
    assert prior is not None and predictor.predict_s(0, 0, 1, 0) == prior[0] + prior[2]
    predictor.observe(StepObservation(0, 0, 8, 3200, (0.02,)))
    assert predictor.belief_state() is None  # the next prediction refits first
    assert predictor.belief_state() is None and predictor._num_fitted == 0  # asking did not refit
    predictor.predict_s(0, 0, 1, 0)
    fitted = predictor.belief_state()
    assert fitted is not None and fitted != prior
    predictor.observe(StepObservation(0, 0, 8, 3200, (0.02,)))
    twin = LinearStepPredictor(refit_every=4)
    twin.observe(StepObservation(0, 0, 8, 3200, (0.02,)))
    twin.predict_s(0, 0, 1, 0)
    twin.observe(StepObservation(0, 0, 8, 3200, (0.02,)))
    for _ in range(3):  # asking between observations leaves the refit schedule as it was
        predictor.belief_state()
        predictor.observe(StepObservation(0, 0, 16, 6400, (0.03,)))
        twin.observe(StepObservation(0, 0, 16, 6400, (0.03,)))
    assert predictor.predict_s(0, 0, 4, 100) == twin.predict_s(0, 0, 4, 100)
    assert predictor.belief_state() == twin.belief_state()
