"""Engine presets ``saber`` and ``static-concurrency`` (SABER, DESIGN 4.4), both with chunked prefill.

``saber``: ordering ``saber`` + admission ``saber`` sharing one speed model. Parameters: ``profile``
(path of a saved speed profile) with ``model`` (``usl`` default, ``linear``, ``logistic``), or ``speed``
(inline coefficients); ``window`` (5), ``scan`` (``random``/``queue``/``first``), ``order``
(``deadline``/``arrival``), ``demand`` (``max_tokens``/``predicted``), ``token_budget`` (chunked
prefill budget). The random window draws use
the run's seeded RNG. ``static-concurrency``: FCFS + at most ``cap`` running requests (+ ``token_budget``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.policies.engine.base import BATCHINGS, ENGINE_PRESETS, ORDERINGS, EnginePolicy
from slosched.policies.engine.saber_admission import saber_admission_from_params
from slosched.policies.engine.saber_common import speed_model_from_params
from slosched.policies.engine.saber_order import saber_ordering_from_params
from slosched.policies.engine.static_concurrency import StaticConcurrencyAdmission, cap_from_params
from slosched.policies.registry import PolicyContext, reject_unknown_params

_SABER_PARAMS = {"profile", "model", "speed", "window", "scan", "order", "demand", "token_budget"}


def _batching_params(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"token_budget": params["token_budget"]} if "token_budget" in params else {}


@ENGINE_PRESETS.register("saber")
def saber(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
    reject_unknown_params("saber", params, _SABER_PARAMS)
    model = speed_model_from_params("saber", params)
    return EnginePolicy(
        name="saber",
        ordering=saber_ordering_from_params(params, context, model),
        admission=saber_admission_from_params(params, model),
        batching=BATCHINGS.build("chunked", _batching_params(params), context),
    )


@ENGINE_PRESETS.register("static-concurrency")
def static_concurrency(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
    reject_unknown_params("static-concurrency", params, {"cap", "token_budget"})
    return EnginePolicy(
        name="static-concurrency",
        ordering=ORDERINGS.build("fcfs", {}, context),
        admission=StaticConcurrencyAdmission(cap_from_params(params)),
        batching=BATCHINGS.build("chunked", _batching_params(params), context),
    )
