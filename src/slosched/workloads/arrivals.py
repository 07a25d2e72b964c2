"""Arrival processes: when each of ``num_jobs`` jobs arrives, as a sorted float64 array in seconds.

Invariants of every process here: the result has exactly ``num_jobs`` entries, is non-decreasing, and
its first entry is 0.0 (a run starts with its first arrival, so no simulated time is wasted before it);
the same ``rng`` state gives the same array. "Mean rate" below means ``(num_jobs - 1) / last arrival``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from slosched.core.errors import ConfigError
from slosched.workloads._validation import config_error
from slosched.workloads.bundled import azure_trace

ArrivalProcess = Literal["poisson", "gamma", "on_off", "replay"]

# Which parameters each process takes; a parameter given to a process that ignores it is an error, so a
# scenario never believes it set burstiness on a Poisson process.
_PARAMETERS: dict[str, tuple[set[str], set[str]]] = {
    "poisson": ({"rate"}, set()),
    "gamma": ({"rate", "cv"}, set()),
    "on_off": ({"rate_on", "mean_on_s", "mean_off_s"}, set()),
    "replay": (set(), {"rate", "trace", "timestamps"}),
}


def _check_positive(name: str, value: float) -> None:
    if not np.isfinite(value) or value <= 0:
        raise ConfigError(name, f"must be a finite number > 0, got {value}")


def _check_num_jobs(num_jobs: int) -> None:
    if num_jobs < 0:
        raise ConfigError("num_jobs", f"must be >= 0, got {num_jobs}")


def _from_gaps(gaps: np.ndarray) -> np.ndarray:
    """Arrival times whose first entry is 0 and whose successive differences are ``gaps[:-1]``."""
    times = np.empty(len(gaps), dtype=np.float64)
    if len(gaps):
        times[0] = 0.0
        np.cumsum(gaps[:-1], out=times[1:])
    return times


def poisson(num_jobs: int, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Poisson process: exponential inter-arrivals with mean ``1 / rate`` (CV 1)."""
    _check_num_jobs(num_jobs)
    _check_positive("rate", rate)
    return _from_gaps(rng.exponential(1.0 / rate, size=num_jobs))


def gamma(num_jobs: int, rate: float, cv: float, rng: np.random.Generator) -> np.ndarray:
    """Renewal process with Gamma inter-arrivals of mean ``1 / rate`` and coefficient of variation ``cv``.

    ``cv`` 1 is Poisson; above 1 arrivals come in bursts separated by long gaps; below 1 they are more
    regular than Poisson.
    """
    _check_num_jobs(num_jobs)
    _check_positive("rate", rate)
    _check_positive("cv", cv)
    shape = 1.0 / (cv * cv)
    return _from_gaps(rng.gamma(shape, 1.0 / (rate * shape), size=num_jobs))


def on_off(num_jobs: int, rate_on: float, mean_on_s: float, mean_off_s: float, rng: np.random.Generator) -> np.ndarray:
    """Bursts: Poisson arrivals at ``rate_on`` during ON periods, none during OFF periods.

    ON and OFF durations are exponential with means ``mean_on_s`` and ``mean_off_s``; the process starts
    at the beginning of an ON period. Long-run mean rate: ``rate_on * mean_on_s / (mean_on_s + mean_off_s)``.
    """
    _check_num_jobs(num_jobs)
    for name, value in (("rate_on", rate_on), ("mean_on_s", mean_on_s), ("mean_off_s", mean_off_s)):
        _check_positive(name, value)
    # Draw the arrivals on an "ON-time" clock, then push each one later by the OFF time before it.
    active = _from_gaps(rng.exponential(1.0 / rate_on, size=num_jobs))
    if num_jobs == 0:
        return active
    on_s = rng.exponential(mean_on_s, size=int(active[-1] / mean_on_s * 1.2) + 16)
    while on_s.sum() <= active[-1]:
        on_s = np.concatenate([on_s, rng.exponential(mean_on_s, size=len(on_s))])
    off_s = rng.exponential(mean_off_s, size=len(on_s))
    periods_before = np.searchsorted(np.cumsum(on_s), active, side="right")
    off_before = np.concatenate([[0.0], np.cumsum(off_s)])
    return active + off_before[periods_before]


