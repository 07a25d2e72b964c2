"""The router pipeline: filters -> scorers (each in [0, 1], weighted) -> a picker, wrapped in a ``Profile``
that is itself a ``Router`` (in the spirit of llm-d's endpoint picker).

One routing decision (a *cycle*) runs:

1. **filters**, in order: each keeps the candidates that can or should take the request. A filter never
   empties the set: when nothing would pass it keeps its whole input (``keep_or_all``), so a request always
   goes somewhere (feasibility proper is the runtime's job, before routing).
2. **scorers**: each gives every remaining candidate a score in [0, 1], higher is better. Scores from raw
   quantities (tokens, seconds) are normalised over the candidate set by ``min_max`` (strictly
   order-preserving, see there) or ``dense_rank`` (lexicographic keys), so the normalised argmax is the raw
   one exactly.
3. **picker**: combines the scores with their weights (weighted sum or weighted product) and picks one
   candidate: the max (ties: the lowest position) or a seeded random choice (``pickers``).

Stages that keep state learn through two hooks the ``Profile`` calls: ``on_routed`` (the chosen view, once
per decision) and ``on_request_finished`` (a completion). Stages share per-decision work through
``Cycle.scratch`` (PRISM's four scorers read one engine-state pass).

Registries: ``FILTERS``, ``SCORERS``, ``PICKERS`` (name -> factory, as ``ROUTERS``); the router ``pipeline``
(``pipeline_config``) builds a ``Profile`` from YAML.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.registry import Registry

Key = Any  # a float, or a tuple of floats compared lexicographically


class Cycle:
    """One routing decision: the request, the time, and scratch space stages may share within it."""

    __slots__ = ("_scratch", "now_s", "request")

    def __init__(self, request: Request, now_s: float) -> None:
        self.request = request
        self.now_s = now_s
        self._scratch: dict[Any, Any] | None = None

    @property
    def scratch(self) -> dict[Any, Any]:
        # Made on first use: most decisions (every simple router's) never share work, and a dict per
        # decision was a measurable part of a ~1 us route.
        if self._scratch is None:
            self._scratch = {}
        return self._scratch


class Filter(Protocol):
    """Keeps the candidates that can or should take the request: positions into ``views``, ascending.

    Invariant: non-empty whenever ``views`` is (return ``keep_or_all(kept, len(views))``)."""

    def filter(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[int]: ...


class Scorer(Protocol):
    """One score per view, each in [0, 1], higher is better (1: the best this scorer can say)."""

    def score(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[float]: ...


@dataclass(slots=True)
class ScoreTable:
    """The scorers' columns for one decision: ``columns[j][i]`` is scorer ``names[j]`` on candidate ``i``."""

    names: tuple[str, ...]
    weights: tuple[float, ...]
    columns: list[list[float]]
    size: int


class Picker(Protocol):
    """Chooses one candidate from the scores: an index in ``range(table.size)`` (``table.size`` >= 1).

    Optional fast paths a ``Profile`` looks for (same decisions, no score table):

    * ``key_pick() -> KeyPick | None``: the choice from the raw lower-is-better keys of one ``RankedScorer``
      weighted 1 (its normalisation is strictly order-preserving, so comparing keys is comparing scores);
      None when this picker needs the table after all.
    * ``pick_blind(size) -> int``: a picker that ignores scores (``random``), used when there is no scorer.
    """

    def pick(self, table: ScoreTable) -> int: ...


KeyPick = Callable[[list[Key]], int]


@runtime_checkable
class RoutedObserver(Protocol):
    """Stages with state (session homes, cursors, prefix trees) learn where each request went."""

    def on_routed(self, cycle: Cycle, view: InstanceView) -> None: ...


@runtime_checkable
class FinishObserver(Protocol):
    """Stages that learn from outcomes (latency averages, latency models)."""

    def on_request_finished(self, instance_index: int, request: Request, latency_s: float, now_s: float) -> None: ...


FILTERS: Registry[Filter] = Registry("filter")
SCORERS: Registry[Scorer] = Registry("scorer")
PICKERS: Registry[Picker] = Registry("picker")


def keep_or_all(kept: list[int], num_views: int) -> list[int]:
    """The filter fallback: an empty selection keeps every candidate."""
    return kept if kept else list(range(num_views))


def first_min(keys: Sequence[Key]) -> int:
    """Position of the smallest key; ties: the lowest position.

    ``min`` keeps its candidate unless a later key is strictly smaller, so it returns the first smallest
    key, and ``index`` finds the first position equal to it: the same position as
    ``min(range(n), key=keys.__getitem__)`` at a third of the cost (two C loops, no key calls)."""
    return keys.index(min(keys))


def min_max(keys: Sequence[float]) -> list[float]:
    """Lower-is-better keys -> scores in [0, 1]: ``(max - k) / (max - min)`` (all 1 when the keys are equal).

    Strictly order-preserving: ``k_i < k_j`` implies ``s_i > s_j`` and ``k_i == k_j`` implies ``s_i == s_j``,
    so every comparison a picker makes agrees with the raw keys. Rounding can merge two keys closer than the
    float resolution of the range; those scores are then pulled apart by one ulp each (``_separate``).
    Keys must be finite."""
    low, high = min(keys), max(keys)
    if not high > low:
        return [1.0] * len(keys)
    span = high - low
    scores = [(high - key) / span for key in keys]
    # A set per call costs ~1 us on 16 candidates; the sort below only when rounding merged two keys.
    if len(set(scores)) != len(set(keys)):
        _separate(keys, scores)
    return scores


