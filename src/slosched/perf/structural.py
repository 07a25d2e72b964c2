"""NexusSched's structural step-time model ``T(B, S)``, fitted online at two rates (a ``StepObserver``).

    T(B, S) = tau0 + (w0 + ws*S) / Thr(B, S) + tauB*B + tauS*S  [+ tauC*C + tauA*A]
    Thr(B, S) = Pmax * (1 - exp(-kB*B)) * (1 - exp(-kS*S))

B = requests in the step (decoding sequences, plus one when the step carries prefill), S = tokens in the
step (prefill tokens + decoding sequences). ``ws*S/Thr`` is a smooth roofline: flat (memory-bound) while
``kS*S`` is small, linear (compute-bound) past the knee at ``S ~ 1/kS``.

Two terms extend the paper's formula, because our ground truth (and any real engine) also reads the KV
cache: ``C`` = decode context tokens (KV bytes streamed by decodes) and ``A`` = prefill attention pairs
(``prefill tokens * (prefill context + prefill tokens / 2)``). With ``tauC = tauA = 0`` the model is the
paper's; the extension is what lets it reach R^2 >= 0.95 on long-context chat (``bench nexus`` reports
both). Only the ratio ``ws / Pmax`` is identifiable from step times, so every shape fit rescales so
that ``ws = 1`` (``Pmax`` is then the peak throughput in tokens/s, what engines export to routers).

Fitting (off the decision path: only inside ``observe_step``, which the simulator calls at its belief
refit ticks and a live engine from a background task):

* **shape** (``Pmax``, ``kB``, ``kS``): variable-projection non-linear least squares
  (``scipy.optimize.least_squares`` over ``log kB, log kS``; for each shape the linear parameters are
  the non-negative least-squares solution) on a long window (4096 rows), rarely: after 32, 64, 128, ...
  rows, then every 2048 new rows.
* **linear** (``w0, ws, tauB, tauS, tauC, tauA, tau0``): NNLS over the last 48 rows, every 8 new rows,
  with a weak ridge towards the last shape fit's solution (directions the recent steps do not excite,
  e.g. prefill during a decode-only stretch, stay where the long window put them).

Residuals are relative (``(pred - obs) / obs``) so 5 ms decode steps weigh as much as 300 ms prefills.
The model starts from ``BAD_GUESS`` (about 20x too slow) and must converge from there ("zero-config").
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares, nnls

from slosched.core.errors import ConfigError
from slosched.core.views import StepObservation

_exp = math.exp
# Column scales of the linear design (1, 1/g, S/g, B, S, C, A) at typical magnitudes: conditioning only.
_SCALES = np.array([1.0, 1000.0, 1000.0, 64.0, 1024.0, 65536.0, 4.0e6])
_NUM_LINEAR = 7


@dataclass(slots=True, frozen=True)
class StructuralParams:
    """All parameters; times in seconds, ``pmax`` in tokens/s, ``w0`` in token-equivalents."""

    tau0_s: float
    w0: float
    ws: float
    tau_b_s: float
    tau_s_s: float
    tau_c_s: float
    tau_a_s: float
    pmax: float
    k_b: float
    k_s: float

    def linear(self) -> np.ndarray:
        """The coefficients of the linear design columns (1, 1/g, S/g, B, S, C, A)."""
        head = [self.tau0_s, self.w0 / self.pmax, self.ws / self.pmax]
        return np.array([*head, self.tau_b_s, self.tau_s_s, self.tau_c_s, self.tau_a_s])

    def with_linear(self, coef: np.ndarray, pmax: float | None = None) -> StructuralParams:
        """Parameters whose linear columns are ``coef``; ``pmax`` (else the current one) fixes the scale."""
        peak = self.pmax if pmax is None else pmax
        c = [float(v) for v in coef]
        return replace(
            self,
            tau0_s=c[0],
            w0=c[1] * peak,
            ws=c[2] * peak,
            tau_b_s=c[3],
            tau_s_s=c[4],
            tau_c_s=c[5],
            tau_a_s=c[6],
            pmax=peak,
        )

    @property
    def peak_tokens_per_s(self) -> float:
        """Tokens per second at saturation (``Pmax / ws``); inf if the fit found no throughput term."""
        return self.pmax / self.ws if self.ws > 0 else math.inf


# Deliberately bad (zero-config): ~1000 tokens/s peak, 50 ms per step; about 20x too slow on an H100.
BAD_GUESS = StructuralParams(
    tau0_s=0.05,
    w0=0.0,
    ws=1.0,
    tau_b_s=1e-3,
    tau_s_s=1e-4,
    tau_c_s=0.0,
    tau_a_s=0.0,
    pmax=1000.0,
    k_b=1.0,
    k_s=1.0,
)


def predict(params: StructuralParams, b: float, s: float, c: float = 0.0, a: float = 0.0) -> float:
    """``T(B, S)`` plus the KV terms, in seconds (B, S >= 1)."""
    g = params.pmax * (1.0 - _exp(-params.k_b * b)) * (1.0 - _exp(-params.k_s * s))
    return (
        params.tau0_s
        + (params.w0 + params.ws * s) / g
        + params.tau_b_s * b
        + params.tau_s_s * s
        + params.tau_c_s * c
        + params.tau_a_s * a
    )


def design(rows: np.ndarray, k_b: float, k_s: float) -> np.ndarray:
    """Linear design matrix of ``rows`` (columns B, S, C, A, ...) for one shape, in seconds-per-unit."""
    b, s = rows[:, 0], rows[:, 1]
    inv_g = 1.0 / ((1.0 - np.exp(-k_b * b)) * (1.0 - np.exp(-k_s * s)))
    return np.column_stack([np.ones(len(rows)), inv_g, s * inv_g, b, s, rows[:, 2], rows[:, 3]])


def observation_rows(obs: StepObservation, max_rows: int = 4) -> list[tuple[float, float, float, float, float]]:
    """(B, S, C, A, seconds) rows of one observation; a decode run gives up to ``max_rows`` spread rows
    (its context grows by B per step, which is what identifies ``tauC``)."""
    durations = obs.durations_s
    n = len(durations)
    if n == 0:
        return []
    p, d = obs.num_prefill_tokens, obs.num_decode_seqs
    b = float(d + (1 if p > 0 else 0))
    s = float(p + d)
    pairs = p * (obs.prefill_context_tokens + 0.5 * (p + 1)) if p > 0 else 0.0
    if n == 1:
        return [(b, s, float(obs.decode_context_tokens), pairs, float(durations[0]))]
    picks = sorted({round(k * (n - 1) / (max_rows - 1)) for k in range(max_rows)}) if n > max_rows else range(n)
    return [(b, s, float(obs.decode_context_tokens + k * d), pairs, float(durations[k])) for k in picks]


def fit_linear(
    rows: np.ndarray, k_b: float, k_s: float, prior: np.ndarray | None = None, ridge: float = 0.0
) -> tuple[np.ndarray, float]:
    """NNLS of relative residuals for a fixed shape; returns (coefficients, sum of squared residuals).

    ``prior``/``ridge`` add ``ridge * ||(coef - prior) * scale||^2`` pseudo-observations.
    """
    y = rows[:, 4]
    a = design(rows, k_b, k_s) / _SCALES / y[:, None]
    target = np.ones(len(rows))
    if prior is not None and ridge > 0:
        # Pseudo-rows in the same relative units as the data rows (seconds / typical step).
        root = math.sqrt(ridge) / float(np.median(y))
        a = np.vstack([a, root * np.eye(_NUM_LINEAR)])
        target = np.concatenate([target, root * prior * _SCALES])
    scaled, residual = nnls(a, target, maxiter=50 * _NUM_LINEAR)
    return scaled / _SCALES, float(residual) ** 2


def fit_shape(rows: np.ndarray, start: tuple[float, float]) -> tuple[float, float, np.ndarray]:
    """Variable projection over (log kB, log kS) from ``start`` and a coarse grid; (kB, kS, linear)."""

    def residuals(theta: np.ndarray) -> np.ndarray:
        k_b, k_s = math.exp(theta[0]), math.exp(theta[1])
        coef, _ = fit_linear(rows, k_b, k_s)
        return design(rows, k_b, k_s) @ coef / rows[:, 4] - 1.0

    # A coarse grid guards against the local minima a bad start would leave the solver in.
    candidates = [(math.log(start[0]), math.log(start[1]))]
    candidates += [(math.log(kb), math.log(ks)) for kb in (0.05, 0.5) for ks in (1 / 64, 1 / 512, 1 / 4096)]
    best = min(candidates, key=lambda theta: float(np.sum(residuals(np.array(theta)) ** 2)))
    bounds = ([math.log(1e-4), math.log(1e-6)], [math.log(10.0), math.log(10.0)])
    x0 = np.clip(np.array(best), bounds[0], bounds[1])
    result = least_squares(residuals, x0, bounds=bounds, diff_step=1e-3, max_nfev=40)
    k_b, k_s = math.exp(result.x[0]), math.exp(result.x[1])
    coef, _ = fit_linear(rows, k_b, k_s)
    return k_b, k_s, coef


class StructuralStepModel:
    """The online structural model of one instance (implements ``StepObserver``).

    Invariants: ``params`` changes only inside ``observe_step``/``refit_*`` (never while predicting);
    deterministic for a given sequence of observations; every parameter stays >= 0.
    """

    __slots__ = (
        "_long",
        "_rows_since_linear",
        "_rows_since_shape",
        "_shape_prior",
        "_short",
        "linear_every",
        "num_linear_fits",
        "num_rows",
        "num_shape_fits",
        "params",
        "ridge",
        "shape_every",
    )

    def __init__(
        self,
        initial: StructuralParams = BAD_GUESS,
        long_window: int = 4096,
        short_window: int = 48,
        linear_every: int = 8,
        shape_every: int = 2048,
        ridge: float = 0.05,
    ) -> None:
        if min(long_window, short_window, linear_every, shape_every) < 1 or ridge < 0:
            raise ConfigError("StructuralStepModel", "windows and refit intervals must be >= 1, ridge >= 0")
        self.params = initial
        self.linear_every = linear_every
        self.shape_every = shape_every
        self.ridge = ridge
        self._long: deque[tuple[float, float, float, float, float]] = deque(maxlen=long_window)
        self._short: deque[tuple[float, float, float, float, float]] = deque(maxlen=short_window)
        self._shape_prior: np.ndarray | None = None
        self._rows_since_linear = 0
        self._rows_since_shape = 0
        self.num_rows = 0
        self.num_shape_fits = 0
        self.num_linear_fits = 0

    def predict_s(self, b: float, s: float, c: float = 0.0, a: float = 0.0) -> float:
        return predict(self.params, b, s, c, a)

    def peak_tokens_per_s(self, step_tokens: int) -> float:
        """Throughput of a full prefill step of ``step_tokens`` tokens: the capacity routers compare.

        Read off the prediction rather than ``Pmax / ws``, which the fit can trade against ``tauS``."""
        return step_tokens / max(predict(self.params, 1.0, float(step_tokens)), 1e-12)

    def predict_observation_s(self, obs: StepObservation) -> float:
        """Predicted seconds of the first step of ``obs`` (for accuracy reports)."""
        b, s, c, a, _ = observation_rows(replace(obs, durations_s=(1.0,)))[0]
        return predict(self.params, b, s, c, a)

    def observe_step(self, observation: StepObservation) -> None:
        for row in observation_rows(observation):
            if row[4] > 0:
                self._long.append(row)
                self._short.append(row)
                self.num_rows += 1
                self._rows_since_linear += 1
                self._rows_since_shape += 1
        if self._shape_due():
            self.refit_shape()
        elif self._rows_since_linear >= self.linear_every:
            self.refit_linear()

    def _shape_due(self) -> bool:
        if self.num_rows < 32:
            return False
        if self.num_shape_fits == 0:
            return True
        # Doubling until the window is full, then every shape_every rows: rare, as the paper wants.
        fitted_at = self.num_rows - self._rows_since_shape
        return self.num_rows >= min(2 * fitted_at, fitted_at + self.shape_every)

    def refit_shape(self) -> None:
        """Slow fit of (Pmax, kB, kS) and all linear parameters on the long window."""
        rows = np.asarray(self._long, dtype=np.float64)
        if len(rows) > 1024:  # a uniform subsample keeps the fit ~10 ms with no loss in practice
            rows = rows[np.linspace(0, len(rows) - 1, 1024).astype(np.int64)]
        k_b, k_s, coef = fit_shape(rows, (self.params.k_b, self.params.k_s))
        pmax = 1.0 / coef[2] if coef[2] > 0 else self.params.pmax
        self.params = replace(self.params.with_linear(coef, pmax), k_b=k_b, k_s=k_s)
        self._shape_prior = coef
        self.num_shape_fits += 1
        self._rows_since_shape = 0
        self._rows_since_linear = 0

    def refit_linear(self) -> None:
        """Fast fit of the linear parameters on the short window, shape fixed."""
        if not self._short:
            return
        rows = np.asarray(self._short, dtype=np.float64)
        # Before the first shape fit the ridge pulls towards the current (initial) parameters, so a handful
        # of steps already corrects a bad guess along the directions they excite.
        prior = self.params.linear() if self._shape_prior is None else self._shape_prior
        coef, _ = fit_linear(rows, self.params.k_b, self.params.k_s, prior, self.ridge * len(rows))
        self.params = self.params.with_linear(coef)
        self.num_linear_fits += 1
        self._rows_since_linear = 0


def r_squared(predicted: np.ndarray, actual: np.ndarray) -> float:
    """Coefficient of determination of ``predicted`` against ``actual`` (NaN for < 2 points)."""
    if len(actual) < 2:
        return math.nan
    total = float(np.sum((actual - actual.mean()) ** 2))
    if total <= 0:
        return math.nan
    return 1.0 - float(np.sum((actual - predicted) ** 2)) / total
