"""Ordering ``saber-tiers`` (alias ``saber``): SABER's two-tier queue with windowed random picks (DESIGN 4.4).

A waiting request is *high* tier while its required speed is at most ``f(1)`` (the fastest any request
can go), otherwise it is demoted to the *low* tier: it can no longer make its deadline even alone.
Required speed only grows while a request waits, so demotion is permanent until it runs.

The queue order is all high requests, then all low ones. High requests are sorted by deadline
(``order = "deadline"``, default) or arrival (``"arrival"``); the first ``window`` of them are the
pass's candidates and come in the order the admission asks them (``scan``, see
:mod:`slosched.policies.engine.ordering.saber_speed_math`): a seeded random permutation (``"random"``), sorted order
(``"queue"``), or, for ``"first"``, a windowed shuffle of the whole high queue (position 0 a uniformly
random one of the first ``window``, position 1 a random one of the first ``window`` that remain, ...).
Low requests follow, most likely to still make it first (lowest required speed), as best effort.

Keys depend on time, so ``static_keys`` and ``time_invariant`` are False. The ranking is computed once
per (time, queue content) and served to the mechanism's per-request ``key`` calls from a cache; the
random draws come from the run's seeded ``PolicyContext.rng``, one draw per ranking, so runs are
deterministic by seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from slosched.core.views import EngineView, SeqView
from slosched.perf.speed_models import AnySpeedModel
from slosched.policies.engine.base import ORDERINGS
from slosched.policies.engine.ordering.saber_speed_math import SaberParams, check_choice, required_speed, speed_model
from slosched.policies.registry import PolicyContext, setting

HIGH, LOW = 0, 1
ORDERS = ("deadline", "arrival")


@dataclass(frozen=True, slots=True)
class SaberTiersParams(SaberParams):
    order: str = setting("deadline", "high-tier requests sorted by deadline or by arrival")

    def __post_init__(self) -> None:
        SaberParams.__post_init__(self)
        check_choice("saber.order", self.order, ORDERS)


def window_permuted(items: list[Any], window: int, rng: np.random.Generator) -> list[Any]:
    """``items`` with its first ``window`` in a uniformly random order (the rest stay in place)."""
    span = min(window, len(items))
    if span < 2:
        return list(items)
    head = [items[index] for index in rng.permutation(span).tolist()]
    return head + items[span:]


def windowed_shuffle(items: list[Any], window: int, uniforms: np.ndarray) -> list[Any]:
    """Repeatedly take a uniformly random one of the first ``window`` remaining items (``uniforms`` holds
    one U[0,1) draw per item)."""
    pool = list(items)
    picked: list[Any] = []
    for draw in uniforms[: len(items)].tolist():
        span = min(window, len(pool))
        picked.append(pool.pop(min(int(draw * span), span - 1)))
    return picked


class SaberOrdering:
    static_keys = False
    time_invariant = False

    def __init__(
        self, model: AnySpeedModel, window: int, rng: np.random.Generator, order: str, demand: str, scan: str = "random"
    ) -> None:
        self.model = model
        self.scan = scan
        self.max_speed = model.speed(1.0)
        self.window = window
        self.rng = rng
        self.order = order
        self.demand = demand
        self._now = -1.0
        self._ranks: dict[str, tuple[int, int]] = {}

    def is_high(self, seq: SeqView, now_s: float) -> bool:
        """High tier iff the request can still make its deadline running alone (required <= f(1))."""
        return required_speed(seq, now_s, self.demand) <= self.max_speed

    def key(self, seq: SeqView, engine: EngineView) -> Any:
        rank = self._ranks.get(seq.request.id) if engine.now_s == self._now else None
        if rank is None:
            self._rank(engine)
            rank = self._ranks[seq.request.id]
        return rank

    def _rank(self, engine: EngineView) -> None:
        now = engine.now_s
        high: list[tuple[float, float, str]] = []
        low: list[tuple[float, float, str]] = []
        for seq in engine.waiting:
            request = seq.request
            need = required_speed(seq, now, self.demand)
            if need <= self.max_speed:
                first = request.deadline_s if self.order == "deadline" else request.arrival_s
                high.append((first, request.arrival_s, request.id))
            else:
                low.append((need, request.arrival_s, request.id))
        high.sort()
        low.sort()
        ranks: dict[str, tuple[int, int]] = {}
        for position, entry in enumerate(self._draw(high)):
            ranks[entry[2]] = (HIGH, position)
        for position, entry in enumerate(low):
            ranks[entry[2]] = (LOW, position)
        self._now = now
        self._ranks = ranks

    def _draw(self, high: list[Any]) -> list[Any]:
        """The sorted high queue in the order the admission pass asks it."""
        if self.window < 2 or len(high) < 2 or self.scan == "queue":
            return high
        if self.scan == "random":
            return window_permuted(high, self.window, self.rng)
        return windowed_shuffle(high, self.window, self.rng.random(len(high)))


def saber_ordering(
    params: SaberTiersParams, context: PolicyContext, model: AnySpeedModel | None = None
) -> SaberOrdering:
    """The ordering ``params`` describe (``model``: a speed model already built from them, to share)."""
    speed = model if model is not None else speed_model(params)
    return SaberOrdering(speed, params.window, context.rng, params.order, params.demand, params.scan)


@ORDERINGS.register("saber-tiers", params=SaberTiersParams)
def build(params: SaberTiersParams, context: PolicyContext) -> SaberOrdering:
    return saber_ordering(params, context)
