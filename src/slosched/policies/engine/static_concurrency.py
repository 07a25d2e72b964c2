"""Admission ``static-concurrency``: at most ``cap`` requests run at once (SABER's baseline, a fixed
max-concurrency setting such as a client-side semaphore or vLLM's ``max_num_seqs``).

Invariant: running requests plus those admitted earlier in the same pass never exceed ``cap``. The
decision changes only when the queues change, so the part is time-invariant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.views import EngineView, SeqView
from slosched.policies.engine.base import ADMISSIONS
from slosched.policies.engine.saber_common import AdmissionPass
from slosched.policies.registry import PolicyContext, param, reject_unknown_params


class StaticConcurrencyAdmission:
    time_invariant = True

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._pass = AdmissionPass()

    def admit(self, seq: SeqView, engine: EngineView) -> bool:
        state = self._pass
        state.begin_if_new(seq, engine)
        if engine.num_running + state.admitted >= self.cap:
            return False
        state.admitted += 1
        return True


def cap_from_params(params: Mapping[str, Any]) -> int:
    if "cap" not in params:
        raise ConfigError("static-concurrency.cap", "required: the maximum number of running requests (>= 1)")
    cap = param(params, "cap", 0, int)
    if cap < 1:
        raise ConfigError("static-concurrency.cap", f"must be >= 1, got {cap}")
    return cap


@ADMISSIONS.register("static-concurrency")
def build(params: Mapping[str, Any], context: PolicyContext) -> StaticConcurrencyAdmission:
    reject_unknown_params("static-concurrency admission", params, {"cap"})
    return StaticConcurrencyAdmission(cap_from_params(params))
