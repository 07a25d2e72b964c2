"""Simulator knobs (validated by the scenario loader)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class SimOptions:
    """``slo_s`` (fixed) or ``slo_scale`` give the SLO of jobs whose trace does not carry one; neither means
    no deadline. ``slo_scale`` multiplies a no-contention latency on the fastest instance: with ``slo_basis``
    ``estimated`` (the default) the one a client can estimate at submission (``sim/deadlines.py``), with
    ``true-lengths`` the one from the job's true output lengths (an ORACLE deadline: policies reading it
    learn true sizes; kept only to reproduce earlier results, and labelled).

    ``fast_forward`` False steps every iteration (the reference the fast path is tested against).
    ``view_staleness_s`` 0 gives routers fresh instance state on every decision.
    """

    noise_sigma: float = 0.05
    view_staleness_s: float = 0.0
    fast_forward: bool = True
    belief_refit_s: float = 2.0
    slo_s: float | None = None
    slo_scale: float | None = None
    slo_basis: str = "estimated"
    horizon_s: float = math.inf
