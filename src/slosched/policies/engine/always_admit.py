"""Admission ``always``: admit whenever capacity (running cap, token budget, KV) allows (vLLM default)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.core.views import EngineView, SeqView
from slosched.policies.engine.base import ADMISSIONS
from slosched.policies.registry import PolicyContext, reject_unknown_params


class AlwaysAdmit:
    time_invariant = True

    def admit(self, seq: SeqView, engine: EngineView) -> bool:
        return True


@ADMISSIONS.register("always")
def build(params: Mapping[str, Any], context: PolicyContext) -> AlwaysAdmit:
    reject_unknown_params("always", params, set())
    return AlwaysAdmit()
