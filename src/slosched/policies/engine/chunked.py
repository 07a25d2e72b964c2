"""Batching ``chunked``: decodes first, then prefill chunks in a static token budget (Sarathi, vLLM v1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.views import EngineView, StepMode, StepPlan
from slosched.policies.engine.base import BATCHINGS
from slosched.policies.registry import PolicyContext, param, reject_unknown_params


class ChunkedBatching:
    time_invariant = True

    def __init__(self, token_budget: int | None) -> None:
        self.token_budget = token_budget
        self._plans: dict[int, StepPlan] = {}  # per instance spec: the plan never changes

    def plan(self, engine: EngineView) -> StepPlan:
        cached = self._plans.get(id(engine.spec))
        if cached is not None:
            return cached
        spec = engine.spec
        budget = spec.max_batched_tokens if self.token_budget is None else self.token_budget
        plan = StepPlan(StepMode.MIXED, min(budget, spec.max_batched_tokens), spec.max_running, True)
        self._plans[id(spec)] = plan
        return plan


@BATCHINGS.register("chunked")
def build(params: Mapping[str, Any], context: PolicyContext) -> ChunkedBatching:
    reject_unknown_params("chunked", params, {"token_budget"})
    if params.get("token_budget") is None:
        return ChunkedBatching(None)
    budget = param(params, "token_budget", 0, int)
    if budget < 1:
        raise ConfigError("chunked.token_budget", f"must be >= 1, got {budget}")
    return ChunkedBatching(budget)
