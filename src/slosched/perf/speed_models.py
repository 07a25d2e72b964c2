"""Per-request generation speed as a function of concurrency, ``v = f(L)`` (SABER, DESIGN 4.4).

Three fitted forms, all in tokens per second per request:

* ``usl``: the Universal Scalability Law's throughput divided by L,
  ``f(L) = lam / (1 + sigma*(L-1) + kappa*L*(L-1))`` (``lam`` = speed alone, ``sigma`` contention,
  ``kappa`` coherency; all >= 0);
* ``linear``: ``f(L) = max(intercept + slope*L, 0)``;
* ``logistic``: ``f(L) = floor + (top - floor) / (1 + exp(steepness*(L - midpoint)))``.

Fits use ``scipy.optimize.curve_fit`` on (concurrency, speed) samples; a :class:`SpeedProfile` holds one
fit per form with its R^2 and saves to / loads from JSON, so a profile measured once (simulator or live
endpoint) drives admission later. Invariant: every model's ``speed`` is finite and >= 0 for L >= 1.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from scipy.optimize import curve_fit

from slosched.core.errors import ConfigError

SPEED_MODEL_KINDS = ("usl", "linear", "logistic")


@dataclass(slots=True, frozen=True)
class SpeedSample:
    """One observed request: mean concurrency while it generated, and its tokens per second."""

    concurrency: float
    tokens_per_s: float


class SpeedModel(Protocol):
    kind: str

    def speed(self, concurrency: float) -> float:
        """Predicted tokens/s of each request when ``concurrency`` requests run together."""
        ...


@dataclass(slots=True, frozen=True)
class UslSpeedModel:
    lam: float
    sigma: float
    kappa: float
    kind: str = "usl"

    def speed(self, concurrency: float) -> float:
        load = concurrency - 1.0
        return self.lam / (1.0 + self.sigma * load + self.kappa * concurrency * load)


@dataclass(slots=True, frozen=True)
class LinearSpeedModel:
    intercept: float
    slope: float
    kind: str = "linear"

    def speed(self, concurrency: float) -> float:
        return max(self.intercept + self.slope * concurrency, 0.0)


@dataclass(slots=True, frozen=True)
class LogisticSpeedModel:
    top: float
    floor: float
    midpoint: float
    steepness: float
    kind: str = "logistic"

    def speed(self, concurrency: float) -> float:
        # Clamp the exponent: far past the midpoint the curve is flat at the floor anyway.
        exponent = min(self.steepness * (concurrency - self.midpoint), 700.0)
        return self.floor + (self.top - self.floor) / (1.0 + math.exp(exponent))


AnySpeedModel = UslSpeedModel | LinearSpeedModel | LogisticSpeedModel


@dataclass(slots=True, frozen=True)
class SpeedFit:
    """A fitted model and how well it explains the samples (R^2 on speeds, RMSE in tokens/s)."""

    model: AnySpeedModel
    r2: float
    rmse: float


def _usl(x: np.ndarray, lam: float, sigma: float, kappa: float) -> np.ndarray:
    return lam / (1.0 + sigma * (x - 1.0) + kappa * x * (x - 1.0))


def _linear(x: np.ndarray, intercept: float, slope: float) -> np.ndarray:
    return intercept + slope * x


def _logistic(x: np.ndarray, top: float, floor: float, midpoint: float, steepness: float) -> np.ndarray:
    return floor + (top - floor) / (1.0 + np.exp(np.clip(steepness * (x - midpoint), -700.0, 700.0)))


def _arrays(samples: Sequence[SpeedSample]) -> tuple[np.ndarray, np.ndarray]:
    if len(samples) < 4:
        raise ConfigError("speed samples", f"need at least 4 samples to fit, got {len(samples)}")
    x = np.array([s.concurrency for s in samples], dtype=np.float64)
    y = np.array([s.tokens_per_s for s in samples], dtype=np.float64)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(x >= 1.0) and np.all(y > 0)):
        raise ConfigError("speed samples", "concurrency must be >= 1 and speeds finite and > 0")
    return x, y


def _score(model: AnySpeedModel, x: np.ndarray, y: np.ndarray) -> SpeedFit:
    predicted = np.array([model.speed(float(value)) for value in x])
    residual = float(np.sum((y - predicted) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - residual / total if total > 0 else 0.0
    return SpeedFit(model, r2, math.sqrt(residual / len(y)))


def fit_usl(samples: Sequence[SpeedSample]) -> SpeedFit:
    x, y = _arrays(samples)
    lam0 = float(np.max(y[x <= np.min(x) + 0.5])) if np.any(x <= np.min(x) + 0.5) else float(np.max(y))
    params, _ = curve_fit(
        _usl, x, y, p0=(lam0, 0.01, 1e-4), bounds=([0.0, 0.0, 0.0], [np.inf, np.inf, np.inf]), maxfev=20000
    )
    lam, sigma, kappa = (float(value) for value in params)
    return _score(UslSpeedModel(lam, sigma, kappa), x, y)


def fit_linear(samples: Sequence[SpeedSample]) -> SpeedFit:
    x, y = _arrays(samples)
    slope, intercept = np.polyfit(x, y, 1)
    return _score(LinearSpeedModel(float(intercept), float(slope)), x, y)


def fit_logistic(samples: Sequence[SpeedSample]) -> SpeedFit:
    x, y = _arrays(samples)
    # An S-curve inside the profiled range: the midpoint between the smallest and largest concurrency
    # and the plateau no higher than twice the fastest sample (otherwise it degenerates to an exponential).
    low, high, top = float(np.min(x)), float(np.max(x)), float(np.max(y))
    p0 = (top, float(np.min(y)), float(np.median(x)), 4.0 / max(high - low, 1.0))
    params, _ = curve_fit(
        _logistic,
        x,
        y,
        p0=p0,
        bounds=([0.0, 0.0, low, 0.0], [2.0 * top, top, max(high, low + 1e-9), np.inf]),
        maxfev=20000,
    )
    top, floor, midpoint, steepness = (float(value) for value in params)
    return _score(LogisticSpeedModel(top, floor, midpoint, steepness), x, y)


FITTERS: Mapping[str, Callable[[Sequence[SpeedSample]], SpeedFit]] = {
    "usl": fit_usl,
    "linear": fit_linear,
    "logistic": fit_logistic,
}


def speed_model_from_dict(data: Mapping[str, Any]) -> AnySpeedModel:
    """A model from ``{"kind": ..., <coefficients>}`` (the JSON form), with errors naming the field."""
    kind = data.get("kind")
    classes: dict[str, type[AnySpeedModel]] = {
        "usl": UslSpeedModel,
        "linear": LinearSpeedModel,
        "logistic": LogisticSpeedModel,
    }
    cls = classes.get(str(kind))
    if cls is None:
        raise ConfigError("speed.kind", f"got {kind!r}; allowed: {list(classes)}")
    coefficients = {name: value for name, value in data.items() if name != "kind"}
    expected = {name for name in cls.__dataclass_fields__ if name != "kind"}
    if set(coefficients) != expected:
        raise ConfigError(f"speed ({kind})", f"expected coefficients {sorted(expected)}, got {sorted(coefficients)}")
    try:
        values: dict[str, Any] = {name: float(value) for name, value in coefficients.items()}
        model = cls(**values)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"speed ({kind})", f"coefficients must be numbers: {error}") from error
    if not model.speed(1.0) > 0:
        raise ConfigError(f"speed ({kind})", f"f(1) must be > 0, got {model.speed(1.0)}")
    return model


@dataclass(slots=True)
class SpeedProfile:
    """Fits of every form on one set of samples; ``meta`` records where the samples came from."""

    fits: dict[str, SpeedFit]
    num_samples: int
    meta: dict[str, Any] = field(default_factory=dict)

    def model(self, kind: str = "usl") -> AnySpeedModel:
        if kind not in self.fits:
            raise ConfigError("speed model", f"got {kind!r}; this profile has {sorted(self.fits)}")
        return self.fits[kind].model

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_samples": self.num_samples,
            "meta": self.meta,
            "fits": {
                kind: {"model": asdict(fit.model), "r2": fit.r2, "rmse": fit.rmse} for kind, fit in self.fits.items()
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpeedProfile:
        try:
            fits = {
                kind: SpeedFit(speed_model_from_dict(entry["model"]), float(entry["r2"]), float(entry["rmse"]))
                for kind, entry in data["fits"].items()
            }
            return cls(fits, int(data["num_samples"]), dict(data.get("meta", {})))
        except (KeyError, TypeError, AttributeError) as error:
            raise ConfigError("speed profile", f"malformed profile JSON ({error!r})") from error

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> SpeedProfile:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ConfigError("speed profile", f"cannot read {path}: {error}") from error
        return cls.from_dict(data)


def fit_profile(
    samples: Sequence[SpeedSample], kinds: Sequence[str] = SPEED_MODEL_KINDS, meta: Mapping[str, Any] | None = None
) -> SpeedProfile:
    """Fit every form in ``kinds`` on ``samples``."""
    unknown = [kind for kind in kinds if kind not in FITTERS]
    if unknown:
        raise ConfigError("speed model kinds", f"unknown {unknown}; allowed: {list(FITTERS)}")
    return SpeedProfile({kind: FITTERS[kind](samples) for kind in kinds}, len(samples), dict(meta or {}))
