"""Engine preset ``fcfs``: FCFS ordering, eager admission, prefill-first steps (vLLM v0)."""

from __future__ import annotations

from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.batching.chunked import TokenBudgetParams
from slosched.policies.engine.presets.triple import compose
from slosched.policies.registry import PolicyContext


@ENGINE_PRESETS.register("fcfs", params=TokenBudgetParams)
def build(params: TokenBudgetParams, context: PolicyContext) -> EnginePolicy:
    return compose("fcfs", "fcfs", "always", "prefill-first", params, context)
