"""Engine preset ``lens``: NexusSched: FCFS ordering, no admission gate, LENS batching.

LENS builds its batch greedily in FCFS order (running first, then waiting), which is exactly what the
mechanism does under FCFS ordering, so the plan's token budget and running cap reproduce the batch LENS
predicted (parameters: the ``lens`` batching's)."""

from __future__ import annotations

from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.batching.lens import LensParams
from slosched.policies.engine.presets.triple import compose
from slosched.policies.registry import PolicyContext


@ENGINE_PRESETS.register("lens", params=LensParams)
def build(params: LensParams, context: PolicyContext) -> EnginePolicy:
    return compose("lens", "fcfs", "always", "lens", params, context)
