"""Shared pieces of the generators: length distributions and turning arrays into single jobs."""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from statistics import NormalDist

import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobSpec, single_job


def lognormal_params(mean: float, std: float) -> tuple[float, float]:
    """``(mu, sigma)`` of the lognormal whose mean and standard deviation are ``mean`` and ``std``."""
    if mean <= 0 or std < 0:
        raise ConfigError("lognormal", f"needs mean > 0 and std >= 0, got mean={mean}, std={std}")
    sigma_sq = math.log1p((std / mean) ** 2)
    return math.log(mean) - sigma_sq / 2, math.sqrt(sigma_sq)


def lognormal_quantile(mu: float, sigma: float, q: float) -> float:
    """The ``q`` quantile (0 < q < 1) of the lognormal with parameters ``mu``, ``sigma``."""
    return math.exp(mu + sigma * NormalDist().inv_cdf(q))


def to_tokens(samples: np.ndarray, cap: float) -> np.ndarray:
    """Round to whole tokens in ``[1, cap]`` (a call has at least one prompt and one output token)."""
    upper = max(1.0, math.floor(cap)) if math.isfinite(cap) else 2.0**62
    return np.clip(np.rint(samples), 1, upper).astype(np.int64)


def check_arrivals(arrivals: np.ndarray) -> np.ndarray:
    """Arrivals as a float64 array; they must be finite, >= 0 and non-decreasing."""
    times = np.asarray(arrivals, dtype=np.float64)
    if times.ndim != 1:
        raise ConfigError("arrivals", f"expected a 1-D array, got shape {times.shape}")
    if len(times) and (not np.all(np.isfinite(times)) or times[0] < 0 or np.any(np.diff(times) < 0)):
        raise ConfigError("arrivals", "must be finite, >= 0 and non-decreasing")
    return times


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small acyclic objects.

    Job specs hold no reference cycles, but allocating hundreds of thousands of them triggers full
    collections that cost ~40% of the build time; reference counting still frees everything.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def build_single_jobs(
    id_prefix: str,
    arrivals: np.ndarray,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    max_output_tokens: int | None,
    templates: str | Sequence[str],
    slo_s: float | Sequence[float | None] | None = None,
) -> list[JobSpec]:
    """One single job per arrival, in arrival order: ``jobs[i]`` arrives at ``arrivals[i]``.

    ``templates`` and ``slo_s`` are one value for every job or one per job. Outputs must already be
    clipped to ``max_output_tokens``.
    """
    count = len(arrivals)
    template_list = [templates] * count if isinstance(templates, str) else list(templates)
    slo_list = list(slo_s) if isinstance(slo_s, Sequence) else [slo_s] * count
    rows = zip(arrivals.tolist(), input_tokens.tolist(), output_tokens.tolist(), template_list, slo_list, strict=True)
    with gc_paused():
        return [
            single_job(
                f"{id_prefix}-{index}",
                arrival,
                CallSpec(input_tokens=prompt, output_tokens=output, max_output_tokens=max_output_tokens),
                slo_s=slo,
                template=template,
            )
            for index, (arrival, prompt, output, template, slo) in enumerate(rows)
        ]