def _separate(keys: Sequence[float], scores: list[float]) -> None:
    order = sorted(range(len(keys)), key=keys.__getitem__)
    previous = order[0]
    for position in order[1:]:
        if keys[position] == keys[previous]:
            scores[position] = scores[previous]
        elif scores[position] >= scores[previous]:
            scores[position] = math.nextafter(scores[previous], 0.0)
        previous = position
    # Pulling down stops at 0 (keys [0, 5e-324, -2] score [0, 0, 1]): such a run at the bottom is pulled
    # apart upwards; everything above it is already strictly ordered, so nothing else moves.
    following = order[-1]
    for position in reversed(order[:-1]):
        if keys[position] == keys[following]:
            scores[position] = scores[following]
        elif scores[position] <= scores[following]:
            scores[position] = math.nextafter(scores[following], 1.0)
        following = position


def dense_rank(keys: Sequence[Key]) -> list[float]:
    """Lower-is-better keys of any ordered type -> ``1 - rank / (num_ranks - 1)``: the best 1, the worst 0,
    equal keys equal scores; only the order of the keys counts, not their distances."""
    ranks = {key: rank for rank, key in enumerate(sorted(set(keys)))}
    top = len(ranks) - 1
    if top == 0:
        return [1.0] * len(keys)
    return [1.0 - ranks[key] / top for key in keys]


class RankedScorer:
    """A scorer from raw lower-is-better keys (tokens, seconds, or tuples of them); ``score`` normalises them
    with ``min_max`` (float keys) or ``dense_rank`` (``lexicographic = True``). A ``Profile`` whose only
    scorer is ranked, weighted 1, under a picker with ``key_pick`` (a plain max: the first minimum of the
    keys; ``sample``: the drawn candidate with the smallest key) decides on the keys directly (the same
    choice, because the normalisation is strictly order-preserving)."""

    lexicographic = False

    def keys(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[Key]:
        raise NotImplementedError

    def score(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[float]:
        keys = self.keys(cycle, views)
        return dense_rank(keys) if self.lexicographic else min_max(keys)


@dataclass(slots=True, frozen=True)
class WeightedScorer:
    name: str
    scorer: Scorer
    weight: float = 1.0


class Profile:
    """A router made of filters, weighted scorers and a picker (see the module docstring)."""

    def __init__(self, filters: Sequence[Filter], scorers: Sequence[WeightedScorer], picker: Picker) -> None:
        self.filters = tuple(filters)
        self.scorers = tuple(scorers)
        self.picker = picker
        self._names = tuple(item.name for item in self.scorers)
        self._weights = tuple(item.weight for item in self.scorers)
        stages: list[object] = [*self.filters, *(item.scorer for item in self.scorers), picker]
        # isinstance on a runtime protocol costs microseconds: decide once which stages to notify.
        self._routed = tuple(stage for stage in stages if isinstance(stage, RoutedObserver))
        self._finished = tuple(stage for stage in stages if isinstance(stage, FinishObserver))
        # The fast paths (the picker's, see ``Picker``): decided once, taken on every decision.
        self._direct, self._key_pick = self._direct_scorer()
        self._blind: Callable[[int], int] | None = None if self.scorers else getattr(picker, "pick_blind", None)

    def _direct_scorer(self) -> tuple[RankedScorer | None, KeyPick]:
        """The only scorer and the picker's choice on its raw keys, when both allow it."""
        only = self.scorers[0] if len(self.scorers) == 1 else None
        key_pick = getattr(self.picker, "key_pick", None)
        pick = key_pick() if key_pick is not None else None
        if only is None or only.weight != 1.0 or not isinstance(only.scorer, RankedScorer) or pick is None:
            return None, first_min
        return only.scorer, pick

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        cycle = Cycle(request, now_s)
        if not self.filters:  # most profiles: no candidate subsets, no position mapping
            chosen = self.choose(cycle, instances)
            for observer in self._routed:
                observer.on_routed(cycle, instances[chosen])
            return chosen
        views = instances
        positions: list[int] | None = None
        for stage in self.filters:
            kept = stage.filter(cycle, views)
            if kept and len(kept) < len(views):
                views = [views[k] for k in kept]
                positions = kept if positions is None else [positions[k] for k in kept]
        chosen = self.choose(cycle, views)
        for observer in self._routed:
            observer.on_routed(cycle, views[chosen])
        return chosen if positions is None else positions[chosen]

    def choose(self, cycle: Cycle, views: Sequence[InstanceView]) -> int:
        """Index into ``views`` of the picked candidate (no filters, no ``on_routed``)."""
        if self._direct is not None:
            return self._key_pick(self._direct.keys(cycle, views))
        if self._blind is not None:
            return self._blind(len(views))
        columns = [item.scorer.score(cycle, views) for item in self.scorers]
        return self.picker.pick(ScoreTable(self._names, self._weights, columns, len(views)))

    def on_request_finished(self, instance_index: int, request: Request, latency_s: float, now_s: float) -> None:
        for observer in self._finished:
            observer.on_request_finished(instance_index, request, latency_s, now_s)
