"""Ordering ``least-slack``: the slosched stack's queue discipline, deadline-first with triage.

Two tiers, as SABER's demotion generalised from a request's speed to a job's deadline:

- **feasible**: the call can still finish before its *job's* deadline if it started now on this engine
  (``now + t_comp <= deadline_s``; ``t_comp`` from this engine's belief step-time model and the predicted
  output length, ``policies/cost.py``), and, while it has no first token, still prefill within its TTFT SLO.
  Ordered by the call's own target (``order = "deadline"``, default: EDF on ``arrival_s + budget_s``, the
  share of the job's time a job policy such as the stack's apportioned to it, capped by the job deadline
  and the first token's due time), or by the slack left to that target (``order = "slack"``:
  ``target - now - t_comp``, least slack first).
- **best effort**: a call past saving on this engine (``flip_s``), or whose job the job layer demoted
  (``best_effort``: the stack's ``slosched`` job policy found it hopeless). Served, never dropped, after
  every feasible call, first come first served: under overload the capacity goes to work that can still
  count (chat under 2x load: calls that already missed their TTFT no longer delay the fresh ones).

Ties: arrival, then id. A call without any deadline or TTFT SLO is feasible with an infinite target (after
every call with one). The target is fixed while a call waits, and the tier only flips from feasible to best
effort, at ``flip_s``; so the order changes with time only at those instants, which ``next_change_s``
reports (the runtime needs no polling). ``t_comp`` moves with the refitted belief, so keys are not static
(``static_keys = False``); the queue keeps them between passes while the belief and those instants allow
(``key_until`` and ``keys_state``: ``ExpiringKeys`` in ``policies/engine/queue.py``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import EngineView, SeqView
from slosched.policies.cost import request_t_comp_s
from slosched.policies.engine.base import ORDERINGS
from slosched.policies.registry import PolicyContext, setting

FEASIBLE, BEST_EFFORT = 0, 1
ORDERS = ("deadline", "slack")


@dataclass(frozen=True, slots=True)
class LeastSlackParams:
    order: str = setting("deadline", "feasible calls by target (deadline: EDF) or by the slack left to it (slack)")
    triage: bool = setting(True, "demote calls past saving (or demoted by the job layer) behind every feasible one")

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ConfigError("least-slack.order", f"got {self.order!r}; allowed: {list(ORDERS)}")


def call_target_s(request: Request) -> float:
    """The call's own deadline: its release plus its budget, never after its job's deadline."""
    if request.budget_s is None:
        return request.deadline_s
    return min(request.arrival_s + request.budget_s, request.deadline_s)


def first_token_due_s(seq: SeqView) -> float:
    """When the call's first token is due (its TTFT SLO after its arrival); inf once it has one, or none."""
    request = seq.request
    if request.ttft_slo_s is None or seq.first_token_s is not None:
        return math.inf
    return request.arrival_s + request.ttft_slo_s


def flip_s(seq: SeqView, engine: EngineView) -> float:
    """The instant the call turns hopeless on this engine: past it, it cannot finish before its job's
    deadline, or produce its first token within its TTFT SLO (a prefill alone takes ``t_comp`` of no output)."""
    request = seq.request
    predictor = engine.step_predictor
    flip = request.deadline_s - request_t_comp_s(request, predictor)
    due = first_token_due_s(seq)
    if math.isfinite(due):
        flip = min(flip, due - predictor.predict_s(max(request.prompt_tokens, 1), 0, 0, 0))
    return flip


def is_best_effort(seq: SeqView, engine: EngineView) -> bool:
    """Demoted by the job layer, or past saving on this engine (``flip_s``)."""
    return seq.request.best_effort or engine.now_s > flip_s(seq, engine)


def belief_state(engine: EngineView) -> Hashable | None:
    """What ``flip_s`` reads besides the call: the engine's belief step-time model, as its ``belief_state``
    names it (None: the predictor cannot say, or it is about to be refitted)."""
    predictor = engine.step_predictor
    state = getattr(predictor, "belief_state", None)
    coefficients = state() if state is not None else None
    return None if coefficients is None else (predictor, coefficients)


