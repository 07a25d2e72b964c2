"""Admission ``always``: admit whenever capacity (running cap, token budget, KV) allows (vLLM default)."""

from __future__ import annotations

from slosched.core.views import EngineView, SeqView
from slosched.policies.engine.base import ADMISSIONS
from slosched.policies.registry import NoParams, PolicyContext


class AlwaysAdmit:
    time_invariant = True

    def admit(self, seq: SeqView, engine: EngineView) -> bool:
        return True


@ADMISSIONS.register("always", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> AlwaysAdmit:
    return AlwaysAdmit()
