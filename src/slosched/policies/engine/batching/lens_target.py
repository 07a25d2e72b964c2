"""LENS's per-iteration latency target from the TTFT/TPOT SLOs (pure functions, unit-tested per branch).

A step of duration ``td`` sets the TPOT of every decoding request (one token per step) and, through how
many prefill tokens fit in it, the TTFT of waiting ones. LENS models TTFT as a line in ``td``:
``ttft(td) = a - b*td`` (``b > 0``: longer steps carry more prefill and cut TTFT). The feasible
targets are ``td in [(a - SLO_ttft) / b, SLO_tpot]``. A waiting request's end-to-end latency is
``ttft(td) + L*td = a + (L - b)*td`` for ``L`` decode steps, so if the mean decode length exceeds ``b``
the low end is better (bounded below by a safety minimum: the step cannot be shorter than the decodes
it must carry), otherwise the high end. Whenever requests wait, the low end relaxes smoothly towards the
high end as the oldest of them waits longer, on the time scale of its TTFT SLO (or a fixed one without it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class Branch(StrEnum):
    LOW = "low"  # long outputs: short steps (TPOT dominates their latency)
    HIGH = "high"  # short outputs: long steps (TTFT dominates)
    RELAXED = "relaxed"  # low end moved towards the high end because requests wait
    INFEASIBLE = "infeasible"  # TTFT SLO unreachable at any step within the TPOT SLO: the high end


@dataclass(slots=True, frozen=True)
class Target:
    """Chosen step latency ``td_s`` and the feasible interval ``[low_s, high_s]`` it came from."""

    td_s: float
    low_s: float
    high_s: float
    branch: Branch


@dataclass(slots=True, frozen=True)
class TtftLine:
    """``ttft(td) = a_s - b * td``; ``b`` >= 0 (dimensionless: seconds of TTFT per second of step)."""

    a_s: float
    b: float


def fit_line(td_low_s: float, ttft_low_s: float, td_high_s: float, ttft_high_s: float) -> TtftLine:
    """The line through two (td, TTFT) probes; ``b`` is clipped at 0 (a TTFT that grows with the step
    size gives no reason to lengthen steps)."""
    span = td_high_s - td_low_s
    if span <= 0:
        return TtftLine(ttft_low_s, 0.0)
    b = max(0.0, (ttft_low_s - ttft_high_s) / span)
    return TtftLine(ttft_low_s + b * td_low_s, b)


def choose_target(
    line: TtftLine,
    ttft_slo_s: float | None,
    tpot_slo_s: float | None,
    mean_decode_tokens: float,
    min_step_s: float,
    max_step_s: float,
    pressure: float,
) -> Target:
    """The target step latency. ``min_step_s``: safety minimum; ``max_step_s``: the longest step the
    token cap allows (the high end without a TPOT SLO); ``pressure`` in [0, 1]: how close the oldest
    waiting request is to its TTFT SLO (0 when nothing waits)."""
    high = max_step_s if tpot_slo_s is None else min(tpot_slo_s, max_step_s)
    high = max(high, min_step_s)
    if ttft_slo_s is None:
        low_raw = -math.inf
    elif line.b > 0:
        low_raw = (line.a_s - ttft_slo_s) / line.b
    else:
        low_raw = -math.inf if line.a_s <= ttft_slo_s else math.inf
    low = max(low_raw, min_step_s)
    if low > high:
        return Target(high, low, high, Branch.INFEASIBLE)
    if mean_decode_tokens <= line.b:
        return Target(high, low, high, Branch.HIGH)
    share = min(max(pressure, 0.0), 1.0)
    if share > 0.0:
        return Target(low + (high - low) * share, low, high, Branch.RELAXED)
    return Target(low, low, high, Branch.LOW)


def wait_pressure(
    waited_s: float, ttft_slo_s: float | None, relax_fraction: float, fallback_s: float | None = None
) -> float:
    """Smooth relaxation in [0, 1): ``1 - exp(-waited / (relax_fraction * scale))`` with ``scale`` the
    TTFT SLO, else ``fallback_s``; 0 without a wait or without either."""
    scale = ttft_slo_s if ttft_slo_s is not None else fallback_s
    if waited_s <= 0 or scale is None:
        return 0.0
    return 1.0 - math.exp(-waited_s / (relax_fraction * scale))