def replay(
    timestamps: Sequence[float] | np.ndarray, target_rate: float | None = None, num_jobs: int | None = None
) -> np.ndarray:
    """Replay recorded timestamps as offsets from the first one, optionally rescaled in time.

    With ``target_rate`` every gap is multiplied by the same factor, so the order and the relative
    burstiness are kept and the mean rate becomes exactly ``target_rate``. ``num_jobs`` takes the first
    rows of the trace; more rows than the trace holds repeat it, each repetition starting one mean gap
    after the previous one ended. Timestamps must be finite and non-decreasing.
    """
    stamps = np.asarray(timestamps, dtype=np.float64)
    if stamps.ndim != 1 or len(stamps) == 0:
        raise ConfigError("timestamps", "expected a non-empty 1-D sequence of numbers")
    if not np.all(np.isfinite(stamps)) or np.any(np.diff(stamps) < 0):
        raise ConfigError("timestamps", "must be finite and non-decreasing")
    if target_rate is not None:
        _check_positive("target_rate", target_rate)
    count = len(stamps) if num_jobs is None else num_jobs
    _check_num_jobs(count)
    offsets = stamps - stamps[0]
    if count > len(offsets):
        if offsets[-1] <= 0:
            raise ConfigError("num_jobs", f"a trace spanning 0 s cannot repeat past its {len(offsets)} rows")
        period = offsets[-1] * len(offsets) / (len(offsets) - 1)
        index = np.arange(count)
        offsets = offsets[index % len(offsets)] + (index // len(offsets)) * period
    else:
        offsets = offsets[:count].copy()
    if target_rate is None or count < 2:
        return offsets
    if offsets[-1] <= 0:
        raise ConfigError("target_rate", "cannot rescale timestamps that span 0 s")
    return offsets * ((count - 1) / offsets[-1] / target_rate)


class ArrivalSpec(BaseModel):
    """An arrival process and its parameters, as a scenario names it.

    ``poisson``: ``rate``. ``gamma``: ``rate``, ``cv``. ``on_off``: ``rate_on``, ``mean_on_s``,
    ``mean_off_s``. ``replay``: exactly one of ``trace`` (a bundled Azure trace) or ``timestamps``, and
    optionally ``rate`` (the target mean rate; absent keeps the recorded timing). Rates are jobs per
    second. Constructing an invalid spec raises ``ConfigError`` naming the field and allowed values.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    process: ArrivalProcess
    rate: float | None = Field(default=None, gt=0)
    cv: float | None = Field(default=None, gt=0)
    rate_on: float | None = Field(default=None, gt=0)
    mean_on_s: float | None = Field(default=None, gt=0)
    mean_off_s: float | None = Field(default=None, gt=0)
    trace: Literal["azure-conv", "azure-code"] | None = None
    timestamps: tuple[float, ...] | None = None

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise config_error(error, "arrivals") from None

    @classmethod
    def from_mapping(cls, data: Any) -> ArrivalSpec:
        """Validate a scenario's ``arrivals`` block (a mapping) into a spec."""
        if not isinstance(data, Mapping):
            raise ConfigError("arrivals", f"expected a mapping, got {type(data).__name__}")
        return cls(**{str(key): value for key, value in data.items()})

    @model_validator(mode="after")
    def _parameters_match_process(self) -> ArrivalSpec:
        required, optional = _PARAMETERS[self.process]
        given = {name for name in _PARAMETERS_ALL if getattr(self, name) is not None}
        for name in sorted(required - given):
            raise ConfigError(name, f"required for process {self.process!r}")
        for name in sorted(given - required - optional):
            allowed = ", ".join(sorted(required | optional))
            raise ConfigError(name, f"not a parameter of process {self.process!r}; its parameters: {allowed}")
        if self.process == "replay" and (self.trace is None) == (self.timestamps is None):
            allowed = "trace (azure-conv, azure-code) or timestamps"
            raise ConfigError("trace", f"process 'replay' needs exactly one of {allowed}")
        return self

    def sample(self, num_jobs: int, rng: np.random.Generator) -> np.ndarray:
        """``num_jobs`` arrival times (sorted, first at 0.0); replay draws nothing from ``rng``."""
        if self.process == "poisson":
            return poisson(num_jobs, self._need(self.rate), rng)
        if self.process == "gamma":
            return gamma(num_jobs, self._need(self.rate), self._need(self.cv), rng)
        if self.process == "on_off":
            on_s, off_s = self._need(self.mean_on_s), self._need(self.mean_off_s)
            return on_off(num_jobs, self._need(self.rate_on), on_s, off_s, rng)
        stamps = azure_trace(self.trace).arrival_s if self.trace is not None else self._stamps()
        return replay(stamps, self.rate, num_jobs)

    @property
    def mean_rate(self) -> float:
        """Long-run mean arrival rate in jobs per second (for replay without ``rate``: the trace's)."""
        if self.process in ("poisson", "gamma"):
            return self._need(self.rate)
        if self.process == "on_off":
            on_s, off_s = self._need(self.mean_on_s), self._need(self.mean_off_s)
            return self._need(self.rate_on) * on_s / (on_s + off_s)
        if self.rate is not None:
            return self.rate
        stamps = azure_trace(self.trace).arrival_s if self.trace is not None else self._stamps()
        span = float(stamps[-1] - stamps[0])
        return (len(stamps) - 1) / span if span > 0 else float("inf")

    def _stamps(self) -> np.ndarray:
        return np.asarray(self.timestamps, dtype=np.float64)

    @staticmethod
    def _need(value: float | None) -> float:
        assert value is not None, "checked by _parameters_match_process"
        return value


_PARAMETERS_ALL = ("rate", "cv", "rate_on", "mean_on_s", "mean_off_s", "trace", "timestamps")
