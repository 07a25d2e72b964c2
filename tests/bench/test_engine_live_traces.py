"""``bench.engine_live.traces`` (pure pieces; no server): prompts, the no-contention latency estimate, the
three traces' shapes and SLOs, the plugin metadata a replayed call carries, the summary, and the replayed
calls' serving figures (a stand-in server)."""

from __future__ import annotations

import asyncio
import json
import math
import time

import httpx
import numpy as np
import pytest

from slosched import contract as c
from slosched.bench.engine_live.traces import (
    LiveCall,
    LiveJob,
    Replay,
    ServerSpeed,
    chat_trace,
    prompt,
    relquery_trace,
    serving,
    solo_latency_s,
    summarize,
    workflow_trace,
)

SPEED = ServerSpeed(solo_tps=100.0, full_tps=20.0, slots=4)


def test_prompts_are_deterministic_and_do_not_share_a_first_word() -> None:
    assert prompt(5, 3) == prompt(5, 3)
    assert len(prompt(5, 3).split()) == 6  # the seed, then the words
    assert prompt(5, 3).split()[0] != prompt(5, 4).split()[0]


def test_solo_latency_interpolates_between_solo_and_full_speed() -> None:
    one = LiveJob("a", "single", 0.0, [[LiveCall(10, 100)]])
    assert solo_latency_s(one, SPEED) == pytest.approx(100 / 100.0 + 0.02)
    full = LiveJob("b", "relquery", 0.0, [[LiveCall(10, 50)] * 4])
    assert solo_latency_s(full, SPEED) == pytest.approx(50 / 20.0 + 0.02)
    two_waves = LiveJob("c", "relquery", 0.0, [[LiveCall(10, 50)] * 5])
    assert solo_latency_s(two_waves, SPEED) == pytest.approx(2 * 50 / 20.0 + 0.02)
    chain = LiveJob("d", "workflow", 0.0, [[LiveCall(1, 100)], [LiveCall(1, 10), LiveCall(1, 30)]])
    two_wide = 1 / 100.0 + (1 / 20.0 - 1 / 100.0) / 3
    assert solo_latency_s(chain, SPEED) == pytest.approx(1.0 + 0.02 + 30 * two_wide + 0.02)


def test_chat_trace() -> None:
    jobs = chat_trace(np.random.default_rng(1), 200, 5.0, SPEED)
    assert jobs == chat_trace(np.random.default_rng(1), 200, 5.0, SPEED)
    arrivals = [job.arrival_s for job in jobs]
    assert arrivals == sorted(arrivals) and arrivals[0] > 0
    multiples = {round(job.slo_s / solo_latency_s(job, SPEED), 6) for job in jobs}
    assert multiples == {2.0, 8.0}
    tight = sum(job.slo_s < 3 * solo_latency_s(job, SPEED) for job in jobs)
    assert 30 < tight < 100  # about 30% of 200
    for job in jobs:
        (stage,) = job.stages
        (call,) = stage
        assert 10 <= call.prompt_words < 120 and 16 <= call.max_tokens < 160


def test_workflow_and_relquery_traces() -> None:
    for job in workflow_trace(np.random.default_rng(2), 50, 1.0, SPEED):
        assert 2 <= len(job.stages) <= 4 and all(1 <= len(stage) <= 2 for stage in job.stages)
        assert job.slo_s == pytest.approx(3 * solo_latency_s(job, SPEED))
    relqueries = relquery_trace(np.random.default_rng(3), 20, 0.5, SPEED)
    assert [job.arrival_s for job in relqueries[:3]] == [0.0, 0.5, 1.0]
    for job in relqueries:
        (stage,) = job.stages
        assert len(stage) in (3, 5, 8, 20, 40)
        assert len({(call.prompt_words, call.max_tokens) for call in stage}) == 1  # one template
        assert job.slo_s == pytest.approx(3 * solo_latency_s(job, SPEED))


