"""Shared pieces of the SABER engine parts (ordering ``saber-tiers``, admission ``saber-speed``, preset
``saber``): required speed, tiers, and the speed model with the parameters both parts take.

Required speed (tokens/s a request must sustain from now on to meet its deadline) is
``remaining_tokens / (deadline - now)``; ``remaining_tokens`` is the request's ``max_output_tokens`` minus
what it has generated (``demand = "max_tokens"``, the paper's rule) or the output-length *belief*
(``demand = "predicted"``: ``predicted_output_tokens`` minus generated, at least one token). Ground truth
is never read. A passed deadline needs infinite speed; no deadline needs none.

How a pass walks the window (``scan``; DESIGN 4.4, the paper's Algorithm 1):

* ``"random"`` (default, the paper): the first ``window`` high requests are the candidates of a pass,
  asked in a seeded random order; every candidate that passes the speed test is admitted, a failing one
  stays queued and the scan goes on, so one infeasible head never blocks admissible requests behind it.
  The random order is the paper's random draw from the window carried through the whole window (the
  first candidate asked is exactly the request the paper would pick).
* ``"queue"``: the same candidates in queue order (deadline or arrival): the tightest feasible request
  first, an ablation without the draw.
* ``"first"``: the earlier reading (one random pick from the window; the first deferred high request ends
  the high queue's turn for this pass). Kept for comparison.

High requests beyond the window wait for a later pass (the engine passes every step). The low (demoted)
queue is served only when no high request is left waiting after the pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.views import SeqView
from slosched.perf.speed_models import SPEED_MODEL_KINDS, AnySpeedModel, SpeedProfile, speed_model_from_dict
from slosched.policies.registry import setting

DEMANDS = ("max_tokens", "predicted")
SCANS = ("random", "queue", "first")


def remaining_tokens(seq: SeqView, demand: str) -> float:
    request = seq.request
    target = request.max_output_tokens if demand == "max_tokens" else request.predicted_output_tokens
    return max(float(target) - seq.num_output_tokens, 1.0)


def required_speed(seq: SeqView, now_s: float, demand: str) -> float:
    """Tokens/s ``seq`` needs from ``now_s`` on to meet its deadline (inf once the deadline passed)."""
    deadline = seq.request.deadline_s
    if math.isinf(deadline):
        return 0.0
    slack = deadline - now_s
    if slack <= 0:
        return math.inf
    return remaining_tokens(seq, demand) / slack


@dataclass(frozen=True, slots=True)
class SaberParams:
    """What SABER's ordering and admission share: the speed model, the demand rule and the window scan."""

    profile: str | None = setting(None, "path of a saved speed profile (from slosched.tuning.saber_profile)")
    model: str | None = setting(None, "which fit of the profile: usl (when not given), linear or logistic")
    speed: Mapping[str, Any] | None = setting(None, "inline speed model {kind: usl, lam: ..}, instead of a profile")
    demand: str = setting("max_tokens", "tokens still needed: max_tokens (the paper) or predicted (the belief)")
    window: int = setting(5, "high-tier requests one pass considers (>= 1)")
    scan: str = setting("random", "how a pass walks the window: random (the paper), queue or first")

    def __post_init__(self) -> None:
        check_speed_source(self)
        check_choice("saber.demand", self.demand, DEMANDS)
        check_choice("saber.scan", self.scan, SCANS)
        if self.window < 1:
            raise ConfigError("saber.window", f"must be >= 1, got {self.window}")


def check_choice(field: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(field, f"got {value!r}; allowed: {list(allowed)}")


def check_speed_source(params: SaberParams) -> None:
    """Exactly one of ``profile`` and ``speed``; ``model`` only with a profile, and a known fit."""
    if (params.profile is None) == (params.speed is None):
        raise ConfigError(
            "saber.profile / saber.speed",
            "give exactly one: a profile JSON path (from `slosched.tuning.saber_profile`) or inline "
            "coefficients such as {kind: usl, lam: 87.0, sigma: 0.02, kappa: 0.0001}",
        )
    if params.speed is not None and params.model is not None:
        raise ConfigError("saber.model", "only applies with a profile; inline speed names its kind")
    if params.model is not None and params.model not in SPEED_MODEL_KINDS:
        raise ConfigError("saber.model", f"got {params.model!r}; allowed: {list(SPEED_MODEL_KINDS)}")


def speed_model(params: SaberParams) -> AnySpeedModel:
    """The speed model ``params`` name: the profile's fit ``model`` (default ``usl``), or the inline one."""
    if params.speed is not None:
        return speed_model_from_dict(params.speed)
    return SpeedProfile.load(Path(str(params.profile))).model(params.model or "usl")
