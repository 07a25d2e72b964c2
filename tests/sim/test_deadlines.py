"""Leak-free deadlines: set from what a client knows at submission, never from true output lengths."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec, single_job
from slosched.sim.deadlines import DeadlineModel, FastestLatency, stage_kind
from slosched.sim.models import InstanceModels
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from slosched.workloads.generators import make_workload
from tests.conftest import make_cluster


def _latency(input_tokens: int, output_tokens: int) -> float:
    return 0.001 * input_tokens + 0.02 * output_tokens


def _job_latency(job: JobSpec) -> float:
    return sum(max(_latency(c.input_tokens, c.output_tokens) for c in stage.calls) for stage in job.stages)


def _permute_outputs(jobs: list[JobSpec], seed: int) -> list[JobSpec]:
    """The same jobs with true output lengths shuffled among calls of one (template, stage kind)."""
    pools: dict[tuple[str, str], list[int]] = {}
    for job in jobs:
        for stage in job.stages:
            pools.setdefault((job.template, stage_kind(stage.name)), []).extend(c.output_tokens for c in stage.calls)
    rng = np.random.default_rng(seed)
    for values in pools.values():
        rng.shuffle(values)
    permuted = []
    for job in jobs:
        stages = []
        for stage in job.stages:
            pool = pools[(job.template, stage_kind(stage.name))]
            stages.append(replace(stage, calls=tuple(replace(c, output_tokens=pool.pop()) for c in stage.calls)))
        permuted.append(replace(job, stages=tuple(stages)))
    return permuted


@pytest.mark.parametrize("generator", ["azure-conv", "code-w3", "text2sql-chess", "relquery"])
def test_permuting_true_outputs_within_a_template_leaves_every_deadline_unchanged(generator: str) -> None:
    arrivals = {"process": "poisson", "rate": 2.0}
    jobs = make_workload(generator, arrivals, 40, {}, seed=1)
    history = make_workload(generator, arrivals, 40, {}, seed=2)
    instances = make_cluster(1, 1)
    options = SimOptions(slo_scale=5.0, noise_sigma=0.0)
    pair = PolicyPair.parse("least-tokens+chunked-fcfs")
    before = simulate(instances, jobs, pair, 0, options, history=history)
    after = simulate(instances, _permute_outputs(jobs, seed=9), pair, 0, options, history=history)
    assert [job.slo_s for job in before.jobs] == [job.slo_s for job in after.jobs]
    # The descriptive truth moved (the permutation did change the jobs), the deadlines did not.
    assert [job.no_contention_s for job in before.jobs] != [job.no_contention_s for job in after.jobs]


def test_true_lengths_basis_is_the_labelled_oracle() -> None:
    jobs = make_workload("azure-conv", {"process": "poisson", "rate": 2.0}, 30, {}, seed=1)
    instances = make_cluster(1, 0)
    pair = PolicyPair.parse("least-tokens+chunked-fcfs")
    oracle = simulate(instances, jobs, pair, 0, SimOptions(slo_scale=5.0, slo_basis="true-lengths"))
    assert [job.slo_s for job in oracle.jobs] == pytest.approx([5.0 * job.no_contention_s for job in oracle.jobs])


def test_single_call_uses_history_mean_capped_by_max_tokens() -> None:
    history = [single_job(f"h{i}", 0.0, CallSpec(100, out), template="t") for i, out in enumerate((100, 300))]
    model = DeadlineModel.learn(history, _latency, _job_latency)
    short = single_job("j", 0.0, CallSpec(50, 7), template="t")
    long = single_job("k", 0.0, CallSpec(50, 5000), template="t")
    assert model.job_latency_s(short) == model.job_latency_s(long) == pytest.approx(_latency(50, 200))
    capped = single_job("m", 0.0, CallSpec(50, 7, max_output_tokens=20), template="t")
    assert model.job_latency_s(capped) == pytest.approx(_latency(50, 20))
    unknown = single_job("u", 0.0, CallSpec(50, 7), template="other")
    assert model.job_latency_s(unknown) == pytest.approx(_latency(50, 200))  # global mean


def _workflow(job_id: str, rounds: int, output: int) -> JobSpec:
    stages = tuple(StageSpec(f"revise{i}", (CallSpec(100, output),)) for i in range(rounds))
    return JobSpec(job_id, JobKind.WORKFLOW, 0.0, stages, template="sql")


def test_workflow_deadline_ignores_its_true_shape() -> None:
    history = [_workflow("h0", 2, 100), _workflow("h1", 4, 100)]
    model = DeadlineModel.learn(history, _latency, _job_latency)
    expected = (_job_latency(history[0]) + _job_latency(history[1])) / 2
    assert model.job_latency_s(_workflow("a", 1, 10)) == pytest.approx(expected)
    assert model.job_latency_s(_workflow("b", 9, 900)) == pytest.approx(expected)


def test_no_history_at_all_falls_back_to_max_tokens() -> None:
    model = DeadlineModel.learn([], _latency, _job_latency)
    assert math.isnan(model.global_output)
    job = single_job("j", 0.0, CallSpec(50, 7, max_output_tokens=64))
    assert model.job_latency_s(job) == pytest.approx(_latency(50, 64))


def test_fastest_latency_computes_each_latency_once_and_equals_the_direct_minimum() -> None:
    models = [InstanceModels.build(spec) for spec in make_cluster(2, 1)]
    latency = FastestLatency(models)
    assert len(latency._models) == 2  # one per distinct GPU type
    jobs = make_workload("text2sql-chess", {"process": "poisson", "rate": 1.0}, 6, {}, seed=3)
    jobs += make_workload("azure-conv", {"process": "poisson", "rate": 1.0}, 6, {}, seed=3)
    for job in jobs:
        direct = min(model.job_latency_s(job) for model in models)
        assert latency.job_s(job) == direct == latency.job_s(job)  # bit-identical, and the memo's twice
    assert latency.call_s(100, 20) == min(m.truth.no_contention_latency_s(100, 20) for m in models)
    calls: list[JobSpec] = []
    counting = FastestLatency(models)
    counting._models = [_Counting(model, calls) for model in counting._models]  # type: ignore[misc]
    workflow = jobs[0]
    for _ in range(3):
        counting.job_s(workflow)
    assert len(calls) == 2  # once per distinct model, however often asked


class _Counting:
    def __init__(self, model: InstanceModels, calls: list[JobSpec]) -> None:
        self.model, self.calls = model, calls

    def job_latency_s(self, job: JobSpec) -> float:
        self.calls.append(job)
        return self.model.job_latency_s(job)
