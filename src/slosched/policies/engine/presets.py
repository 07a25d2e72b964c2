"""Engine presets: named (ordering, admission, batching) triples.

``fcfs``: FCFS + prefill-first (vLLM v0). ``chunked-fcfs``: FCFS + chunked prefill (Sarathi / vLLM v1;
``token_budget`` param, default the instance's max batched tokens). ``static-priority``: shortest estimated
work first, fixed at arrival, with chunked prefill. Parameters are passed to the batching part.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.policies.engine.base import ADMISSIONS, BATCHINGS, ENGINE_PRESETS, ORDERINGS, EnginePolicy
from slosched.policies.registry import PolicyContext


def compose(
    name: str, ordering: str, admission: str, batching: str, params: Mapping[str, Any], context: PolicyContext
) -> EnginePolicy:
    return EnginePolicy(
        name=name,
        ordering=ORDERINGS.build(ordering, {}, context),
        admission=ADMISSIONS.build(admission, {}, context),
        batching=BATCHINGS.build(batching, params, context),
    )


@ENGINE_PRESETS.register("fcfs")
def fcfs(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
    return compose("fcfs", "fcfs", "always", "prefill-first", params, context)


@ENGINE_PRESETS.register("chunked-fcfs")
def chunked_fcfs(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
    return compose("chunked-fcfs", "fcfs", "always", "chunked", params, context)


@ENGINE_PRESETS.register("static-priority")
def static_priority(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
    return compose("static-priority", "static-priority", "always", "chunked", params, context)
