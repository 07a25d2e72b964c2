"""Batching ``prefill-first``: whole-prompt prefill steps take precedence over decoding (vLLM v0).

A ``StaticBatching`` (``chunked.py``): every step has the same shape; parameter ``token_budget`` as there.
"""

from __future__ import annotations

from slosched.core.views import StepMode
from slosched.policies.engine.base import BATCHINGS
from slosched.policies.engine.batching.chunked import StaticBatching, TokenBudgetParams
from slosched.policies.registry import PolicyContext


@BATCHINGS.register("prefill-first", params=TokenBudgetParams)
def build(params: TokenBudgetParams, context: PolicyContext) -> StaticBatching:
    return StaticBatching(StepMode.PREFILL_FIRST, False, params.token_budget)
