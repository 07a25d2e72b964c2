"""The deadline rule, written once for the simulator, the gateway and the vLLM plugin.

A job's (or a lone call's) absolute deadline is its arrival plus its end-to-end SLO, on the clock its
arrival was read from: simulated seconds in the simulator, the gateway's monotonic clock in the gateway,
Unix seconds in the plugin (``contract`` converts between the last two). No SLO (``None`` or an infinite
one) means no deadline: ``math.inf``, which every policy reads as "never late".
"""

from __future__ import annotations

import math


def absolute_deadline_s(arrival_s: float, slo_s: float | None) -> float:
    """``arrival_s + slo_s`` on ``arrival_s``'s clock; ``math.inf`` without a finite SLO."""
    if slo_s is None or not math.isfinite(slo_s):
        return math.inf
    return arrival_s + slo_s


def slo_or_inf(slo_s: float | None) -> float:
    """An SLO as policies read it: ``math.inf`` for none."""
    return math.inf if slo_s is None else slo_s
