"""Static batching: every step has the same shape, whatever the queues hold.

``chunked``: decodes first, then prefill chunks in a static token budget (Sarathi, vLLM v1).
``prefill-first``: whole-prompt prefill steps take precedence over decoding (vLLM v0).
Parameter ``token_budget`` (default: the instance's max batched tokens, never above it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.views import EngineView, StepMode, StepPlan
from slosched.policies.engine.base import BATCHINGS
from slosched.policies.registry import PolicyContext, param, reject_unknown_params


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


def _budget(name: str, params: Mapping[str, Any]) -> int | None:
    reject_unknown_params(name, params, {"token_budget"})
    if params.get("token_budget") is None:
        return None
    budget = param(params, "token_budget", 0, int)
    if budget < 1:
        raise ConfigError(f"{name}.token_budget", f"must be >= 1, got {budget}")
    return budget


@BATCHINGS.register("chunked")
def build_chunked(params: Mapping[str, Any], context: PolicyContext) -> StaticBatching:
    return StaticBatching(StepMode.MIXED, True, _budget("chunked", params))


@BATCHINGS.register("prefill-first")
def build_prefill_first(params: Mapping[str, Any], context: PolicyContext) -> StaticBatching:
    return StaticBatching(StepMode.PREFILL_FIRST, False, _budget("prefill-first", params))
