"""RelServe's step-time predictors: ``prefill(p) = ap * uncached_tokens + bp`` and
``decode(d) = ad * requests + bd``, fitted online from observed steps (a ``StepObserver``).

Only pure steps are informative for these one-feature lines: prefill-only steps feed the prefill line,
decode-only steps the decode line (a decode run of n identical-shape steps counts as its mean duration
with weight min(n, 64)); mixed steps are ignored. Each line is a weighted least-squares fit with
exponential forgetting (decode time drifts as contexts grow) plus a weak prior: two pseudo-points on the
line the engine's generic belief predicts, so the fit is defined from the first step and a slope the
data cannot identify (every step the same size) stays at the prior's. Coefficients are >= 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from slosched.core.belief import StepPredictor
from slosched.core.views import StepObservation

FORGETTING = 0.995  # per observation; about the last 200 observations carry the fit
PRIOR_WEIGHT = 0.5  # per pseudo-point, against observations of weight 1 (runs: up to 64)
MAX_RUN_WEIGHT = 64.0
# Typical decode context per request when reading the generic prior (relQuery rows are short).
PRIOR_CONTEXT_TOKENS = 300


@dataclass(slots=True)
class LineFit:
    """Weighted least squares of ``y = slope * x + intercept`` from decayed running sums."""

    sum_w: float = 0.0
    sum_x: float = 0.0
    sum_y: float = 0.0
    sum_xx: float = 0.0
    sum_xy: float = 0.0
    slope: float = 0.0
    intercept: float = 0.0

    def add(self, x: float, y: float, weight: float, decay: float = 1.0) -> None:
        self.sum_w = self.sum_w * decay + weight
        self.sum_x = self.sum_x * decay + weight * x
        self.sum_y = self.sum_y * decay + weight * y
        self.sum_xx = self.sum_xx * decay + weight * x * x
        self.sum_xy = self.sum_xy * decay + weight * x * y

    def solve(self, prior_slope: float) -> None:
        """Refit; without spread in x the slope stays ``prior_slope`` and the intercept fits the mean."""
        if self.sum_w <= 0:
            return
        mean_x, mean_y = self.sum_x / self.sum_w, self.sum_y / self.sum_w
        var_x = self.sum_xx / self.sum_w - mean_x * mean_x
        slope = prior_slope
        if var_x > 1e-9 * max(1.0, mean_x * mean_x):
            slope = max(0.0, (self.sum_xy / self.sum_w - mean_x * mean_y) / var_x)
        self.slope = slope
        self.intercept = max(0.0, mean_y - slope * mean_x)


class RelServeStepModel:
    """Both lines; ``bind_prior`` must run before the first prediction (the policies do it lazily)."""

    __slots__ = ("_bound", "_dirty", "_prior", "decode", "num_observations", "prefill")

    def __init__(self) -> None:
        self.prefill = LineFit()
        self.decode = LineFit()
        self._prior = (0.0, 0.0, 0.0, 0.0)
        self._bound = False
        self._dirty = False
        self.num_observations = 0

    @property
    def bound(self) -> bool:
        return self._bound

    def bind_prior(self, predictor: StepPredictor) -> None:
        """Seed both lines with pseudo-points read off the engine's generic belief."""
        if self._bound:
            return
        p_lo, p_hi = 128, 2048
        t_lo, t_hi = predictor.predict_s(p_lo, 0, 0, 0), predictor.predict_s(p_hi, 0, 0, 0)
        ap = max(0.0, (t_hi - t_lo) / (p_hi - p_lo))
        d_lo, d_hi = 1, 64
        u_lo = predictor.predict_s(0, 0, d_lo, d_lo * PRIOR_CONTEXT_TOKENS)
        u_hi = predictor.predict_s(0, 0, d_hi, d_hi * PRIOR_CONTEXT_TOKENS)
        ad = max(0.0, (u_hi - u_lo) / (d_hi - d_lo))
        self._prior = (ap, max(0.0, t_lo - ap * p_lo), ad, max(0.0, u_lo - ad * d_lo))
        for x, y in ((p_lo, t_lo), (p_hi, t_hi)):
            self.prefill.add(x, y, PRIOR_WEIGHT)
        for x, y in ((d_lo, u_lo), (d_hi, u_hi)):
            self.decode.add(x, y, PRIOR_WEIGHT)
        self._bound = True
        self._dirty = True

    def observe_step(self, observation: StepObservation) -> None:
        durations = observation.durations_s
        if not len(durations) or (observation.num_prefill_tokens > 0) == (observation.num_decode_seqs > 0):
            return  # mixed steps carry no information on either line alone
        self.num_observations += 1
        self._dirty = True
        if observation.num_prefill_tokens > 0:
            for duration in durations:
                self.prefill.add(observation.num_prefill_tokens, duration, 1.0, FORGETTING)
            return
        mean = sum(durations) / len(durations)
        weight = min(float(len(durations)), MAX_RUN_WEIGHT)
        self.decode.add(observation.num_decode_seqs, mean, weight, FORGETTING)

    def coefficients(self) -> tuple[float, float, float, float]:
        """``(ap, bp, ad, bd)``: seconds per uncached token, per prefill step, per request, per decode step."""
        if self._dirty:
            self.prefill.solve(self._prior[0])
            self.decode.solve(self._prior[2])
            self._dirty = False
        return self.prefill.slope, self.prefill.intercept, self.decode.slope, self.decode.intercept

    def prefill_s(self, uncached_tokens: float) -> float:
        ap, bp, _, _ = self.coefficients()
        return ap * uncached_tokens + bp

    def decode_s(self, num_requests: float) -> float:
        _, _, ad, bd = self.coefficients()
        return ad * num_requests + bd
