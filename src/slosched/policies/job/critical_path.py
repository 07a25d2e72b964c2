"""Job policy ``critical-path`` (alias ``slosched``): the slosched stack's job layer, a deadline per job
apportioned to its calls, and triage.

Budgets: single calls and relQueries may use the whole time their job has left (all rows of a relQuery share
one deadline, so a deadline-first engine keeps a relQuery's rows together). Workflows: the remaining time is
apportioned along the expected critical path, as Hexgen's stage budgets (``stage-budget``): the released
stage gets the share of its cost in the cost of itself plus the stages the workflow's template still
expects (weighted by how likely, or how many rounds), recomputed at every release, so a stage that appears
at run time (another revision round) re-apportions what is left.

Triage (SABER's demotion generalised to jobs): when even the fastest instance, alone, would need more than
the time left for the released stage and the stages still expected, the job can no longer meet its deadline;
its calls are decided ``best_effort`` (still served, never dropped), which the stack's engine serves after
every call that can still count. Costs are belief: prompt lengths known, outputs predicted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from slosched.core.belief import StepPredictor
from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import JobView, StageDecision
from slosched.policies.cost import t_comp_s
from slosched.policies.job.base import JOB_POLICIES
from slosched.policies.job.stage_budget import StageBudget, profiled_predictors
from slosched.policies.job.workflow_templates import workflow_template
from slosched.policies.registry import PolicyContext, setting


@dataclass(frozen=True, slots=True)
class CriticalPathParams:
    triage_factor: float = setting(
        1.0, "demote a job when its time left < this x the least time it needs (1: only the hopeless; >= 0)"
    )

    def __post_init__(self) -> None:
        if not self.triage_factor >= 0:
            raise ConfigError("critical-path.triage_factor", f"must be >= 0, got {self.triage_factor}")


class CriticalPathBudget(StageBudget):
    """``StageBudget`` plus job-level triage (module doc); ``triage_factor`` scales the least time needed
    (1: demote only what is hopeless even alone; more: also what queueing will make late)."""

    def __init__(self, predictors: Sequence[StepPredictor], triage_factor: float = 1.0) -> None:
        super().__init__(predictors)
        self.triage_factor = triage_factor

    def fastest_cost_s(self, prompt_tokens: float, output_tokens: float) -> float:
        prompt = round(prompt_tokens)
        return min(t_comp_s(prompt, output_tokens, predictor) for predictor in self.predictors)

    def remaining_min_s(self, job: JobView, requests: Sequence[Request]) -> float:
        """The least time the released stage and the expected later ones need (fastest instance, alone)."""
        current = max((self.fastest_cost_s(r.prompt_tokens, r.predicted_output_tokens) for r in requests), default=0.0)
        template = workflow_template(job.template)
        later = None if template is None else template.expected_after(job.stage, job.finished_stages)
        if not later:
            return current
        return current + sum(
            stage.weight * self.fastest_cost_s(stage.input_tokens, stage.output_tokens) for stage in later
        )

    def decide(self, job: JobView, requests: Sequence[Request], now_s: float) -> StageDecision:
        budget = super().decide(job, requests, now_s)
        remaining_s = job.deadline_s - now_s
        if not math.isfinite(remaining_s):
            return budget
        hopeless = remaining_s < self.triage_factor * self.remaining_min_s(job, requests)
        return StageDecision(budget_s=budget.budget_s, best_effort=hopeless)


@JOB_POLICIES.register("critical-path", params=CriticalPathParams)
def build(params: CriticalPathParams, context: PolicyContext) -> CriticalPathBudget:
    shared = context.extras.get("step_predictors")
    predictors = list(shared) if shared else profiled_predictors(context.instances)
    return CriticalPathBudget(predictors, params.triage_factor)
