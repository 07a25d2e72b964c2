"""Shared pieces of the SABER engine parts: required speed, tiers, per-pass admission bookkeeping, and
the speed model read from policy parameters.

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
from slosched.core.views import EngineView, SeqView
from slosched.perf.speed_models import SPEED_MODEL_KINDS, AnySpeedModel, SpeedProfile, speed_model_from_dict
from slosched.policies.registry import param

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


@dataclass(slots=True)
class AdmissionPass:
    """Bookkeeping of one admission pass (one engine step's loop over the waiting queue).

    The engine mechanism asks admission for waiting requests in ordering order starting at the head of
    the queue, and only moves admitted requests to the running set after the loop; so within a pass the
    engine's ``num_running`` does not yet count this pass's admissions, and this object does.
    Invariant: ``admitted`` counts requests admitted since the head was last asked, ``high_seen`` the
    high-tier requests asked since then (so it is the window position of the next high request).
    """

    now_s: float = -math.inf
    admitted: int = 0
    high_seen: int = 0
    max_required: float = 0.0  # largest feasible required speed among running + admitted this pass
    high_blocked: bool = False  # a high-tier request was deferred: the high queue is not empty

    def begin_if_new(self, seq: SeqView, engine: EngineView) -> bool:
        """Start a new pass when ``seq`` is the head of the waiting queue or time moved on."""
        waiting = engine.waiting
        if engine.now_s != self.now_s or (waiting and waiting[0] is seq):
            self.now_s = engine.now_s
            self.admitted = 0
            self.high_seen = 0
            self.max_required = 0.0
            self.high_blocked = False
            return True
        return False


def speed_model_from_params(policy: str, params: Mapping[str, Any]) -> AnySpeedModel:
    """The speed model of a SABER policy: ``profile`` (a saved :class:`SpeedProfile` JSON path) with
    ``model`` (which fit, default ``usl``), or ``speed`` (inline ``{"kind": ..., <coefficients>}``)."""
    profile = params.get("profile")
    inline = params.get("speed")
    if (profile is None) == (inline is None):
        raise ConfigError(
            f"{policy}.profile / {policy}.speed",
            "give exactly one: a profile JSON path (from `slosched.tuning.saber_profile`) or inline "
            "coefficients such as {kind: usl, lam: 87.0, sigma: 0.02, kappa: 0.0001}",
        )
    if inline is not None:
        if not isinstance(inline, Mapping):
            raise ConfigError(f"{policy}.speed", f"expected a mapping, got {inline!r}")
        if "model" in params:
            raise ConfigError(f"{policy}.model", "only applies with a profile; inline speed names its kind")
        return speed_model_from_dict(inline)
    kind = str(params.get("model", "usl"))
    if kind not in SPEED_MODEL_KINDS:
        raise ConfigError(f"{policy}.model", f"got {kind!r}; allowed: {list(SPEED_MODEL_KINDS)}")
    return SpeedProfile.load(Path(str(profile))).model(kind)


def choice(policy: str, params: Mapping[str, Any], name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = str(params.get(name, default))
    if value not in allowed:
        raise ConfigError(f"{policy}.{name}", f"got {value!r}; allowed: {list(allowed)}")
    return value


def window_from_params(params: Mapping[str, Any]) -> int:
    window = param(params, "window", 5, int)
    if window < 1:
        raise ConfigError("saber.window", f"must be >= 1, got {window}")
    return int(window)
