"""Engine preset ``static-concurrency`` (SABER's baseline): FCFS, at most ``cap`` running requests,
chunked prefill (``token_budget``)."""

from __future__ import annotations

from dataclasses import dataclass

from slosched.policies.engine.admission.static_concurrency import StaticConcurrencyAdmission, check_cap
from slosched.policies.engine.base import BATCHINGS, ENGINE_PRESETS, ORDERINGS, EnginePolicy
from slosched.policies.engine.batching.chunked import TokenBudgetParams
from slosched.policies.registry import PolicyContext, setting


@dataclass(frozen=True, slots=True)
class StaticConcurrencyPresetParams:
    cap: int | None = setting(None, "required: the maximum number of running requests (>= 1)")
    token_budget: int | None = setting(None, "chunked prefill tokens per step; none: the instance's max batched tokens")

    def __post_init__(self) -> None:
        check_cap(self.cap)


@ENGINE_PRESETS.register("static-concurrency", params=StaticConcurrencyPresetParams)
def static_concurrency(params: StaticConcurrencyPresetParams, context: PolicyContext) -> EnginePolicy:
    return EnginePolicy(
        name="static-concurrency",
        ordering=ORDERINGS.build("fcfs", {}, context),
        admission=StaticConcurrencyAdmission(check_cap(params.cap)),
        batching=BATCHINGS.build("chunked", TokenBudgetParams(params.token_budget), context),
    )
