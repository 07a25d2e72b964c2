"""Requests no instance can serve are rejected with a reason and counted, never left hanging."""

from __future__ import annotations

from slosched.core.job import CallSpec, single_job
from slosched.core.request import Outcome
from slosched.metrics.summary import summarize
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from tests.conftest import make_instance


def test_over_long_and_over_capacity_prompts_are_rejected_with_reasons() -> None:
    small = make_instance("small", max_model_len=2048)
    tiny_kv = make_instance("tiny", num_kv_blocks=64, max_model_len=32768)  # 1024 tokens of KV
    jobs = [
        single_job("fits", 0.0, CallSpec(500, 20)),
        single_job("too-long", 0.1, CallSpec(5000, 20)),
        single_job("output-too-long", 0.2, CallSpec(1900, 100, max_output_tokens=400)),
    ]
    result = simulate((small, tiny_kv), jobs, PolicyPair.parse("round-robin+fcfs"), 0, SimOptions(slo_s=30.0))
    outcomes = {record.job_id: record for record in result.requests}
    assert outcomes["fits"].outcome is Outcome.COMPLETED
    assert outcomes["too-long"].outcome is Outcome.REJECTED
    assert "exceeds the longest model length (2048)" in outcomes["too-long"].reason
    assert outcomes["output-too-long"].outcome is Outcome.REJECTED
    assert "max output 400" in outcomes["output-too-long"].reason
    summary = summarize(result)
    assert summary.rejected == 2 and summary.jobs == 3 and summary.completed == 1


def test_infeasible_instances_are_filtered_not_chosen() -> None:
    small = make_instance("small", max_model_len=1024)
    large = make_instance("large", max_model_len=8192)
    jobs = [single_job(f"j{i}", 0.01 * i, CallSpec(3000, 10)) for i in range(6)]
    result = simulate((small, large), jobs, PolicyPair.parse("round-robin+chunked-fcfs"), 0, SimOptions())
    assert {record.instance for record in result.requests} == {"large"}
    assert all(record.outcome is Outcome.COMPLETED for record in result.requests)


def test_a_request_larger_than_kv_is_rejected_even_if_the_model_length_allows_it() -> None:
    tiny_kv = make_instance("tiny", num_kv_blocks=8, max_model_len=32768)  # 128 tokens of KV
    jobs = [single_job("big", 0.0, CallSpec(200, 5))]
    result = simulate((tiny_kv,), jobs, PolicyPair.parse("least-loaded+fcfs"), 0, SimOptions())
    assert result.requests[0].outcome is Outcome.REJECTED


def test_without_a_client_limit_the_cap_is_the_model_length_not_the_true_length() -> None:
    from slosched.core.job import CallSpec as Call

    instance = make_instance("i", max_model_len=1000)
    jobs = [single_job("open", 0.0, Call(400, 50)), single_job("long", 0.1, Call(900, 300))]
    result = simulate((instance,), jobs, PolicyPair.parse("round-robin+fcfs"), 0, SimOptions())
    records = {record.job_id: record for record in result.requests}
    assert records["open"].output_tokens == 50
    # The engine stops at its model length: 900 prompt + 100 generated, like vLLM's default max_tokens.
    assert records["long"].outcome is Outcome.COMPLETED and records["long"].output_tokens == 100


def test_a_hopeless_job_is_rejected_at_once_when_its_client_asked_for_it() -> None:
    """``on_infeasible: reject``: a job the stack's job layer finds hopeless (here: 2,000 tokens in 0.5 s)
    ends rejected at that decision, its calls never routed; ``relegate`` (the default) serves it last."""
    from dataclasses import replace

    from slosched.core.job import JobKind, JobSpec, StageSpec
    from slosched.sim.options import INFEASIBLE_REASON

    instance = make_instance("i")
    feasible = single_job("ok", 0.0, CallSpec(200, 20))
    hopeless = replace(single_job("late", 0.0, CallSpec(200, 2000)), slo_s=0.5)
    stages = (StageSpec("a", (CallSpec(100, 2000),)), StageSpec("b", (CallSpec(100, 5),)))
    workflow = JobSpec("flow", JobKind.WORKFLOW, 0.1, stages, slo_s=0.5)
    jobs = [feasible, hopeless, workflow]
    stack = PolicyPair.parse("slosched")
    rejected = simulate((instance,), jobs, stack, 0, SimOptions(slo_s=60.0, on_infeasible="reject"))
    records = {record.job_id: record for record in rejected.requests}
    assert records["ok"].outcome is Outcome.COMPLETED
    for job_id in ("late", "flow"):
        assert records[job_id].outcome is Outcome.REJECTED and records[job_id].reason == INFEASIBLE_REASON
        assert records[job_id].instance in (None, "")
    assert [record.job_id for record in rejected.requests].count("flow") == 1  # its later stage never released
    assert {job.id: job.outcome for job in rejected.jobs}["flow"] is Outcome.REJECTED
    relegated = simulate((instance,), jobs, stack, 0, SimOptions(slo_s=60.0))
    assert all(record.outcome is Outcome.COMPLETED for record in relegated.requests)


def test_on_infeasible_takes_only_its_two_values() -> None:
    import pytest

    from slosched.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"simulator\.on_infeasible.*'drop'.*\['relegate', 'reject'\]"):
        SimOptions(on_infeasible="drop")
