"""Engine preset ``urgency`` (Hexgen-Text2SQL): urgency ordering, eager admission, prefill-first steps.

It differs from ``fcfs`` (the vLLM baseline) only in the ordering, so ``*+fcfs`` vs ``*+urgency``
isolates the queue discipline. Parameters go to the batching part (``token_budget``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.presets import compose
from slosched.policies.registry import PolicyContext


@ENGINE_PRESETS.register("urgency")
def urgency(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
    return compose("urgency", "urgency", "always", "prefill-first", params, context)
