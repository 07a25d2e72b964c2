"""Engine preset ``saber`` (SABER, DESIGN 4.4): ordering ``saber-tiers`` + admission ``saber-speed``
sharing one speed model, with chunked prefill.

Parameters: the ordering's (``profile`` with ``model``, or ``speed``; ``window``, ``scan``, ``order``,
``demand``) and ``token_budget`` (the chunked prefill budget). The random window draws use the run's
seeded RNG.
"""

from __future__ import annotations

from dataclasses import dataclass

from slosched.policies.engine.admission.saber_speed import saber_admission
from slosched.policies.engine.base import BATCHINGS, ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.batching.chunked import TokenBudgetParams
from slosched.policies.engine.ordering.saber_speed_math import speed_model
from slosched.policies.engine.ordering.saber_tiers import SaberTiersParams, saber_ordering
from slosched.policies.registry import PolicyContext, setting


@dataclass(frozen=True, slots=True)
class SaberPresetParams(SaberTiersParams):
    token_budget: int | None = setting(None, "chunked prefill tokens per step; none: the instance's max batched tokens")


@ENGINE_PRESETS.register("saber", params=SaberPresetParams)
def saber(params: SaberPresetParams, context: PolicyContext) -> EnginePolicy:
    model = speed_model(params)
    return EnginePolicy(
        name="saber",
        ordering=saber_ordering(params, context, model),
        admission=saber_admission(params, model),
        batching=BATCHINGS.build("chunked", TokenBudgetParams(params.token_budget), context),
    )