def test_replayed_calls_carry_the_plugin_metadata() -> None:
    replay = Replay("http://x", start_unix=1000.0)
    job = LiveJob("rq1", "relquery", 2.0, [[LiveCall(5, 40), LiveCall(5, 40)], [LiveCall(5, 120)]], slo_s=10.0)
    meta = replay.xargs(job, 0, job.stages[0][0], stage_start=4.0)
    assert meta[c.XARG_JOB_ID] == "rq1" and meta[c.XARG_STAGE] == "s0" and meta[c.XARG_TEMPLATE] == "relquery"
    assert meta[c.XARG_DEADLINE_UNIX_S] == 1012.0 and meta[c.XARG_JOB_ARRIVAL_UNIX_S] == 1002.0
    assert meta[c.XARG_BUDGET_S] == pytest.approx((1012.0 - 1004.0) * 40 / 160, abs=1e-3)  # this stage's share
    assert meta[c.XARG_PREDICTED_TOKENS] >= 1.0 and meta[c.XARG_PREDICTED_TOKENS] != 40.0  # noisy, never the truth
    assert (meta[c.XARG_RELQUERY_ID], meta[c.XARG_RELQUERY_SIZE]) == ("rq1", 2)
    late = replay.xargs(job, 1, job.stages[1][0], stage_start=30.0)
    assert late[c.XARG_BUDGET_S] == 0.01 and late[c.XARG_STAGE] == "s1"  # past the deadline: the floor
    chat = LiveJob("c", "single", 0.0, [[LiveCall(1, 1)]], slo_s=1.0)
    assert c.XARG_RELQUERY_ID not in replay.xargs(chat, 0, chat.stages[0][0], 0.0)


def test_summary() -> None:
    jobs = [
        LiveJob("a", "single", 0.0, [], slo_s=2.0, latency_s=1.0),
        LiveJob("b", "single", 0.0, [], slo_s=2.0, latency_s=3.0),
        LiveJob("c", "single", 0.0, [], slo_s=2.0, latency_s=0.5, errors=1),
        LiveJob("d", "single", 0.0, [], slo_s=2.0),
    ]
    figures = summarize(jobs)
    assert figures["jobs"] == 4 and figures["errors"] == 1
    assert figures["slo_attainment"] == 0.25  # of every job, errors and unfinished ones included
    assert figures["mean_latency_s"] == 2.0
    empty = summarize([])
    assert empty["slo_attainment"] == 0.0 and math.isnan(empty["mean_latency_s"])


def test_replayed_calls_give_the_serving_figures_the_records_allow() -> None:
    """A stand-in server answers each call (40 ms; job b's call fails): the calls are recorded and
    give vLLM's figures through the simulator's function; TTFT, TPOT and ITL stay unknown (not streamed)."""

    async def answer(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.04)
        body = json.loads(request.content)
        if body["max_tokens"] == 6:  # job b's call fails
            return httpx.Response(500)
        return httpx.Response(200, json={"usage": {"prompt_tokens": 12, "completion_tokens": body["max_tokens"]}})

    jobs = [
        LiveJob("a", "workflow", 0.0, [[LiveCall(3, 8), LiveCall(3, 4)]], slo_s=5.0),
        LiveJob("b", "single", 0.0, [[LiveCall(3, 6)]], slo_s=0.001),
    ]

    async def replay_all() -> None:
        replay = Replay("http://engine", start_mono=time.monotonic())
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            await asyncio.gather(*(replay.job(client, job) for job in jobs))

    asyncio.run(replay_all())
    records = [record for job in jobs for record in job.calls]
    assert len(records) == 3 and all(0 <= r.arrival_s < r.finish_s for r in records)
    failed = [r for r in records if r.outcome.value != "completed"]
    assert [r.job_id for r in failed] == ["b"] and jobs[1].errors == 1
    figures = serving(jobs)
    assert figures["completed"] == 2 and figures["total_input_tokens"] == 24 and figures["total_output_tokens"] == 12
    assert figures["duration"] == pytest.approx(max(r.finish_s for r in records if r not in failed))
    assert figures["output_throughput"] == pytest.approx(figures["total_output_tokens"] / figures["duration"])
    assert figures["mean_e2el_ms"] >= 40.0 and math.isnan(figures["p99_ttft_ms"]) and math.isnan(figures["p99_itl_ms"])
    # Job a's two calls met its 5 s deadline (no TTFT/TPOT SLO: an unknown first token does not fail them).
    assert figures["request_goodput"] * figures["duration"] == pytest.approx(2)
