"""A step-time model fitted to measurements of a live engine (``slosched profile``), usable as simulator truth.

The measured model is linear in five features of a step (vocabulary of ``perf.base``)::

    t = fixed_s + b * decode_seq_s + (c + b) * kv_token_s + P * prefill_token_s + pairs * prefill_pair_s

with ``P`` prefill tokens, ``pairs = P * (ctx + (P + 1) / 2)`` the causal attention pairs of the prefill
(costed as one chunk, like ``perf.roofline``), ``b`` decode sequences and ``c`` their context. A decode-only
step is therefore affine in its context (``decode_step_terms``), as the simulator requires. Parameters are
fitted robustly (``_robust_log_fit``: log residuals, so millisecond decode steps count as much as
second-long prefills; a Cauchy loss, so outliers of a live engine cannot dominate; coefficients bounded
at 0, since each is a physical cost); confidence intervals come from the residual covariance
``s^2 (J^T J)^-1`` at the solution with Student-t quantiles. Invariant: the step model never uses a
negative coefficient (a coefficient at the 0 bound is named in ``MeasuredProfile.clamped``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize, stats

from slosched.core.errors import ConfigError
from slosched.core.views import StepObservation

PARAMS = ("fixed_s", "prefill_token_s", "prefill_pair_s", "decode_seq_s", "kv_token_s")
PAIR = PARAMS.index("prefill_pair_s")
FORMAT_VERSION = 1


def step_features(num_prefill: int, prefill_ctx: int, num_decode: int, decode_ctx: int) -> tuple[float, ...]:
    """The feature row of one step, in ``PARAMS`` order."""
    pairs = num_prefill * (prefill_ctx + 0.5 * (num_prefill + 1)) if num_prefill > 0 else 0.0
    kv = float(decode_ctx + num_decode) if num_decode > 0 else 0.0
    return (1.0, float(num_prefill), pairs, float(num_decode), kv)


def _rows(observations: Iterable[StepObservation]) -> tuple[np.ndarray, np.ndarray]:
    """One row per measured step; decode context grows by the batch across a run's steps."""
    features: list[tuple[float, ...]] = []
    durations: list[float] = []
    for obs in observations:
        for index, duration in enumerate(obs.durations_s):
            context = obs.decode_context_tokens + index * obs.num_decode_seqs
            features.append(
                step_features(obs.num_prefill_tokens, obs.prefill_context_tokens, obs.num_decode_seqs, context)
            )
            durations.append(float(duration))
    return np.asarray(features, dtype=np.float64).reshape(-1, len(PARAMS)), np.asarray(durations)


