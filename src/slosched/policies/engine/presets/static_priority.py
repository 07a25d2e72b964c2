"""Engine preset ``static-priority``: shortest estimated work first, fixed at arrival, with chunked prefill
(vLLM-SP with job policy ``static-sum``)."""

from __future__ import annotations

from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.batching.chunked import TokenBudgetParams
from slosched.policies.engine.presets.triple import compose
from slosched.policies.registry import PolicyContext


@ENGINE_PRESETS.register("static-priority", params=TokenBudgetParams)
def build(params: TokenBudgetParams, context: PolicyContext) -> EnginePolicy:
    return compose("static-priority", "static-priority", "always", "chunked", params, context)
