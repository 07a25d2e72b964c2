"""Engine preset ``slosched``: the stack's engine layer (DESIGN 4.5).

- ordering ``least-slack``: deadline-first on each call's apportioned target; calls that can no longer
  meet their job's deadline (or whose job the job layer demoted) go to a best-effort tier behind them;
- admission ``triage``: feasible calls join the batch eagerly, best-effort ones only within
  ``best_effort_share`` of the running slots;
- batching ``deadline-budget`` (default): chunked prefill whose per-step token budget is sized to the
  tightest running call (TPOT SLO, or slack per remaining token) from the instance's step-time belief,
  up to ``token_budget``. ``batching: chunked`` (static ``token_budget``) and ``batching: lens``
  (NexusSched's LENS) are the alternatives the stack bench measured it against.

Parameters (all optional): ``order`` (``deadline`` | ``slack``), ``triage`` (bool), ``best_effort_share``,
``batching`` (``deadline-budget`` | ``chunked`` | ``lens``), ``token_budget``, ``min_budget``, ``margin``.
Defaults are the ones ``slosched bench stack`` was run with (docs/results/stack.md), chosen on its quick
workloads before the full run, never per workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.core.errors import ConfigError
from slosched.policies.engine.base import ADMISSIONS, BATCHINGS, ENGINE_PRESETS, ORDERINGS, BatchPolicy, EnginePolicy
from slosched.policies.registry import PolicyContext, reject_unknown_params

STACK = "slosched"
DEFAULT_TOKEN_BUDGET = 2048
BATCHING_CHOICES = ("deadline-budget", "chunked", "lens")
ORDERING_KEYS = ("order", "triage")
ADMISSION_KEYS = ("best_effort_share",)
BATCHING_KEYS = {"deadline-budget": ("token_budget", "min_budget", "margin"), "chunked": ("token_budget",),
                 "lens": ("token_budget",)}  # fmt: skip
ENGINE_PARAMS = frozenset({*ORDERING_KEYS, *ADMISSION_KEYS, "batching", "token_budget", "min_budget", "margin"})


def _pick(params: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: params[key] for key in keys if key in params}


def _batching(params: Mapping[str, Any], context: PolicyContext) -> BatchPolicy:
    name = str(params.get("batching", "deadline-budget"))
    if name not in BATCHING_CHOICES:
        raise ConfigError(f"{STACK}.batching", f"got {name!r}; allowed: {list(BATCHING_CHOICES)}")
    chosen = _pick(params, BATCHING_KEYS[name])
    if name != "lens":
        chosen.setdefault("token_budget", DEFAULT_TOKEN_BUDGET)
    return BATCHINGS.build(name, chosen, context)


@ENGINE_PRESETS.register(STACK)
def build(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
    reject_unknown_params(f"{STACK} engine", params, set(ENGINE_PARAMS))
    triage = bool(params.get("triage", True))
    admission = ADMISSIONS.build("triage", _pick(params, ADMISSION_KEYS), context) if triage else None
    return EnginePolicy(
        name=STACK,
        ordering=ORDERINGS.build("least-slack", _pick(params, ORDERING_KEYS), context),
        admission=admission if admission is not None else ADMISSIONS.build("always", {}, context),
        batching=_batching(params, context),
    )
