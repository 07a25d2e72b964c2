"""Engine preset ``chunked-fcfs``: FCFS ordering, eager admission, chunked prefill (Sarathi / vLLM v1;
``token_budget`` defaults to the instance's max batched tokens)."""

from __future__ import annotations

from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.batching.chunked import TokenBudgetParams
from slosched.policies.engine.presets.triple import compose
from slosched.policies.registry import PolicyContext


@ENGINE_PRESETS.register("chunked-fcfs", params=TokenBudgetParams)
def build(params: TokenBudgetParams, context: PolicyContext) -> EnginePolicy:
    return compose("chunked-fcfs", "fcfs", "always", "chunked", params, context)
