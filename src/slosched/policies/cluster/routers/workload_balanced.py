"""Router ``workload-balanced`` (Hexgen-Text2SQL, DESIGN 4.1): trade execution speed against load balance.

``score(q, m) = (1 - alpha) * beta / max(t_queue(m), min_queue_s) - alpha * t_comp(q, m)``; the highest
score wins (ties: lowest index). ``alpha`` in [0, 1]: 0 sends each call to the least loaded instance
(load measured in that instance's own seconds), 1 to the instance that would run it fastest. ``beta``
(seconds squared) scales the balance term against ``t_comp``. The queue term is floored at
``min_queue_s`` so an empty instance gets a large but finite score (alpha still breaks ties between
empty instances). ``alpha`` may be changed between decisions (the alpha tuner does).

Parameters: ``alpha`` (0.0), ``beta`` (100.0), ``min_queue_s`` (1.0).

A profile of the ``workload-balanced`` scorer (key: minus the score above, min-max normalised) under the
max picker; the router's ``alpha`` reads and sets the scorer's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import MaxPicker
from slosched.policies.cluster.pipeline import SCORERS, Cycle, Key, Profile, RankedScorer, WeightedScorer
from slosched.policies.cost import request_t_comp_s, t_queue_s
from slosched.policies.registry import PolicyContext, setting


class WorkloadBalancedScorer(RankedScorer):
    def __init__(self, alpha: float, beta: float, min_queue_s: float) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ConfigError("workload-balanced.alpha", f"must be in [0, 1], got {alpha}")
        if beta <= 0 or min_queue_s <= 0:
            raise ConfigError("workload-balanced", "beta and min_queue_s must be > 0")
        self.alpha = alpha
        self.beta = beta
        self.min_queue_s = min_queue_s

    def score_raw(self, request: Request, instance: InstanceView, now_s: float) -> float:
        queue_s = max(t_queue_s(instance), self.min_queue_s)
        balance = (1.0 - self.alpha) * self.beta / queue_s
        if self.alpha == 0.0:
            return balance
        return balance - self.alpha * request_t_comp_s(request, instance.step_predictor)

    def keys(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[Key]:
        request, now_s = cycle.request, cycle.now_s
        return [-self.score_raw(request, view, now_s) for view in views]


class WorkloadBalancedRouter(Profile):
    def __init__(self, alpha: float, beta: float, min_queue_s: float) -> None:
        self.balance = WorkloadBalancedScorer(alpha, beta, min_queue_s)
        super().__init__([], [WeightedScorer("workload-balanced", self.balance)], MaxPicker())

    @property
    def alpha(self) -> float:
        return self.balance.alpha

    @alpha.setter
    def alpha(self, value: float) -> None:  # the alpha tuner moves it between decisions
        self.balance.alpha = value

    def score(self, request: Request, instance: InstanceView, now_s: float) -> float:
        """The raw (unnormalised) score of ``request`` on ``instance``."""
        return self.balance.score_raw(request, instance, now_s)


@dataclass(frozen=True, slots=True)
class WorkloadBalancedParams:
    alpha: float = setting(0.0, "in [0, 1]: 0 sends each call to the least loaded instance, 1 to its fastest")
    beta: float = setting(100.0, "scale (s^2) of the balance term against the call's t_comp (> 0)")
    min_queue_s: float = setting(1.0, "floor (s) of an instance's queued work, so an empty one scores finite (> 0)")


@SCORERS.register("workload-balanced", params=WorkloadBalancedParams)
def build_scorer(params: WorkloadBalancedParams, context: PolicyContext) -> WorkloadBalancedScorer:
    return WorkloadBalancedScorer(params.alpha, params.beta, params.min_queue_s)


@ROUTERS.register("workload-balanced", params=WorkloadBalancedParams)
def build(params: WorkloadBalancedParams, context: PolicyContext) -> WorkloadBalancedRouter:
    return WorkloadBalancedRouter(params.alpha, params.beta, params.min_queue_s)
