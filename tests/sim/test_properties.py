"""Simulator invariants over random small scenarios (hypothesis)."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slosched.core.job import CallSpec, JobSpec, single_job
from slosched.core.request import Outcome
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from tests.conftest import make_instance

POLICIES = ["round-robin+fcfs", "least-loaded+chunked-fcfs", "least-tokens+static-priority", "random+fcfs"]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list, list[JobSpec], str, int]:
    num_instances = draw(st.integers(1, 3))
    kv_blocks = draw(st.integers(40, 400))
    specs = [
        make_instance(
            f"i{i}",
            draw(st.sampled_from(["A100-80G", "A6000", "H100"])),
            max_running=draw(st.integers(1, 16)),
            max_batched_tokens=draw(st.sampled_from([64, 512, 2048])),
            num_kv_blocks=kv_blocks,
            max_model_len=kv_blocks * 16,
            prefix_caching=draw(st.booleans()),
        )
        for i in range(num_instances)
    ]
    num_jobs = draw(st.integers(1, 25))
    jobs = []
    arrival = 0.0
    for index in range(num_jobs):
        arrival += draw(st.floats(0.0, 2.0))
        prompt = draw(st.integers(1, 3000))
        output = draw(st.integers(1, 300))
        shared = draw(st.integers(0, prompt))
        call = CallSpec(prompt, output, output + draw(st.integers(0, 50)), "p" if shared else None, shared)
        jobs.append(single_job(f"j{index}", arrival, call, slo_s=draw(st.floats(0.5, 50.0))))
    return specs, jobs, draw(st.sampled_from(POLICIES)), draw(st.integers(0, 2**16))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.booleans())
def test_invariants(scenario: tuple, fast_forward: bool) -> None:
    specs, jobs, policy, seed = scenario
    options = SimOptions(fast_forward=fast_forward, noise_sigma=0.1)
    result = simulate(specs, jobs, PolicyPair.parse(policy), seed, options)

    # Every request ends exactly once, completed or rejected with a reason.
    ids = [record.id for record in result.requests]
    assert len(ids) == len(set(ids)) == sum(job.num_calls for job in jobs)
    truth = {f"{job.id}/{job.stages[0].name}/0": job.stages[0].calls[0] for job in jobs}
    for record in result.requests:
        assert record.outcome in (Outcome.COMPLETED, Outcome.REJECTED)
        if record.outcome is Outcome.REJECTED:
            assert record.reason
            continue
        # Tokens are conserved: exactly the true output length was generated.
        assert record.output_tokens == truth[record.id].output_tokens
        # Time never goes back.
        assert record.arrival_s <= record.first_scheduled_s <= record.first_token_s <= record.finish_s
    assert all(job.outcome in (Outcome.COMPLETED, Outcome.REJECTED) for job in result.jobs)
    # KV blocks in use never exceed capacity.
    for stats, spec in zip(result.instances, specs, strict=True):
        assert stats.peak_kv_blocks_used <= spec.num_kv_blocks

    again = simulate(specs, jobs, PolicyPair.parse(policy), seed, options)
    assert [dataclasses.astuple(r) for r in again.requests] == [dataclasses.astuple(r) for r in result.requests]
