"""Belief about step time: a linear model fitted online to observed steps (a ``StepPredictor``).

``T = c0 + c_prefill * num_prefill_tokens + c_decode * num_decode_seqs
      + c_context * (decode_context_tokens + prefill_context_tokens)``

fitted by non-negative least squares over a bounded window of recent observations, with a weak ridge
towards a prior (so coefficients the data cannot identify, e.g. ``c_prefill`` before any prefill was
seen, stay at the prior instead of collapsing to 0).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

import numpy as np
from scipy.optimize import nnls

from slosched.core.belief import StepTimeModel
from slosched.core.errors import ConfigError
from slosched.core.views import StepObservation

# Typical magnitude of each feature (1, prefill tokens, decode seqs, context tokens): scales the prior's
# ridge so one pseudo-observation pins each coefficient at a realistic operating point.
_FEATURE_SCALES = np.array([1.0, 1024.0, 64.0, 65536.0])


@dataclass(slots=True, frozen=True)
class LinearStepCoefficients:
    """Seconds per step, per prefill token, per decode sequence, per context token (all >= 0)."""

    c0_s: float
    prefill_s_per_token: float
    decode_s_per_seq: float
    context_s_per_token: float

    def as_array(self) -> np.ndarray:
        return np.array([self.c0_s, self.prefill_s_per_token, self.decode_s_per_seq, self.context_s_per_token])

    @classmethod
    def from_array(cls, values: Sequence[float]) -> LinearStepCoefficients:
        c0, prefill, decode, context = (float(v) for v in values)
        return cls(c0, prefill, decode, context)


# Generic prior: the linear fit of the roofline for Llama-3-8B on one A100 (prior_from_model), rounded.
DEFAULT_PRIOR = LinearStepCoefficients(0.011, 6.6e-5, 4.8e-4, 9.3e-8)

# One observation as the window keeps it: the fields of ``StepObservation`` in order (num_prefill_tokens,
# prefill_context_tokens, num_decode_seqs, decode_context_tokens, durations_s). A plain tuple, so a runtime
# can hand over many at once (``observe_steps``) without building a frozen dataclass for each.
StepShape = tuple[int, int, int, int, Sequence[float]]


def step_shape(observation: StepObservation) -> StepShape:
    return (
        observation.num_prefill_tokens,
        observation.prefill_context_tokens,
        observation.num_decode_seqs,
        observation.decode_context_tokens,
        observation.durations_s,
    )


def _observation_rows(step: StepShape, max_run_weight: float) -> list[tuple[float, ...]]:
    """(weight, prefill, decode, context, duration) rows carrying the run's least-squares information.

    A run of n steps whose context grows by ``num_decode_seqs`` a step is replaced by two rows at
    mean +- std of its context, with durations that reproduce the run's mean and its context/duration
    covariance: the normal equations are the same as with all n rows (only feature 4 varies).
    """
    num_prefill, prefill_ctx, num_decode, decode_ctx, durations_s = step
    n = len(durations_s)
    if n == 0:
        return []
    fixed_ctx = decode_ctx + prefill_ctx
    p, d = float(num_prefill), float(num_decode)
    if n == 1:  # the common case stays off numpy
        return [(min(1.0, max_run_weight), p, d, float(fixed_ctx), float(durations_s[0]))]
    durations = np.asarray(durations_s, dtype=np.float64)
    mean_y = float(durations.mean())
    weight = float(min(n, max_run_weight))
    if num_decode == 0:
        return [(weight, p, d, float(fixed_ctx), mean_y)]
    mean_k = (n - 1) / 2.0
    std_k = math.sqrt((n * n - 1) / 12.0)
    cov_ky = float(np.dot(np.arange(n, dtype=np.float64) - mean_k, durations)) / n
    mean_ctx = fixed_ctx + d * mean_k
    dy, dctx = cov_ky / std_k, d * std_k
    half = weight / 2.0
    return [(half, p, d, mean_ctx - dctx, mean_y - dy), (half, p, d, mean_ctx + dctx, mean_y + dy)]


def fit_coefficients(
    rows: Sequence[tuple[float, ...]] | np.ndarray, prior: LinearStepCoefficients, prior_weight: float
) -> LinearStepCoefficients:
    """Weighted NNLS of (weight, prefill, decode, context, duration) rows plus a ridge towards ``prior``."""
    data = np.asarray(rows, dtype=np.float64).reshape(-1, 5)
    sqrt_w = np.sqrt(data[:, 0])
    design = np.column_stack([np.ones(len(data)), data[:, 1:4]]) / _FEATURE_SCALES  # solve for c * scale
    a = np.vstack([design * sqrt_w[:, None], math.sqrt(prior_weight) * np.eye(4)])
    b = np.concatenate([data[:, 4] * sqrt_w, math.sqrt(prior_weight) * prior.as_array() * _FEATURE_SCALES])
    scaled, _ = nnls(a, b)
    return LinearStepCoefficients.from_array(scaled / _FEATURE_SCALES)


def prior_from_model(model: StepTimeModel) -> LinearStepCoefficients:
    """Linear fit of a step-time model over typical shapes: an offline profile used as a prior."""
    rows = []
    for prefill in (0, 128, 512, 2048):
        for decode in (0, 1, 8, 32, 128):
            if prefill + decode == 0:
                continue
            for context in (256, 2048):
                seconds = model.step_time_s(prefill, 0, decode, decode * context)
                rows.append((1.0, float(prefill), float(decode), float(decode * context), seconds))
    return fit_coefficients(rows, DEFAULT_PRIOR, prior_weight=1e-9)


class LinearStepPredictor:
    """Online linear step-time belief (implements ``StepPredictor``).

    ``prior_weight`` is the prior's weight in step observations (its ridge compares predictions at
    the typical shapes ``_FEATURE_SCALES``); it is small so data win wherever they carry information,
    even against a prior that is off by orders of magnitude, while directions the data never excite
    stay exactly at the prior.

    ``observe`` is O(1) amortised besides reading the run's durations; the fit is redone lazily in
    ``predict_s``/``coefficients`` when enough new observations arrived (after 1, 2, 4, ... up to
    every ``refit_every``). Works with zero observations (returns the prior). Deterministic.
    """

    __slots__ = (
        "_c0",
        "_cc",
        "_cd",
        "_cp",
        "_matrix",
        "_num_fitted",
        "_pending",
        "_row_counts",
        "_rows_weight",
        "_unrowed",
        "_window",
        "max_run_weight",
        "num_observations",
        "prior",
        "prior_weight",
        "refit_every",
    )

    def __init__(
        self,
        prior: LinearStepCoefficients | None = None,
        window: int = 512,
        refit_every: int = 16,
        max_run_weight: float = 64.0,
        prior_weight: float = 1e-3,
    ) -> None:
        if window < 1 or refit_every < 1 or max_run_weight <= 0 or prior_weight <= 0:
            raise ConfigError("LinearStepPredictor", "window, refit_every, max_run_weight, prior_weight must be > 0")
        self.prior = DEFAULT_PRIOR if prior is None else prior
        self.refit_every = refit_every
        self.max_run_weight = max_run_weight  # caps one long fast-forwarded run against the rest of the window
        self.prior_weight = prior_weight
        # Raw observations; their least-squares rows are built only when a refit needs them, so observing
        # stays cheap for instances whose policies never ask for a prediction.
        self._window: deque[StepShape] = deque(maxlen=window)
        # The rows of the window's observations, built once each (a refit used to rebuild every row of the
        # window, most of a predictive policy's run time), kept as the least-squares matrix itself: after a
        # refit ``_row_counts`` (each observation's 1 or 2 rows) matches ``_window`` one to one and ``_matrix``
        # holds their rows in the window's order, so a refit converts only the new observations' rows to an
        # array (converting the whole window's, ~1,000 tuples, was half a refit's time: a refit of 16 new
        # observations over a full 512 went from 0.46 to 0.25 ms, the same coefficients); ``_unrowed`` newest
        # observations have none yet; ``_rows_weight`` is the cap they carry.
        self._row_counts: deque[int] = deque(maxlen=window)
        self._matrix = np.empty((0, 5))
        self._unrowed = 0
        self._rows_weight = max_run_weight
        self._pending = 0
        self._num_fitted = 0
        self.num_observations = 0
        self._set(self.prior)

    def _set(self, coefficients: LinearStepCoefficients) -> None:
        self._c0 = coefficients.c0_s
        self._cp = coefficients.prefill_s_per_token
        self._cd = coefficients.decode_s_per_seq
        self._cc = coefficients.context_s_per_token

    def observe(self, observation: StepObservation) -> None:
        if not len(observation.durations_s):
            return
        self._window.append(step_shape(observation))
        self._unrowed = min(self._unrowed + 1, len(self._window))
        self._pending += 1
        self.num_observations += 1

    def observe_steps(self, steps: Sequence[StepShape]) -> None:
        """``observe(StepObservation(*step))`` for each step in order, in one call: the simulator hands over
        a refit tick's observations at once, without building a frozen ``StepObservation`` for each (about
        three per request; see ``slosched.bench.sim_speed``)."""
        fresh = [step for step in steps if len(step[4])]
        if not fresh:
            return
        window = self._window
        window.extend(fresh)
        count = len(fresh)
        # What ``count`` calls of ``observe`` leave: each adds one unrowed entry, capped by the window.
        self._unrowed = min(self._unrowed + count, len(window))
        self._pending += count
        self.num_observations += count

    def _refit_due(self) -> bool:
        return self._pending > 0 and self._pending >= min(self.refit_every, max(1, self._num_fitted))

    def _maybe_refit(self) -> None:
        if self._refit_due():
            self.refit()

    def belief_state(self) -> tuple[float, float, float, float] | None:
        """The coefficients the next ``predict_s`` answers with, or None when that call refits first.

        Free of side effects (it never refits): an ordering compares it between passes to keep the keys it
        computed (``ExpiringKeys`` in ``policies/engine/queue.py``); refitting here instead would move the
        refit to another instant and change every later fit."""
        if self._refit_due():
            return None
        return (self._c0, self._cp, self._cd, self._cc)

    def refit(self) -> None:
        """Fit now on the current window (no-op without observations)."""
        if not self._window:
            return
        weight = self.max_run_weight
        counts = self._row_counts
        if weight != self._rows_weight:  # the rows carry the cap: a new one rebuilds them all
            counts.clear()
            self._matrix = np.empty((0, 5))
            self._unrowed, self._rows_weight = len(self._window), weight
        window = self._window
        fresh = [_observation_rows(step, weight) for step in islice(window, len(window) - self._unrowed, None)]
        # Both deques keep the newest ``window`` entries: the new rows push out those of evicted observations.
        evicted = max(len(counts) + len(fresh) - len(window), 0)
        dropped = sum(islice(counts, evicted))
        counts.extend(len(rows) for rows in fresh)
        new_rows = np.asarray([row for rows in fresh for row in rows], dtype=np.float64).reshape(-1, 5)
        self._matrix = np.concatenate([self._matrix[dropped:], new_rows])
        self._unrowed = 0
        self._set(fit_coefficients(self._matrix, self.prior, self.prior_weight))
        self._num_fitted = self.num_observations
        self._pending = 0

    @property
    def coefficients(self) -> LinearStepCoefficients:
        self._maybe_refit()
        return LinearStepCoefficients(self._c0, self._cp, self._cd, self._cc)

    def predict_s(
        self,
        num_prefill_tokens: int,
        prefill_context_tokens: int,
        num_decode_seqs: int,
        decode_context_tokens: int,
    ) -> float:
        if self._pending:
            self._maybe_refit()
        return (
            self._c0
            + self._cp * num_prefill_tokens
            + self._cd * num_decode_seqs
            + self._cc * (decode_context_tokens + prefill_context_tokens)
        )
