"""Batching ``chunked``: decodes first, then prefill chunks in a static token budget (Sarathi, vLLM v1).

``StaticBatching``: every step has the same shape, whatever the queues hold (``prefill-first`` is the other
one). Parameter ``token_budget`` (default: the instance's max batched tokens, never above it).
"""

from __future__ import annotations

from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.views import EngineView, StepMode, StepPlan
from slosched.policies.engine.base import BATCHINGS
from slosched.policies.registry import PolicyContext, setting


@dataclass(frozen=True, slots=True)
class TokenBudgetParams:
    """``chunked``'s and ``prefill-first``'s one parameter."""

    token_budget: int | None = setting(None, "tokens per step (>= 1); none: the instance's max batched tokens")

    def __post_init__(self) -> None:
        if self.token_budget is not None and self.token_budget < 1:
            raise ConfigError("token_budget", f"must be >= 1, got {self.token_budget}")


class StaticBatching:
    time_invariant = True

    def __init__(self, mode: StepMode, chunked_prefill: bool, token_budget: int | None) -> None:
        self.mode = mode
        self.chunked_prefill = chunked_prefill
        self.token_budget = token_budget
        self._plans: dict[int, StepPlan] = {}  # per instance spec: the plan never changes

    def plan(self, engine: EngineView) -> StepPlan:
        cached = self._plans.get(id(engine.spec))
        if cached is not None:
            return cached
        spec = engine.spec
        budget = spec.max_batched_tokens if self.token_budget is None else self.token_budget
        plan = StepPlan(self.mode, min(budget, spec.max_batched_tokens), spec.max_running, self.chunked_prefill)
        self._plans[id(spec)] = plan
        return plan


@BATCHINGS.register("chunked", params=TokenBudgetParams)
def build(params: TokenBudgetParams, context: PolicyContext) -> StaticBatching:
    return StaticBatching(StepMode.MIXED, True, params.token_budget)
