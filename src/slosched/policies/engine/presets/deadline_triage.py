"""Engine preset ``deadline-triage`` (alias ``slosched``): the slosched stack's engine layer (DESIGN 4.5).

- ordering ``least-slack``: deadline-first on each call's apportioned target; calls that can no longer
  meet their job's deadline (or whose job the job layer demoted) go to a best-effort tier behind them;
- admission ``triage``: feasible calls join the batch eagerly, best-effort ones only within
  ``best_effort_share`` of the running slots, and no call while the decode step it makes would outgrow
  ``tpot_guard`` x the tightest TPOT SLO of the batch, nor (``deadline_guard``) of a running workflow stage's
  slack per remaining token (``admission/tpot_guard.py``);
- batching ``deadline-budget`` (default): chunked prefill whose per-step token budget is sized to the
  tightest running call (TPOT SLO, or slack per remaining token) from the instance's step-time belief,
  up to ``token_budget``. ``batching: chunked`` (static ``token_budget``) and ``batching: lens``
  (NexusSched's LENS) are the alternatives the stack bench measured it against.

Defaults are the ones ``slosched bench stack`` was run with (docs/results/stack.md), chosen on its quick
workloads before the full run, never per workload.
"""

from __future__ import annotations

from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.policies.engine.admission.triage import TriageParams
from slosched.policies.engine.base import ADMISSIONS, BATCHINGS, ENGINE_PRESETS, ORDERINGS, BatchPolicy, EnginePolicy
from slosched.policies.engine.batching.chunked import TokenBudgetParams
from slosched.policies.engine.batching.deadline_budget import DeadlineBudgetParams
from slosched.policies.engine.batching.lens import LensParams
from slosched.policies.engine.ordering.least_slack import LeastSlackParams
from slosched.policies.registry import PolicyContext, setting

NAME = "deadline-triage"
DEFAULT_TOKEN_BUDGET = 2048
BATCHING_CHOICES = ("deadline-budget", "chunked", "lens")


@dataclass(frozen=True, slots=True)
class DeadlineTriageParams:
    order: str = setting("deadline", "least-slack's order of feasible calls: deadline (EDF) or slack")
    triage: bool = setting(True, "demote hopeless calls behind feasible ones and hold them to best_effort_share")
    best_effort_share: float = setting(0.25, "share of the max running requests best-effort calls may hold")
    relegated_alone: bool = setting(True, "a call of a job the job layer relegated joins only a batch of such calls")
    relegated_strict_from: float | None = setting(
        1.0,
        "relegated_alone engages once an instance's relegated calls exceed this many per call that can still count; "
        "none: always",
    )
    prefix_wait: bool = setting(
        False, "a call waits while another computes the prefix it lacks (admission prefix-wait)"
    )
    max_concurrency: int | None = setting(None, "most calls running at once; none: the instance's max running")
    tpot_guard: float | None = setting(
        0.8,
        "with triage: a call joins only while the decode step stays within this share of the batch's tightest "
        "TPOT SLO; none: no guard",
    )
    deadline_guard: bool = setting(
        True, "with tpot_guard: running workflow stages' budgets bound the decode step a joining call makes, too"
    )
    batching: str = setting("deadline-budget", "the batching part: deadline-budget, chunked or lens")
    token_budget: int | None = setting(
        None, f"most tokens per step; none: {DEFAULT_TOKEN_BUDGET} (lens: the instance's max batched tokens)"
    )
    min_budget: int = setting(128, "deadline-budget only: the fewest tokens a step is given")
    margin: float = setting(0.8, "deadline-budget only: fraction of the tightest step bound a step may use")
    yield_to_queue: bool = setting(
        True,
        "deadline-budget only: calls on their job's own deadline bound no step while the ceiling keeps up",
    )

    def __post_init__(self) -> None:
        if self.batching not in BATCHING_CHOICES:
            raise ConfigError(f"{NAME}.batching", f"got {self.batching!r}; allowed: {list(BATCHING_CHOICES)}")
        if self.max_concurrency is not None and not self.triage:
            raise ConfigError(f"{NAME}.max_concurrency", "needs triage: true (the cap is part of triage admission)")
        if self.tpot_guard is not None and not self.tpot_guard > 0:
            raise ConfigError(f"{NAME}.tpot_guard", f"must be > 0 or none, got {self.tpot_guard}")


def _batching(params: DeadlineTriageParams, context: PolicyContext) -> BatchPolicy:
    budget = params.token_budget
    if params.batching == "lens":
        return BATCHINGS.build("lens", LensParams(token_budget=budget), context)
    budget = DEFAULT_TOKEN_BUDGET if budget is None else budget
    if params.batching == "chunked":
        return BATCHINGS.build("chunked", TokenBudgetParams(budget), context)
    deadline = DeadlineBudgetParams(budget, params.min_budget, params.margin, params.yield_to_queue)
    return BATCHINGS.build("deadline-budget", deadline, context)


@ENGINE_PRESETS.register("deadline-triage", params=DeadlineTriageParams)
def build(params: DeadlineTriageParams, context: PolicyContext) -> EnginePolicy:
    if params.triage:
        triage = TriageParams(
            best_effort_share=params.best_effort_share,
            relegated_alone=params.relegated_alone,
            relegated_strict_from=params.relegated_strict_from,
            prefix_wait=params.prefix_wait,
            max_concurrency=params.max_concurrency,
            tpot_guard=params.tpot_guard,
            deadline_guard=params.deadline_guard and params.tpot_guard is not None,
        )
        admission = ADMISSIONS.build("triage", triage, context)
    else:
        admission = ADMISSIONS.build("prefix-wait" if params.prefix_wait else "always", {}, context)
    return EnginePolicy(
        name=NAME,
        ordering=ORDERINGS.build("least-slack", LeastSlackParams(params.order, params.triage), context),
        admission=admission,
        batching=_batching(params, context),
    )
