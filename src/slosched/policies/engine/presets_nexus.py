"""NexusSched engine preset ``lens``: FCFS ordering, no admission gate, LENS batching.

LENS builds its batch greedily in FCFS order (running first, then waiting), which is exactly what the
mechanism does under FCFS ordering, so the plan's token budget and running cap reproduce the batch LENS
predicted. Parameters go to the ``lens`` batching part (see ``lens_batching``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.presets import compose
from slosched.policies.registry import PolicyContext


@ENGINE_PRESETS.register("lens")
def lens(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
    return compose("lens", "fcfs", "always", "lens", params, context)
