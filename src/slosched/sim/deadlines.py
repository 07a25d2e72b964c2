"""Leak-free deadlines: a job's SLO from what its client knows at submission (DESIGN section 9).

A client submitting a job knows its template, its input lengths and its ``max_tokens``, and the operator
knows the statistics of past traffic; nobody knows the job's true output lengths, nor how many revision
rounds a Text-to-SQL agent will need. A deadline computed from the truth hands every deadline-aware policy
an oracle (short jobs get short deadlines, so EDF becomes SRPT on true sizes), so the simulator sets
``slo = scale x estimated no-contention latency`` where the estimate uses only:

- single and relQuery jobs: each call's known input length and, for its output, the mean output
  length of calls of the same template and stage kind in the *history* (capped by the call's max_tokens);
- workflows: the mean no-contention latency of history jobs of the same template (their
  shape is only known once they have run).

The history is past traffic: a warm-up trace, yesterday's log, or (for a replayed trace without one) the
trace's own per-template aggregates. Permuting true output lengths among jobs of one template never changes
a deadline (a test holds this). The true no-contention latency stays on the record as a descriptive metric
(the papers' SLO-scale curves), computed after the run and never read by a policy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from slosched.core.job import CallSpec, JobKind, JobSpec, step_name
from slosched.sim.models import InstanceModels

CallLatency = Callable[[int, int], float]
JobLatency = Callable[[JobSpec], float]
SLO_BASES = ("estimated", "true-lengths")


def stage_kind(stage_name: str) -> str:
    """``revise3`` -> ``revise``, ``unit_tester#2`` -> ``unit_tester``: repeated rounds of one step share
    their statistics."""
    step = step_name(stage_name)
    return step.rstrip("0123456789") or step


@dataclass(slots=True, frozen=True)
class DeadlineModel:
    """Per-template statistics of past traffic, and the fastest instance's no-contention latency."""

    call_output: dict[tuple[str, str], float]
    template_output: dict[str, float]
    global_output: float
    workflow_latency: dict[str, float]
    global_workflow_latency: float
    call_latency: CallLatency
    # (template, stage name, max_tokens) -> expected output: all ``expected_output`` reads of a call.
    _expected: dict[tuple[str, str, int | None], int] = field(default_factory=dict, init=False, compare=False)

    @classmethod
    def learn(cls, history: Sequence[JobSpec], call_latency: CallLatency, job_latency: JobLatency) -> DeadlineModel:
        """Statistics of ``history``; ``job_latency`` is the true no-contention latency of a past job (it
        has run, so its lengths are known now)."""
        per_call: dict[tuple[str, str], list[int]] = {}
        per_template: dict[str, list[int]] = {}
        per_workflow: dict[str, list[float]] = {}
        for job in history:
            if job.kind is JobKind.WORKFLOW:
                per_workflow.setdefault(job.template, []).append(job_latency(job))
            for stage in job.stages:
                for call in stage.calls:
                    per_call.setdefault((job.template, stage_kind(stage.name)), []).append(call.output_tokens)
                    per_template.setdefault(job.template, []).append(call.output_tokens)
        every_output = [value for values in per_template.values() for value in values]
        every_workflow = [value for values in per_workflow.values() for value in values]
        return cls(
            call_output={key: _mean(values) for key, values in per_call.items()},
            template_output={key: _mean(values) for key, values in per_template.items()},
            global_output=_mean(every_output) if every_output else math.nan,
            workflow_latency={key: _mean(values) for key, values in per_workflow.items()},
            global_workflow_latency=_mean(every_workflow) if every_workflow else math.nan,
            call_latency=call_latency,
        )

    def expected_output(self, template: str, stage_name: str, call: CallSpec) -> int:
        """Output tokens a client expects of ``call``: the history mean, never above its max_tokens."""
        key = (template, stage_name, call.max_output_tokens)
        expected = self._expected.get(key)
        if expected is None:
            expected = self._expected[key] = self._expected_output(template, stage_name, call.max_output_tokens)
        return expected

    def _expected_output(self, template: str, stage_name: str, max_tokens: int | None) -> int:
        mean = self.call_output.get((template, stage_kind(stage_name)))
        if mean is None:
            mean = self.template_output.get(template, self.global_output)
        if not math.isfinite(mean):
            mean = float(max_tokens) if max_tokens is not None else 1.0
        if max_tokens is not None:
            mean = min(mean, float(max_tokens))
        return max(1, round(mean))

    def job_latency_s(self, job: JobSpec) -> float:
        """The estimated no-contention latency of ``job`` (the basis of its deadline)."""
        if job.kind is JobKind.WORKFLOW:
            known = self.workflow_latency.get(job.template, self.global_workflow_latency)
            if math.isfinite(known):
                return known
            return self._structural_latency_s(job)  # no history of workflows at all: shape x expected sizes
        return self._structural_latency_s(job)

    def _structural_latency_s(self, job: JobSpec) -> float:
        if len(job.stages) == 1:  # single calls and relQueries: no DAG to walk
            stage = job.stages[0]
            if len(stage.calls) == 1:  # one call, most traffic: what ``_stage_latency_s`` returns, directly
                call = stage.calls[0]
                expected = self.expected_output(job.template, stage.name, call)
                return self.call_latency(call.input_tokens, expected) + stage.tool_duration_s
            return self._stage_latency_s(job.template, stage.name, stage.calls) + stage.tool_duration_s
        finish: dict[str, float] = {}
        deps = job.dependencies()
        for stage in job.topological_stages():
            start = max((finish[parent] for parent in deps[stage.name]), default=0.0)
            longest = self._stage_latency_s(job.template, stage.name, stage.calls)
            finish[stage.name] = start + longest + stage.tool_duration_s
        return max(finish.values(), default=0.0)

    def _stage_latency_s(self, template: str, stage_name: str, calls: Sequence[CallSpec]) -> float:
        """Calls of a stage run in parallel: the stage lasts as long as its longest expected call."""
        return max(
            (self.call_latency(c.input_tokens, self.expected_output(template, stage_name, c)) for c in calls),
            default=0.0,
        )


