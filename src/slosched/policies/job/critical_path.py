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

Job-level admission (``backlog``): at a job's arrival the released stage is costed through the work queued
ahead of it on each instance (``backlog.py``: the least predicted latency over the instances, relegated work
not counted) instead of alone; a job the backlog makes hopeless is relegated at once rather than missing
late, and a runtime whose client asked for it answers "cannot meet deadline" instead of serving it
(``on_infeasible``: the simulator's option, the gateway's header). The same setting adds EDF's demand test
(``demand.py``): the job must also fit, at the cluster's throughput, behind the work of every admitted job
due before it, including those jobs' stages not released yet, which the policy books (``CommittedWork``) at
each release it keeps feasible. With ``pace_factor`` (0.9 by default, none turns it off: ``pace.py``), a
workflow must pass a third test at its arrival, the pace test: its least time alone, at the pace its
template's admitted stages have moved at lately, must fit its time left; the first two model the queues,
this one measures what a chain of dependent calls takes while it shares the batches. With
``admission_target`` (0.2 by default, none turns it off) the pace factor is scaled up under overload while
too many admitted workflows are demoted mid-way (``admission_feedback.py``). With ``tenant_bands``
and fair sharing's bands (handed over by the shared policy builder: ``bands.py``) the first two count
only the work a job's band really meets, so under overload a higher band is relegated before a lower one.

- **Once per job** (``backlog_stages: arrival``): an admitted job's later stages are judged alone, and a
  relegated job stays relegated (``RelegatedJobs``). The queue a later stage meets is the load its own
  admission counted; judged again, admitted workflows were relegated mid-way whenever queues peaked and the
  work of their earlier stages was lost. ``every`` judges every stage through the queues.
