"""SLO-scale curves: attainment as the SLO is scaled from 1x the no-contention latency upwards.

Each job gets a slowdown ratio ``r = latency_s / no_contention_s``. A job that did not complete (rejected,
failed, cancelled, never finished) has ``r = inf``: it misses the SLO at every scale. Attainment at scale
``s`` is the share of *all* jobs with ``r <= s``, so it is a non-decreasing step function of ``s`` with
values in ``[0, 1]``; it is NaN when there are no jobs (undefined, not 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from slosched.core.records import JobRecord
from slosched.core.request import Outcome

FloatArray = np.ndarray


def default_scales(num_points: int = 121) -> FloatArray:
    """Log-spaced scales from 1 to 100 inclusive (a fresh array each call, so callers may mutate it)."""
    if num_points < 2:
        raise ValueError(f"num_points must be >= 2, got {num_points}")
    return np.geomspace(1.0, 100.0, num_points)


def slowdown_ratios(jobs: Sequence[JobRecord]) -> FloatArray:
    """``latency_s / no_contention_s`` per job, in input order; ``inf`` for jobs that did not complete.

    A ratio that is NaN (unknown latency or no-contention time) is reported as ``inf``: a job whose
    slowdown cannot be established cannot be counted as within any SLO scale.
    """
    n = len(jobs)
    completed = np.fromiter((j.outcome is Outcome.COMPLETED for j in jobs), dtype=bool, count=n)
    finish = np.fromiter((j.finish_s for j in jobs), dtype=float, count=n)
    arrival = np.fromiter((j.arrival_s for j in jobs), dtype=float, count=n)
    base = np.fromiter((j.no_contention_s for j in jobs), dtype=float, count=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = (finish - arrival) / base
    ratios[~completed | np.isnan(ratios)] = math.inf
    return ratios


def attainment_at(ratios: FloatArray, scales: FloatArray | Sequence[float]) -> FloatArray:
    """Share of ``ratios`` that are ``<= s`` for each scale ``s``; all NaN when ``ratios`` is empty."""
    scale_array = np.asarray(scales, dtype=float)
    if ratios.size == 0:
        return np.full(scale_array.shape, math.nan)
    ordered = np.sort(ratios)
    counts = np.searchsorted(ordered, scale_array, side="right")
    return counts / ratios.size


def slo_scale_curve(jobs: Sequence[JobRecord], scales: FloatArray | Sequence[float] | None = None) -> FloatArray:
    """Attainment at each scale (default: ``default_scales()``); same shape as ``scales``."""
    grid = default_scales() if scales is None else scales
    return attainment_at(slowdown_ratios(jobs), grid)


def min_scale_from_ratios(ratios: FloatArray, target: float) -> float:
    """Smallest scale whose attainment is ``>= target``: the k-th smallest ratio, ``k = ceil(target * n)``.

    Returns ``inf`` when the target needs jobs that never completed, NaN when there are no jobs. The
    result is not clamped to 1.0: a job faster than its no-contention estimate yields a ratio below 1.
    """
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target must be in (0, 1], got {target}")
    n = ratios.size
    if n == 0:
        return math.nan
    k = _min_count_reaching(n, target)
    # k - 1 is the 0-based rank; partition is O(n), a full sort is not needed for one order statistic.
    return float(np.partition(ratios, k - 1)[k - 1])


def min_scale_for(jobs: Sequence[JobRecord], target: float) -> float:
    """``min_scale_from_ratios`` over the jobs' slowdown ratios (see there for the contract)."""
    return min_scale_from_ratios(slowdown_ratios(jobs), target)


def _min_count_reaching(n: int, target: float) -> int:
    """Smallest ``k`` in ``[1, n]`` with ``k / n >= target``, judged by the same float division that
    ``attainment_at`` uses, so that ``attainment_at(ratios, [min_scale]) >= target`` always holds.
    """
    # ceil(target * n) alone is off by one when the product rounds (0.07 * 100 = 7.000000000000001).
    k = max(1, min(n, math.ceil(target * n)))
    while k > 1 and (k - 1) / n >= target:
        k -= 1
    while k < n and k / n < target:
        k += 1
    return k