class FastestLatency:
    """No-contention latencies on the fastest instance type of a cluster, each computed once per run: a
    job's deadline estimate and its descriptive true latency both ask for them, most estimates repeat (one
    expected output per template and input length), and without a history the deadline model learns from
    the very jobs it then judges (so each workflow's true latency was asked for twice)."""

    def __init__(self, models: Sequence[InstanceModels]) -> None:
        # Instances of one GPU/model/TP share a truth model; the no-contention latency needs each once.
        self._models = list({(m.spec.gpu, m.spec.model, m.spec.tp, m.spec.stack): m for m in models}.values())
        self._truths = [model.truth for model in self._models]
        self._calls: dict[tuple[int, int], float] = {}
        self._jobs: dict[int, float] = {}

    def call_s(self, input_tokens: int, output_tokens: int) -> float:
        """One call alone on the fastest instance."""
        key = (input_tokens, output_tokens)
        latency = self._calls.get(key)
        if latency is None:
            truths = self._truths
            latency = truths[0].no_contention_latency_s(input_tokens, output_tokens)
            for truth in truths[1:]:  # ``min`` of a generator costs more than the few latencies it compares
                other = truth.no_contention_latency_s(input_tokens, output_tokens)
                if other < latency:
                    latency = other
            self._calls[key] = latency
        return latency

    def job_s(self, spec: JobSpec) -> float:
        """The job alone on the fastest instance, from its true lengths (descriptive; never a policy input)."""
        stages = spec.stages
        if len(stages) == 1 and len(stages[0].calls) == 1 and not stages[0].tool_duration_s:
            call = stages[0].calls[0]  # the common case, kept cheap
            return self.call_s(call.input_tokens, call.output_tokens)
        # By identity: the run holds its jobs and history until it ends, and hashing a workflow's stages
        # would cost more than walking them.
        latency = self._jobs.get(id(spec))
        if latency is None:
            latency = self._jobs[id(spec)] = min(model.job_latency_s(spec) for model in self._models)
        return latency


def _mean(values: Sequence[float]) -> float:
    return float(sum(values)) / len(values)
