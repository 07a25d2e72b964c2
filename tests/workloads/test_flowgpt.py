"""FlowGPT multi-turn sessions: turns extend the session's context and name it as a shared prefix."""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

import numpy as np
import pytest

from slosched.core.job import CallSpec, JobSpec
from slosched.workloads.bundled import workload_section
from slosched.workloads.generators import make_workload

POISSON = {"process": "poisson", "rate": 20.0}


def _sessions(jobs: list[JobSpec]) -> dict[str, list[tuple[int, CallSpec]]]:
    sessions: dict[str, list[tuple[int, CallSpec]]] = defaultdict(list)
    for slot, job in enumerate(jobs):
        call = job.stages[0].calls[0]
        assert call.session_id is not None
        sessions[call.session_id].append((slot, call))
    return sessions


@pytest.mark.parametrize(
    "params",
    [{}, {"turns_mean": 5.0, "think_time_s": 0.0}, {"max_input_tokens": 3000, "user_tokens_mean": 400}],
)
def test_turns_extend_the_previous_context(params: dict[str, Any]) -> None:
    jobs = make_workload("flowgpt", POISSON, 5000, params, seed=1)
    max_input = params.get("max_input_tokens", 7014)
    for session_id, turns in _sessions(jobs).items():
        first = turns[0][1]
        assert first.prefix_key == session_id and first.prefix_tokens == 0
        for (_, previous), (_, call) in itertools.pairwise(turns):
            assert call.prefix_key == session_id
            assert call.prefix_tokens == previous.input_tokens + previous.output_tokens
            assert call.input_tokens > call.prefix_tokens  # plus new user tokens
        assert all(call.input_tokens <= max_input for _, call in turns)


def test_turns_of_a_session_arrive_in_order_and_spread_out() -> None:
    # A horizon much longer than the think time: near the ends, turns are squeezed onto the arrivals.
    jobs = make_workload("flowgpt", {"process": "poisson", "rate": 2.0}, 5000, {"think_time_s": 20.0}, seed=2)
    gaps = []
    for turns in _sessions(jobs).values():
        slots = [slot for slot, _ in turns]
        assert slots == sorted(slots)  # the jobs list is in arrival order
        gaps += [jobs[b].arrival_s - jobs[a].arrival_s for a, b in itertools.pairwise(slots)]
    assert np.mean(gaps) == pytest.approx(20.0, rel=0.2)


def test_session_lengths_follow_turns_mean() -> None:
    jobs = make_workload("flowgpt", POISSON, 20_000, {"turns_mean": 3.0}, seed=3)
    per_session = len(jobs) / len(_sessions(jobs))
    assert 2.2 < per_session <= 3.05  # geometric mean 3, a little less where full contexts restart
    single = make_workload("flowgpt", POISSON, 500, {"turns_mean": 1.0}, seed=3)
    assert all(job.stages[0].calls[0].prefix_tokens == 0 for job in single)
    assert len(_sessions(single)) == 500


def test_prompt_statistics_near_published() -> None:
    stats = workload_section("chat_and_long_context", "workloads", "flowgpt", "prompt")
    jobs = make_workload("flowgpt", POISSON, 20_000, seed=4)
    calls = [job.stages[0].calls[0] for job in jobs]
    prompts = np.array([call.input_tokens for call in calls])
    assert prompts.mean() == pytest.approx(stats["mean"], rel=0.1)
    assert np.percentile(prompts, 99) <= stats["p99"]
    reused = sum(call.prefix_tokens for call in calls) / prompts.sum()
    assert 0.4 < reused < 0.8  # most prompt tokens are the session's earlier turns


def test_flowgpt_in_a_mix_keeps_sessions_consistent() -> None:
    params = {"components": {"flowgpt": 0.5, "coding": 0.5}}
    jobs = make_workload("mix", POISSON, 2000, params, seed=5)
    flow = [job for job in jobs if job.template == "flowgpt"]
    for turns in _sessions(flow).values():
        for (_, previous), (_, call) in itertools.pairwise(turns):
            assert call.prefix_tokens == previous.input_tokens + previous.output_tokens
