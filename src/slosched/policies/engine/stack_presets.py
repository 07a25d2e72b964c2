"""Engine preset ``slosched``: the stack's engine layer (DESIGN 4.5).

Ordering ``least-slack`` (deadline-first on each call's apportioned target, with calls that can no longer
meet their job's deadline demoted to best effort), eager admission, and chunked prefill in a token budget.
Parameters: ``order`` (``deadline`` default, or ``slack``) and ``token_budget`` (the chunked-prefill
budget; default ``DEFAULT_TOKEN_BUDGET``, never above the instance's max batched tokens).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.policies.engine.base import ADMISSIONS, BATCHINGS, ENGINE_PRESETS, ORDERINGS, EnginePolicy
from slosched.policies.registry import PolicyContext, reject_unknown_params

STACK = "slosched"
DEFAULT_TOKEN_BUDGET = 1024
ENGINE_PARAMS = {"order", "triage", "token_budget", "best_effort_share", "batching", "min_budget", "margin"}


@ENGINE_PRESETS.register(STACK)
def build(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
    reject_unknown_params(f"{STACK} engine", params, ENGINE_PARAMS)
    ordering = {key: params[key] for key in ("order", "triage") if key in params}
    triage = bool(params.get("triage", True))
    admission = {key: params[key] for key in ("best_effort_share",) if key in params}
    return EnginePolicy(
        name=STACK,
        ordering=ORDERINGS.build("least-slack", ordering, context),
        admission=ADMISSIONS.build("triage", admission, context) if triage else ADMISSIONS.build("always", {}, context),
        batching=_batching(params, context),
    )


def _batching(params: Mapping[str, Any], context: PolicyContext) -> Any:
    name = str(params.get("batching", "chunked"))
    if name == "deadline-budget":
        keys = ("token_budget", "min_budget", "margin")
        return BATCHINGS.build("deadline-budget", {k: params[k] for k in keys if k in params}, context)
    if name == "lens":
        budget = {"token_budget": params["token_budget"]} if "token_budget" in params else {}
        return BATCHINGS.build("lens", budget, context)
    return BATCHINGS.build("chunked", {"token_budget": params.get("token_budget", DEFAULT_TOKEN_BUDGET)}, context)
