"""Job policy ``stage-budget`` (Hexgen-Text2SQL, DESIGN 4.1): apportion a workflow's remaining time.

When stage j of job i is released (its predecessors just finished),
``budget(i, j) = (SLO_i - elapsed_i) * tbar(i, j) / sum_{k >= j} tbar(i, k)``: ``tbar`` is a stage's cost
averaged over the instances; for stage j it is the slowest of its parallel calls (prompt lengths are
known, outputs predicted), for the later stages it comes from the workflow template (expected stages,
weighted by their probability or expected number of rounds, at the template's mean lengths). Every
call of stage j gets that budget; the budgets are recomputed at each release, so they shrink as time
passes. A job without a template (or a stage the template does not know) gives each stage all the time
left; a job without a deadline gets no budget (``budget_s`` None).

Costs come from one belief step-time model per instance: ``context.extras["step_predictors"]`` when the
runtime shares its live ones, else a linear profile of each instance's hardware (what an offline profiling
run gives, ``perf.linear.prior_from_model``). Only ratios of costs matter for the budgets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from slosched.core.belief import StepPredictor
from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.core.views import JobView, StageDecision
from slosched.perf.linear import LinearStepPredictor, prior_from_model
from slosched.perf.roofline import RooflineModel
from slosched.policies.cost import t_comp_s
from slosched.policies.job.base import JOB_POLICIES
from slosched.policies.job.workflow_templates import workflow_template
from slosched.policies.registry import NoParams, PolicyContext


def profiled_predictors(instances: Sequence[InstanceSpec]) -> list[StepPredictor]:
    """One linear step-time belief per instance, from an offline profile of its hardware."""
    profiles: dict[tuple[str, str, int, str], StepPredictor] = {}
    result = []
    for spec in instances:
        key = (spec.gpu, spec.model, spec.tp, spec.stack)
        if key not in profiles:
            truth = RooflineModel.build(spec.gpu, spec.model, spec.tp, spec.stack)
            profiles[key] = LinearStepPredictor(prior=prior_from_model(truth))
        result.append(profiles[key])
    return result


class StageBudget:
    """Implements ``JobPolicy``; ``predictors`` must be non-empty."""

    def __init__(self, predictors: Sequence[StepPredictor]) -> None:
        self.predictors = list(predictors)

    def mean_cost_s(self, prompt_tokens: float, output_tokens: float) -> float:
        """``tbar`` of one call: its ``t_comp`` averaged over the instances."""
        prompt = round(prompt_tokens)
        total = sum(t_comp_s(prompt, output_tokens, predictor) for predictor in self.predictors)
        return total / len(self.predictors)

    def shares(self, job: JobView, requests: Sequence[Request]) -> tuple[float, float]:
        """(tbar of the released stage, sum of tbar over it and the expected later stages)."""
        current = max((self.mean_cost_s(r.prompt_tokens, r.predicted_output_tokens) for r in requests), default=0.0)
        template = workflow_template(job.template)
        later = None if template is None else template.expected_after(job.stage, job.finished_stages)
        if not later:
            return current, current
        future = sum(stage.weight * self.mean_cost_s(stage.input_tokens, stage.output_tokens) for stage in later)
        return current, current + future

    def decide(self, job: JobView, requests: Sequence[Request], now_s: float) -> StageDecision:
        remaining_s = job.deadline_s - now_s
        if not math.isfinite(remaining_s):
            return StageDecision()
        current, total = self.shares(job, requests)
        fraction = current / total if total > 0 else 1.0
        return StageDecision(budget_s=remaining_s * fraction)


@JOB_POLICIES.register("stage-budget", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> StageBudget:
    shared = context.extras.get("step_predictors")
    predictors = list(shared) if shared else profiled_predictors(context.instances)
    return StageBudget(predictors)
