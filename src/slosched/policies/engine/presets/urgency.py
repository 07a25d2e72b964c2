"""Engine preset ``urgency``: Hexgen-Text2SQL's urgency ordering, eager admission, prefill-first steps.

It differs from ``fcfs`` (the vLLM baseline) only in the ordering, so ``*+fcfs`` vs ``*+urgency`` isolates the
queue discipline."""

from __future__ import annotations

from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.batching.chunked import TokenBudgetParams
from slosched.policies.engine.presets.triple import compose
from slosched.policies.registry import PolicyContext


@ENGINE_PRESETS.register("urgency", params=TokenBudgetParams)
def build(params: TokenBudgetParams, context: PolicyContext) -> EnginePolicy:
    return compose("urgency", "urgency", "always", "prefill-first", params, context)
