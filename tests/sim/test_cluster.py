"""``sim.cluster.ClusterSim`` built directly (no ``simulate``): two instances, a few jobs of every kind.
Every job ends in exactly one terminal state, request records agree with their jobs, stages run in
dependency order, unfit requests are rejected with a reason, and the horizon fails what is unfinished."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec, single_job
from slosched.core.records import RunResult
from slosched.core.request import Outcome
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.engine.base import ENGINE_PRESETS
from slosched.policies.job.base import JOB_POLICIES
from slosched.policies.registry import PolicyContext
from slosched.sim.cluster import ClusterSim
from slosched.sim.models import InstanceModels
from slosched.sim.options import SimOptions
from slosched.workloads.relquery import relquery_job
from tests.conftest import make_instance

SPECS = (make_instance("a100-0"), make_instance("a6000-0", gpu="A6000"))


def make_sim(options: SimOptions | None = None, router: str = "round-robin") -> ClusterSim:
    predictor = HistoryOutputPredictor()
    context = PolicyContext(SPECS, np.random.default_rng(0), predictor)
    return ClusterSim(
        [InstanceModels.build(spec) for spec in SPECS],
        [ENGINE_PRESETS.build("chunked-fcfs", {}, context) for _ in SPECS],
        ROUTERS.build(router, {}, context),
        JOB_POLICIES.build("deadline", {}, context),
        predictor,
        options or SimOptions(noise_sigma=0.0),
        seed=7,
        policy_name=f"{router}+chunked-fcfs",
    )


def make_jobs() -> list[JobSpec]:
    workflow = JobSpec(
        "wf",
        JobKind.WORKFLOW,
        0.2,
        (
            StageSpec("plan", (CallSpec(300, 20, 64),)),
            StageSpec("tool", (), ("plan",), 0.5),
            StageSpec("answer", (CallSpec(500, 30, 64), CallSpec(400, 10, 64)), ("tool",)),
        ),
        slo_s=60.0,
    )
    too_long = single_job("huge", 0.3, CallSpec(10**6, 5, 8))
    chats = [single_job(f"c{i}", 0.1 * i, CallSpec(200 + 50 * i, 16 + i, 64), template="chat") for i in range(6)]
    rows = relquery_job("rq", 0.4, 128, [(40, 3), (60, 4), (20, 2)], 8)
    return [*chats, workflow, too_long, rows]


def check_consistency(result: RunResult, jobs: list[JobSpec]) -> None:
    assert sorted(record.id for record in result.jobs) == sorted(job.id for job in jobs)  # each exactly once
    by_job: dict[str, list] = {}
    for record in result.requests:
        by_job.setdefault(record.job_id, []).append(record)
    assert len({record.id for record in result.requests}) == len(result.requests)
    for job in result.jobs:
        assert job.outcome in (Outcome.COMPLETED, Outcome.REJECTED, Outcome.FAILED)
        requests = by_job.get(job.id, [])
        if job.outcome is Outcome.COMPLETED:
            assert len(requests) == job.num_requests
            assert all(r.outcome is Outcome.COMPLETED for r in requests)
            assert job.finish_s >= max(r.finish_s for r in requests)
            assert job.arrival_s <= job.first_prefill_s <= job.last_prefill_s <= job.finish_s
        else:
            assert job.reason
    for record in result.requests:
        if record.outcome is Outcome.COMPLETED:
            assert record.instance in {spec.name for spec in SPECS}
            assert record.arrival_s <= record.first_scheduled_s <= record.first_token_s <= record.finish_s
            assert record.output_tokens >= 1
        else:
            assert record.instance == "" and record.output_tokens == 0 and record.reason


def test_a_small_run_ends_every_job_once_with_consistent_records() -> None:
    jobs = make_jobs()
    result = make_sim().run(jobs)
    check_consistency(result, jobs)
    outcomes = {record.id: record.outcome for record in result.jobs}
    assert outcomes.pop("huge") is Outcome.REJECTED
    assert set(outcomes.values()) == {Outcome.COMPLETED}
    huge = next(r for r in result.requests if r.job_id == "huge")
    assert huge.outcome is Outcome.REJECTED and "exceeds the longest model length" in huge.reason
    # Round-robin over two instances: both served.
    assert set(Counter(r.instance for r in result.requests if r.instance)) == {"a100-0", "a6000-0"}
    assert result.policy == "round-robin+chunked-fcfs" and result.seed == 7
    assert result.end_s == max(r.finish_s for r in result.requests if r.outcome is Outcome.COMPLETED)
    assert len(result.instances) == 2


def test_stages_run_in_dependency_order_with_the_tool_step_between() -> None:
    result = make_sim().run(make_jobs())
    wf = {r.id: r for r in result.requests if r.job_id == "wf"}
    plan = wf["wf/plan/0"]
    answers = [wf["wf/answer/0"], wf["wf/answer/1"]]
    assert all(a.arrival_s >= plan.finish_s + 0.5 - 1e-9 for a in answers)
    record = next(j for j in result.jobs if j.id == "wf")
    assert record.finish_s == max(a.finish_s for a in answers) and record.slo_s == 60.0


def test_a_shared_prefix_is_reused_on_the_same_instance() -> None:
    call = CallSpec(400, 8, 16, prefix_key="system", prefix_tokens=256)
    jobs = [single_job(f"s{i}", 2.0 * i, call) for i in range(3)]  # far apart: each finds an idle cluster
    result = make_sim().run(jobs)
    check_consistency(result, jobs)
    records = {r.job_id: r for r in result.requests}
    assert [records[f"s{i}"].instance for i in range(3)] == ["a100-0", "a6000-0", "a100-0"]  # round-robin
    assert records["s0"].cached_tokens == records["s1"].cached_tokens == 0  # first on each instance
    assert records["s2"].cached_tokens >= 256  # 16 full shared blocks of 16 tokens


def test_calls_arriving_together_share_a_prefix_from_the_step_that_computes_it() -> None:
    # vLLM v1 caches a block when it schedules its computation: a call that arrives with another still in its
    # prefill reuses the template chunks already scheduled instead of computing them again (bench fidelity's
    # relQueries, whose rows arrive together). The 4,096-token template takes two 2,048-token steps.
    call = CallSpec(5000, 8, 16, prefix_key="system", prefix_tokens=4096)
    jobs = [single_job(f"s{i}", 0.0, call) for i in range(4)]  # round-robin: two on each instance
    result = make_sim().run(jobs)
    check_consistency(result, jobs)
    records = sorted(result.requests, key=lambda r: (r.instance, r.job_id))
    assert [r.cached_tokens for r in records] == [0, 4096, 0, 4096]
    assert all(later.first_scheduled_s < first.first_token_s for first, later in (records[:2], records[2:]))


def test_deterministic() -> None:
    first, second = make_sim().run(make_jobs()), make_sim().run(make_jobs())
    assert first.requests == second.requests and first.jobs == second.jobs


def test_the_horizon_fails_what_is_unfinished() -> None:
    jobs = make_jobs()
    result = make_sim(SimOptions(noise_sigma=0.0, horizon_s=0.45)).run(jobs)
    check_consistency(result, jobs)
    failed = [j for j in result.jobs if j.outcome is Outcome.FAILED]
    assert failed and all(j.reason == "not finished by the simulation horizon" for j in failed)
    unserved = [r for r in result.requests if r.outcome is Outcome.FAILED]
    assert unserved and all(r.job_id in {j.id for j in failed} for r in unserved)


def test_slo_rules_without_a_job_slo() -> None:
    jobs = [single_job("a", 0.0, CallSpec(100, 10, 16))]
    assert make_sim().run(jobs).jobs[0].slo_s == math.inf
    assert make_sim(SimOptions(noise_sigma=0.0, slo_s=3.0)).run(jobs).jobs[0].slo_s == 3.0
    scaled = make_sim(SimOptions(noise_sigma=0.0, slo_scale=4.0, slo_basis="true-lengths")).run(jobs).jobs[0]
    assert scaled.slo_s == 4.0 * scaled.no_contention_s and scaled.no_contention_s > 0


def test_rows_of_one_prefix_group_reuse_the_groups_blocks_beyond_the_template() -> None:
    rows = [(200, 2)] * 8  # 64-token template; each row's first 160 input tokens are its group's (10 blocks)
    groups = [("a", 160), ("b", 160)] * 4
    plain = make_sim(router="cache-aware").run([relquery_job("rq", 0.0, 64, rows, 4)])
    grouped_job = relquery_job("rq", 0.0, 64, rows, 4, groups=groups)
    grouped = make_sim(router="cache-aware").run([grouped_job])
    check_consistency(grouped, [grouped_job])
    hits = [sum(stats.prefix_hit_tokens for stats in result.instances) for result in (plain, grouped)]
    # Without groups only the 4-block template is reused; with them, a group's rows reuse 14 blocks.
    assert hits[1] > hits[0] >= 64
    assert grouped.jobs[0].finish_s <= plain.jobs[0].finish_s