class FlipMemo:
    """``flip_s`` of the calls a part asks about pass after pass, kept while the belief holds.

    Why: under overload the admission pass walks thousands of best-effort calls to admit none, and asked
    ``flip_s`` (three step-time predictions) of each at every pass: half of the stack's run at 3x capacity on
    the code workload went there (py-spy, 2026-12-07). A call's flip moves only with the belief (its request
    does not change while it waits; its first token is kept with the entry), so an entry holds until the
    belief's ``belief_state`` changes; with no state to compare the memo computes every time. The answers,
    and so every record, are the ones ``flip_s`` gives (``bench queue-passes`` checks the records)."""

    __slots__ = ("_flips", "_state")

    def __init__(self) -> None:
        self._flips: dict[int, tuple[SeqView, float | None, float]] = {}
        self._state: Hashable | None = None

    def flip_s(self, seq: SeqView, engine: EngineView) -> float:
        state = belief_state(engine)
        if state is None:
            return flip_s(seq, engine)
        if state != self._state:
            self._flips.clear()
            self._state = state
        entry = self._flips.get(id(seq))
        # The entry holds the call itself, so its id cannot be another's while the entry lives.
        if entry is not None and entry[0] is seq and entry[1] == seq.first_token_s:
            return entry[2]
        flip = flip_s(seq, engine)
        if len(self._flips) > 2 * len(engine.waiting) + 1024:  # calls long gone (a belief that never refits)
            self._flips.clear()
        self._flips[id(seq)] = (seq, seq.first_token_s, flip)
        return flip

    def is_best_effort(self, seq: SeqView, engine: EngineView) -> bool:
        """``is_best_effort``, from the memo."""
        return seq.request.best_effort or engine.now_s > self.flip_s(seq, engine)

    def count_feasible(self, seqs: Iterable[SeqView], engine: EngineView) -> int | None:
        """How many of ``seqs`` can still count (not ``is_best_effort``); None while the belief is due a refit:
        the count would make it then, and a refit moved to another instant changes every later fit."""
        if belief_state(engine) is None:
            return None
        return sum(1 for seq in seqs if not self.is_best_effort(seq, engine))


class LeastSlackOrdering:
    """Implements ``OrderingPolicy``, ``WakeHint`` and ``ExpiringKeys`` (module doc)."""

    static_keys = False
    time_invariant = False

    def __init__(self, order: str = "deadline", triage: bool = True) -> None:
        self.by_slack = order == "slack"
        self.triage = triage
        self._flips = FlipMemo()

    def key(self, seq: SeqView, engine: EngineView) -> Any:
        return self.key_until(seq, engine)[0]

    def key_until(self, seq: SeqView, engine: EngineView) -> tuple[Any, float]:
        """The key, and the last instant it holds while the belief stays (``ExpiringKeys``): a feasible call's
        until it turns best effort (``flip_s``), or only this instant when ordered by slack; a best-effort
        call's for good."""
        request = seq.request
        now = engine.now_s
        until = math.inf
        if self.triage:
            if request.best_effort:
                return (BEST_EFFORT, request.arrival_s, request.arrival_s, request.id), until
            until = self._flips.flip_s(seq, engine)
            if now > until:
                return (BEST_EFFORT, request.arrival_s, request.arrival_s, request.id), math.inf
        target = min(call_target_s(request), first_token_due_s(seq))
        if not self.by_slack:
            return (FEASIBLE, target, request.arrival_s, request.id), until
        slack = target - now - request_t_comp_s(request, engine.step_predictor)
        return (FEASIBLE, slack, request.arrival_s, request.id), now

    def keys_state(self, engine: EngineView) -> Hashable | None:
        """What the keys read besides the call and the time: the belief's step-time model."""
        return belief_state(engine)

    def next_change_s(self, engine: EngineView) -> float | None:
        """The earliest instant a waiting call turns best effort (None: no flip ahead)."""
        if not self.triage:
            return None
        now = engine.now_s
        earliest = math.inf
        for seq in engine.waiting:
            flip = self._flips.flip_s(seq, engine)
            if now < flip < earliest:
                earliest = flip
        return earliest if math.isfinite(earliest) else None


@ORDERINGS.register("least-slack", params=LeastSlackParams)
def build(params: LeastSlackParams, context: PolicyContext) -> LeastSlackOrdering:
    return LeastSlackOrdering(params.order, params.triage)