@dataclass(slots=True)
class MeasuredStepModel:
    """Ground truth from a fit: implements ``perf.base.StepTimeModel`` plus the two methods the simulator
    also takes from ``RooflineModel`` (``num_kv_blocks``, ``no_contention_latency_s``)."""

    fixed_s: float
    prefill_token_s: float
    prefill_pair_s: float
    decode_seq_s: float
    kv_token_s: float
    kv_blocks: int | None = None
    kv_block_size: int | None = None
    request_overhead_s: float = 0.0  # the engine front end's serial cost per request (before the engine sees it)
    request_latency_s: float = 0.0  # constant latency a request adds besides engine steps (HTTP, hand-offs)
    token_overhead_s: float = 0.0  # the front end's work per streamed token (slows its admissions under load)

    def step_time_s(
        self, num_prefill_tokens: int, prefill_context_tokens: int, num_decode_seqs: int, decode_context_tokens: int
    ) -> float:
        if num_prefill_tokens + num_decode_seqs <= 0:
            return 0.0
        # Same float operations, in order, as decode_step_terms: decode-only steps are affine bit for bit.
        t = self.fixed_s + num_decode_seqs * self.decode_seq_s
        if num_decode_seqs > 0:
            t += (decode_context_tokens + num_decode_seqs) * self.kv_token_s
        if num_prefill_tokens > 0:
            pairs = num_prefill_tokens * (prefill_context_tokens + 0.5 * (num_prefill_tokens + 1))
            t += num_prefill_tokens * self.prefill_token_s + pairs * self.prefill_pair_s
        return t

    def decode_step_terms(self, num_decode_seqs: int) -> tuple[float, float]:
        return self.fixed_s + num_decode_seqs * self.decode_seq_s, self.kv_token_s

    def decode_run_s(self, num_decode_seqs: int, decode_context_tokens: int, num_steps: int) -> np.ndarray:
        if num_steps <= 0:
            return np.empty(0, dtype=np.float64)
        if num_decode_seqs <= 0:
            return np.zeros(num_steps, dtype=np.float64)
        base, per_token = self.decode_step_terms(num_decode_seqs)
        first = decode_context_tokens + num_decode_seqs
        if num_steps == 1:
            return np.array([base + first * per_token], dtype=np.float64)
        ctx = np.arange(num_steps, dtype=np.float64)
        ctx *= num_decode_seqs
        ctx += first
        ctx *= per_token
        ctx += base
        return ctx

    def decode_run_total_s(self, num_decode_seqs: int, decode_context_tokens: int, num_steps: int) -> float:
        if num_steps <= 0 or num_decode_seqs <= 0:
            return 0.0
        base, per_token = self.decode_step_terms(num_decode_seqs)
        first = decode_context_tokens + num_decode_seqs
        context_sum = num_steps * first + num_decode_seqs * num_steps * (num_steps - 1) / 2
        return num_steps * base + context_sum * per_token

    def num_kv_blocks(self, gpu_memory_utilization: float = 0.9, block_size: int = 16) -> int:
        """The engine's measured KV capacity re-expressed in ``block_size`` blocks. The memory fraction is
        the engine's own (already applied when it was profiled), so ``gpu_memory_utilization`` is unused."""
        if self.kv_blocks is None or self.kv_block_size is None:
            raise ConfigError(
                "profile.num_gpu_blocks",
                "the profile does not know the engine's KV capacity; set num_kv_blocks on the instance group",
            )
        if block_size < 1:
            raise ConfigError("block_size", f"must be >= 1, got {block_size}")
        return self.kv_blocks * self.kv_block_size // block_size

    def no_contention_latency_s(self, prompt_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float:
        """One request alone: the front end and request latency, a prefill step of the uncached prompt,
        then ``output_tokens - 1`` decode steps."""
        uncached = max(1, prompt_tokens - cached_tokens)
        total = self.request_overhead_s + self.request_latency_s
        total += self.step_time_s(uncached, prompt_tokens - uncached, 0, 0)
        if output_tokens > 1:
            total += self.decode_run_total_s(1, prompt_tokens, output_tokens - 1)
        return total


@dataclass(slots=True)
class MeasuredProfile:
    """A fitted profile: estimates and 95% (``confidence``) intervals per parameter (``PARAMS`` order),
    fit quality, and the engine's KV capacity when its ``/metrics`` exposed it."""

    estimates: tuple[float, ...]
    ci_low: tuple[float, ...]
    ci_high: tuple[float, ...]
    num_steps: int
    residual_rel_std: float
    confidence: float = 0.95
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    clamped: tuple[str, ...] = ()
    source: dict[str, Any] = field(default_factory=dict)
    request_overhead_s: float = 0.0
    request_latency_s: float = 0.0
    token_overhead_s: float = 0.0

    def param(self, name: str) -> tuple[float, float, float]:
        """``(estimate, ci_low, ci_high)`` of one parameter."""
        if name not in PARAMS:
            raise ConfigError("param", f"unknown parameter {name!r}; allowed: {', '.join(PARAMS)}")
        i = PARAMS.index(name)
        return self.estimates[i], self.ci_low[i], self.ci_high[i]

    def step_model(self) -> MeasuredStepModel:
        fixed, prefill_token, prefill_pair, decode_seq, kv_token = (max(0.0, value) for value in self.estimates)
        return MeasuredStepModel(
            fixed,
            prefill_token,
            prefill_pair,
            decode_seq,
            kv_token,
            self.num_gpu_blocks,
            self.block_size,
            max(0.0, self.request_overhead_s),
            max(0.0, self.request_latency_s),
            max(0.0, self.token_overhead_s),
        )

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["params"] = {
            name: {"estimate": e, "ci_low": lo, "ci_high": hi}
            for name, e, lo, hi in zip(PARAMS, self.estimates, self.ci_low, self.ci_high, strict=True)
        }
        for key in ("estimates", "ci_low", "ci_high"):
            del data[key]
        return {"format": "slosched-profile", "version": FORMAT_VERSION, **data}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_json_dict(), indent=2, allow_nan=False) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> MeasuredProfile:
        path = Path(path)
        if not path.exists():
            raise ConfigError("profile", f"file not found: {path}")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ConfigError("profile", f"{path} is not valid JSON: {error}") from None
        return cls.from_json_dict(data, str(path))

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "profile") -> MeasuredProfile:
        if not isinstance(data, dict) or data.get("format") != "slosched-profile":
            raise ConfigError(where, "not a slosched profile (expected format: slosched-profile)")
        if data.get("version") != FORMAT_VERSION:
            raise ConfigError(f"{where}.version", f"expected {FORMAT_VERSION}, got {data.get('version')!r}")
        params = data.get("params")
        if not isinstance(params, dict) or set(params) != set(PARAMS):
            raise ConfigError(f"{where}.params", f"expected exactly the parameters {', '.join(PARAMS)}")
        try:
            triples = [tuple(float(params[name][key]) for key in ("estimate", "ci_low", "ci_high")) for name in PARAMS]
            return cls(
                estimates=tuple(t[0] for t in triples),
                ci_low=tuple(t[1] for t in triples),
                ci_high=tuple(t[2] for t in triples),
                num_steps=int(data["num_steps"]),
                residual_rel_std=float(data["residual_rel_std"]),
                confidence=float(data.get("confidence", 0.95)),
                num_gpu_blocks=None if data.get("num_gpu_blocks") is None else int(data["num_gpu_blocks"]),
                block_size=None if data.get("block_size") is None else int(data["block_size"]),
                clamped=tuple(str(name) for name in data.get("clamped", ())),
                source=dict(data.get("source") or {}),
                request_overhead_s=float(data.get("request_overhead_s", 0.0)),
                request_latency_s=float(data.get("request_latency_s", 0.0)),
                token_overhead_s=float(data.get("token_overhead_s", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigError(where, f"malformed profile: {error!r}") from None


def fit_profile(
    observations: Sequence[StepObservation],
    confidence: float = 0.95,
    num_gpu_blocks: int | None = None,
    block_size: int | None = None,
    source: dict[str, Any] | None = None,
    prefill_rows_are_ttfts: bool = False,
) -> MeasuredProfile:
    """Robust fit of the step model on measured steps (see the module docstring).

    ``prefill_rows_are_ttfts``: the prefill-only rows are client-side times to first token, which also hold
    a constant request latency (HTTP, the server's hand-offs to and from its engine) that no engine step
    has; it is fitted as one more coefficient, ``MeasuredProfile.request_latency_s``."""
    if not 0.0 < confidence < 1.0:
        raise ConfigError("confidence", f"must be in (0, 1), got {confidence}")
    x, y = _rows(observations)
    names: tuple[str, ...] = PARAMS
    if prefill_rows_are_ttfts:
        is_ttft = (x[:, PARAMS.index("prefill_token_s")] > 0) & (x[:, PARAMS.index("decode_seq_s")] == 0)
        x, names = np.column_stack([x, is_ttft.astype(np.float64)]), (*PARAMS, "request_latency_s")
    if len(y) <= len(names):
        raise ConfigError("observations", f"need more than {len(names)} measured steps, got {len(y)}")
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise ConfigError("observations", "step durations must be finite and > 0")
    _check_identifiable(x / y[:, None], names)
    beta, jacobian, residuals, pruned = _fit_pruning_pairs(x, y, confidence)
    dof = len(y) - len(names)
    s2 = float(residuals @ residuals) / dof
    cov = s2 * np.linalg.pinv(jacobian.T @ jacobian)
    half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * np.sqrt(np.clip(np.diag(cov), 0.0, None))
    low, high = beta - half, beta + half
    if pruned is not None:  # the dropped coefficient keeps the interval it had (it includes 0)
        low[PAIR], high[PAIR] = pruned
    steps = len(PARAMS)
    return MeasuredProfile(
        estimates=tuple(float(v) for v in beta[:steps]),
        ci_low=tuple(float(v) for v in low[:steps]),
        ci_high=tuple(float(v) for v in high[:steps]),
        num_steps=len(y),
        residual_rel_std=math.sqrt(s2),
        confidence=confidence,
        num_gpu_blocks=num_gpu_blocks,
        block_size=block_size,
        clamped=tuple(name for name, value in zip(names, beta, strict=True) if value <= 0),
        source=source or {},
        request_latency_s=float(beta[steps]) if len(beta) > steps else 0.0,
    )


def fit_mean_profile(
    observations: Sequence[StepObservation],
    confidence: float = 0.95,
    num_gpu_blocks: int | None = None,
    block_size: int | None = None,
) -> MeasuredProfile:
    """Non-negative least squares on the step durations themselves: the coefficients whose predictions
    add up to the measured time. For thousands of steps an engine timed itself (no client in between),
    where the slow tail is real cost a simulation has to charge: the robust log fit tracks the typical step
    and, on the tiny CPU model's engine steps, predicted 11% less time than they took."""
    x, y = _rows(observations)
    if len(y) <= len(PARAMS):
        raise ConfigError("observations", f"need more than {len(PARAMS)} measured steps, got {len(y)}")
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise ConfigError("observations", "step durations must be finite and > 0")
    _check_identifiable(x / y[:, None], PARAMS)
    beta, _ = optimize.nnls(x, y)
    residuals = y - x @ beta
    half = _ci_half_widths(x, residuals, confidence)
    return MeasuredProfile(
        estimates=tuple(float(v) for v in beta),
        ci_low=tuple(float(v) for v in beta - half),
        ci_high=tuple(float(v) for v in beta + half),
        num_steps=len(y),
        residual_rel_std=float(np.sqrt(np.mean((residuals / y) ** 2))),
        confidence=confidence,
        num_gpu_blocks=num_gpu_blocks,
        block_size=block_size,
        clamped=tuple(name for name, value in zip(PARAMS, beta, strict=True) if value <= 0),
    )


def _fit_pruning_pairs(
    x: np.ndarray, y: np.ndarray, confidence: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[float, float] | None]:
    """The robust fit; when the attention-pair coefficient is indistinguishable from 0 (its interval
    reaches 0), refit without it and return its first interval. Why: a noise-driven pair cost would be
    charged to every multi-sequence prefill step (the step features cost a step's prefill as one chunk)."""
    beta, jacobian, residuals = _robust_log_fit(x, y)
    half = _ci_half_widths(jacobian, residuals, confidence)[PAIR]
    if not 0 < beta[PAIR] <= half:
        return beta, jacobian, residuals, None
    interval = (float(beta[PAIR] - half), float(beta[PAIR] + half))
    without = x.copy()
    without[:, PAIR] = 0.0
    beta, jacobian, residuals = _robust_log_fit_fixed(without, y, PAIR)
    return beta, jacobian, residuals, interval


def _ci_half_widths(jacobian: np.ndarray, residuals: np.ndarray, confidence: float) -> np.ndarray:
    dof = max(len(residuals) - jacobian.shape[1], 1)
    cov = float(residuals @ residuals) / dof * np.linalg.pinv(jacobian.T @ jacobian)
    return float(stats.t.ppf(0.5 + confidence / 2, dof)) * np.sqrt(np.clip(np.diag(cov), 0.0, None))


def _robust_log_fit_fixed(x: np.ndarray, y: np.ndarray, zero: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_robust_log_fit`` with coefficient ``zero`` held at 0 (its column is all zeros)."""
    kept = [i for i in range(x.shape[1]) if i != zero]
    beta_kept, jacobian_kept, residuals = _robust_log_fit(x[:, kept], y)
    beta = np.zeros(x.shape[1])
    beta[kept] = beta_kept
    jacobian = np.zeros((len(y), x.shape[1]))
    jacobian[:, kept] = jacobian_kept
    return beta, jacobian, residuals


def _robust_log_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Non-negative coefficients minimising a Cauchy loss of log residuals ``log(x @ b) - log(y)``.

    Why: timings of a live engine carry multiplicative noise and outliers (a stream the client read late,
    a step that met a CPU stall); plain least squares on relative errors lets one near-zero duration
    dominate the fit. Log residuals treat a 2x too slow and a 2x too fast step alike; the Cauchy loss is
    quadratic below about 10% and only logarithmic above, so a wild row barely pulls the fit; coefficients
    are physical costs and stay >= 0. Starts from the ordinary relative-error least-squares solution.
    Returns the coefficients, the Jacobian of the residuals and the residuals at the solution."""
    start, *_ = np.linalg.lstsq(x / y[:, None], np.ones_like(y), rcond=None)
    scale = np.maximum(np.abs(start), 1e-12)  # solve in units of the start's magnitude (conditioning)
    floor = 1e-9 * float(np.median(y))

    def residuals(z: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(x @ (z * scale), floor)) - np.log(y)

    def jacobian(z: np.ndarray) -> np.ndarray:
        return (x * scale) / np.maximum(x @ (z * scale), floor)[:, None]

    initial = np.where(start > 0, 1.0, 1e-3)
    fit = optimize.least_squares(
        residuals, initial, jac=jacobian, bounds=(0.0, np.inf), loss="cauchy", f_scale=0.1, xtol=1e-12, ftol=1e-12
    )
    beta = fit.x * scale
    return beta, x / np.maximum(x @ beta, floor)[:, None], residuals(fit.x)


def _check_identifiable(xw: np.ndarray, names: Sequence[str] = PARAMS) -> None:
    """Name the parameters the design cannot separate (a column in the span of the others)."""
    if np.linalg.matrix_rank(xw) == xw.shape[1]:
        return
    weak = [
        name
        for i, name in enumerate(names)
        if np.linalg.matrix_rank(np.delete(xw, i, axis=1)) == np.linalg.matrix_rank(xw)
    ]
    raise ConfigError(
        "observations",
        f"the sweep cannot identify {', '.join(weak)}: vary prompt lengths (>= 3 values) and concurrency (>= 2)",
    )