- **Jobs of one call are judged alone**, as without the setting: relegating one early saves no work already
  done, and the engine's own triage demotes it once its deadline is really out of reach, on its actual queue
  rather than a predicted one (on the stack bench's code workload at 2x its capacity, single calls judged
  through the backlog cut goodput from 49 to 9-11 jobs/s, one seed, one-off runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from slosched.core.belief import StepPredictor
from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import InstanceView, JobView, StageDecision
from slosched.policies.cluster.routers.prism import PrismModel
from slosched.policies.cost import t_comp_s
from slosched.policies.job.admission_feedback import AdmissionFeedback, check_target
from slosched.policies.job.backlog import least_latency_s, queues_ahead
from slosched.policies.job.bands import BandOf, job_band
from slosched.policies.job.base import JOB_POLICIES
from slosched.policies.job.demand import (
    CommittedWork,
    RelegatedJobs,
    Work,
    calls_work,
    demand_s,
    queued_work,
    uncached_share,
)
from slosched.policies.job.pace import StagePace
from slosched.policies.job.stage_budget import StageBudget, profiled_predictors
from slosched.policies.job.workflow_templates import workflow_template
from slosched.policies.registry import PolicyContext, setting

BACKLOG_STAGES = ("arrival", "every")


@dataclass(frozen=True, slots=True)
class CriticalPathParams:
    triage_factor: float = setting(
        1.0, "demote a job when its time left < this x the least time it needs (1: only the hopeless; >= 0)"
    )
    backlog: bool = setting(True, "cost the released stage through the work queued on each instance, not alone")
    backlog_stages: str = setting(
        "arrival", "the stages judged through the backlog: arrival (later ones alone, once admitted) or every"
    )
    tenant_bands: bool = setting(False, "with fair sharing's tenant bands, judge a job by the work its band meets")
    pace_factor: float | None = setting(
        0.9,
        "with backlog: relegate a workflow at arrival when its least time alone x this x the pace its template's "
        "admitted stages move at now exceeds its time left (docs/stack.md); none: no pace test",
    )
    admission_target: float | None = setting(
        0.2,
        "with the pace test, under overload: the share of admitted workflows that may be demoted mid-way; above "
        "it the pace factor is scaled up (admission_feedback.py, docs/stack.md); none: a fixed factor",
    )

    def __post_init__(self) -> None:
        if not self.triage_factor >= 0:
            raise ConfigError("critical-path.triage_factor", f"must be >= 0, got {self.triage_factor}")
        if self.pace_factor is not None and not self.pace_factor > 0:
            raise ConfigError("critical-path.pace_factor", f"must be > 0 or none, got {self.pace_factor}")
        check_target(self.admission_target)
        if self.backlog_stages not in BACKLOG_STAGES:
            raise ConfigError(
                "critical-path.backlog_stages", f"got {self.backlog_stages!r}; allowed: {list(BACKLOG_STAGES)}"
            )


class CriticalPathBudget(StageBudget):
    """``StageBudget`` plus job-level triage (module doc); ``triage_factor`` scales the least time needed
    (1: demote only what is hopeless even alone; more: also what queueing will make late)."""

    def __init__(
        self,
        predictors: Sequence[StepPredictor],
        triage_factor: float = 1.0,
        backlog: bool = True,
        tenant_bands: bool = False,
        backlog_stages: str = "arrival",
        pace_factor: float | None = 0.9,
        admission_target: float | None = 0.2,
    ) -> None:
        super().__init__(predictors)
        self.triage_factor = triage_factor
        self.backlog = backlog
        self.backlog_every_stage = backlog_stages == "every"
        self.relegated = RelegatedJobs()
        self.tenant_bands = tenant_bands
        self.queue_model = PrismModel()
        self.committed = CommittedWork()
        self.band_of: BandOf | None = None
        self.pace_factor = pace_factor
        self.pace = StagePace()
        # Only the pace test reads the feedback's scale.
        self.feedback = (
            AdmissionFeedback(admission_target) if admission_target is not None and pace_factor is not None else None
        )

    def use_bands(self, band_of: BandOf | None) -> None:
        """Judge each job against the work its tenant's band really meets (``bands.py``); None: one band.
        With ``tenant_bands`` off (the default) every job stays in one band whatever the engines do."""
        self.band_of = band_of if self.tenant_bands else None

    @property
    def reads_backlog(self) -> bool:
        return self.backlog

    def fastest_cost_s(self, prompt_tokens: float, output_tokens: float) -> float:
        prompt = round(prompt_tokens)
        return min(t_comp_s(prompt, output_tokens, predictor) for predictor in self.predictors)

    def stage_alone_s(self, requests: Sequence[Request]) -> float:
        """The released stage's least time alone: its slowest call on its fastest instance (calls run side by side)."""
        return max((self.fastest_cost_s(r.prompt_tokens, r.predicted_output_tokens) for r in requests), default=0.0)

    def remaining_min_s(self, job: JobView, requests: Sequence[Request], current_s: float = 0.0) -> float:
        """The least time the released stage and the expected later ones need: each alone on the fastest
        instance, or, given ``current_s`` (the released stage's least time through the backlog), the released
        stage that long and every later one delayed by the same wait (the queue it meets now is the best
        guess of the queues its later stages meet)."""
        alone = self.stage_alone_s(requests)
        current = max(alone, current_s)
        wait = current - alone
        template = workflow_template(job.template)
        later = None if template is None else template.expected_after(job.stage, job.finished_stages)
        if not later:
            return current
        return current + sum(
            stage.weight * (self.fastest_cost_s(stage.input_tokens, stage.output_tokens) + wait) for stage in later
        )

    def decide(self, job: JobView, requests: Sequence[Request], now_s: float) -> StageDecision:
        return self._triaged(job, requests, now_s, 0.0)

    def decide_with_backlog(
        self, job: JobView, requests: Sequence[Request], now_s: float, views: Sequence[InstanceView]
    ) -> StageDecision:
        if not math.isfinite(job.deadline_s) or not views or self.single_call(job, requests):
            return self.decide(job, requests, now_s)
        if job.finished_stages and self.pace_factor is not None:
            self.pace.next_released(job.id, now_s)
        released = calls_work(requests, views)
        later = self.later_work(job).with_prompt_share(uncached_share(requests, released))
        if job.finished_stages and not self.backlog_every_stage:
            return self._paced(job, requests, now_s, self._admitted_stage(job, requests, now_s, later))
        band_of = self.band_of
        band = job_band(requests, band_of)
        ahead = queues_ahead(views, self.queue_model, band_of, band)
        decision = self._triaged(job, requests, now_s, least_latency_s(requests, ahead))
        if not decision.best_effort:
            queued = queued_work(views, job.deadline_s, band_of, band)
            before = queued + self.committed.ahead_of(job.id, job.deadline_s, now_s, band)
            needed_s = demand_s(before + released + later, views, [q.peak_tokens_per_s for q in ahead])
            if job.deadline_s - now_s < self.triage_factor * needed_s or self._out_paced(job, requests, now_s):
                decision = StageDecision(budget_s=decision.budget_s, best_effort=True)
        if self.feedback is not None and not self.backlog_every_stage and workflow_template(job.template) is not None:
            decision = self._fed_back(job, requests, now_s, decision)
        if decision.best_effort and not self.backlog_every_stage:
            self.relegated.add(job.id, job.deadline_s, now_s)  # read only by ``_admitted_stage``
        return self._paced(job, requests, now_s, self._booked(job, decision, later, band))

    def _out_paced(self, job: JobView, requests: Sequence[Request], now_s: float, scale: float = 1.0) -> bool:
        """The pace test (``pace.py``): a new workflow whose least time alone, at the pace its template's
        admitted stages move at now, times the factor (``scale`` x ``pace_factor``), exceeds its time left.
        Never a later stage: admitted stays admitted."""
        if self.pace_factor is None or job.finished_stages:
            return False
        pace = self.pace.pace(job.template, now_s, job.slo_s)
        if pace is None:
            return False
        return job.deadline_s - now_s < scale * self.pace_factor * pace * self.remaining_min_s(job, requests, 0.0)

    def _fed_back(
        self, job: JobView, requests: Sequence[Request], now_s: float, decision: StageDecision
    ) -> StageDecision:
        """A new workflow's ``decision`` by the fixed tests, told to the admission feedback and, while the
        feedback scales the pace factor up, tightened by the pace test at the scaled factor; admitted ones are
        followed to their outcome."""
        assert self.feedback is not None
        self.feedback.arrived(now_s, decision.best_effort)
        if not decision.best_effort:
            scale = self.feedback.scale(now_s, job.slo_s)
            if scale > 1.0 and self._out_paced(job, requests, now_s, scale):
                return StageDecision(budget_s=decision.budget_s, best_effort=True)
            self.feedback.admitted(job.id, job.deadline_s, job.slo_s, now_s)
        return decision

    def _paced(self, job: JobView, requests: Sequence[Request], now_s: float, decision: StageDecision) -> StageDecision:
        """``decision``, with the released stage's pace to be measured at the job's next release if it counts
        (only where the pace test runs: nothing reads the pace otherwise)."""
        if self.pace_factor is not None and not decision.best_effort:
            self.pace.released(job.id, job.template, now_s, self.stage_alone_s(requests), job.deadline_s)
        return decision

    def _note_outcome(self, job: JobView, demoted: bool, later: Work, now_s: float) -> None:
        """Tell the admission feedback what became of an admitted workflow at a later release: demoted, or its
        last expected stage released in time."""
        assert self.feedback is not None
        if demoted:
            self.feedback.failed(job.id, now_s)
        elif later.prompt_tokens + later.output_tokens <= 0.0:
            self.feedback.succeeded(job.id, now_s)

    def _booked(self, job: JobView, decision: StageDecision, later: Work, band: float) -> StageDecision:
        """``decision``, with the job's unreleased stages booked while it is kept and dropped once relegated."""
        if decision.best_effort:
            self.committed.forget(job.id)
        else:
            self.committed.record(job.id, job.deadline_s, later, band)
        return decision

    def _admitted_stage(self, job: JobView, requests: Sequence[Request], now_s: float, later: Work) -> StageDecision:
        """A later stage of a job judged at its arrival: a relegated job stays relegated; an admitted one is
        judged alone (demoted only when hopeless even alone), never by the queue it meets now, which its own
        admission already counted (module doc: why); ``later``, the stages still expected after it, is booked."""
        if job.id in self.relegated:
            return StageDecision(budget_s=super().decide(job, requests, now_s).budget_s, best_effort=True)
        decision = self._triaged(job, requests, now_s, 0.0)
        if self.feedback is not None and workflow_template(job.template) is not None:
            self._note_outcome(job, decision.best_effort, later, now_s)
        return self._booked(job, decision, later, job_band(requests, self.band_of))

    @staticmethod
    def single_call(job: JobView, requests: Sequence[Request]) -> bool:
        """A job of one call, nothing before or after it: left to the engine's triage (module doc: why)."""
        if job.finished_stages or len(requests) != 1:
            return False
        template = workflow_template(job.template)
        return template is None or not template.expected_after(job.stage, job.finished_stages)

    @staticmethod
    def later_work(job: JobView) -> Work:
        """The work of the stages ``job``'s template still expects after the released one (every call)."""
        template = workflow_template(job.template)
        later = None if template is None else template.expected_after(job.stage, job.finished_stages)
        if not later:
            return Work()
        return Work(
            sum(stage.weight * stage.num_calls * stage.input_tokens for stage in later),
            sum(stage.weight * stage.num_calls * stage.output_tokens for stage in later),
        )

    def _triaged(self, job: JobView, requests: Sequence[Request], now_s: float, current_s: float) -> StageDecision:
        budget = super().decide(job, requests, now_s)
        remaining_s = job.deadline_s - now_s
        if not math.isfinite(remaining_s):
            return budget
        hopeless = remaining_s < self.triage_factor * self.remaining_min_s(job, requests, current_s)
        return StageDecision(budget_s=budget.budget_s, best_effort=hopeless)


@JOB_POLICIES.register("critical-path", params=CriticalPathParams)
def build(params: CriticalPathParams, context: PolicyContext) -> CriticalPathBudget:
    shared = context.extras.get("step_predictors")
    predictors = list(shared) if shared else profiled_predictors(context.instances)
    return CriticalPathBudget(
        predictors,
        params.triage_factor,
        params.backlog,
        params.tenant_bands,
        params.backlog_stages,
        params.pace_factor,
        params.admission_target,
    )
