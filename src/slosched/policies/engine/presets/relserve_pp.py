"""Engine preset ``relserve-pp``: ``relserve`` with the ABA's tail case fixed to always prefill (an ablation of
its latency-delta rule); parameters as ``relserve``'s."""

from __future__ import annotations

from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.presets.relserve import RelserveParams, build_relserve
from slosched.policies.registry import PolicyContext


@ENGINE_PRESETS.register("relserve-pp", params=RelserveParams)
def relserve_pp(params: RelserveParams, context: PolicyContext) -> EnginePolicy:
    return build_relserve("relserve-pp", "prefill", params)
