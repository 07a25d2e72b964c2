"""Batching ``prefill-first``: whole-prompt prefill steps take precedence over decoding (vLLM v0)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.core.views import EngineView, StepMode, StepPlan
from slosched.policies.engine.base import BATCHINGS
from slosched.policies.registry import PolicyContext, param, reject_unknown_params


class PrefillFirstBatching:
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
        plan = StepPlan(StepMode.PREFILL_FIRST, min(budget, spec.max_batched_tokens), spec.max_running, False)
        self._plans[id(spec)] = plan
        return plan


@BATCHINGS.register("prefill-first")
def build(params: Mapping[str, Any], context: PolicyContext) -> PrefillFirstBatching:
    reject_unknown_params("prefill-first", params, {"token_budget"})
    budget = params.get("token_budget")
    return PrefillFirstBatching(None if budget is None else param(params, "token_budget", 0, int))
