"""Integration tests against one real vLLM CPU server running the plugin (policies switched live)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import httpx
import pytest

from slosched.policies.engine.nexus_state import EngineState
from slosched.vllm_ext.state_export import read_state
from tests.vllm_ext.conftest import LivePlugin
from tests.vllm_ext.live_client import complete, set_control, steps_since, submit, unique_prompt

pytestmark = pytest.mark.vllm
PROMPT = "The quick brown fox jumps over the lazy dog. " * 3


def _wait_for(condition: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _admission_order(p: LivePlugin, priorities: list[int], policy: dict[str, Any]) -> list[int]:
    """Queue one request per priority while the engine is drained (each seen by the engine before the
    next is sent), then lift the drain: the order the engine admits them in, by priority."""
    set_control(p.url, p.control_file, p.state_file, {**policy, "drain": True})
    futures = []
    for index, priority in enumerate(priorities):
        xargs = {"slosched_priority": priority, "slosched_job_id": f"p{index}"}
        futures.append(submit(p.url, unique_prompt(10), 4, xargs))
        _wait_for(lambda i=index: f"p{i}" in (read_state(p.state_file) or {})["engine"]["waiting_head_jobs"])
    _, offset = steps_since(p.step_log_file, 0)
    set_control(p.url, p.control_file, p.state_file, policy)
    ids = [future.result(timeout=120)["id"] for future in futures]
    records, _ = steps_since(p.step_log_file, offset)
    admitted = [rid for record in records for rid in record["new"]]
    order = [index for rid in admitted for index, cid in enumerate(ids) if rid.startswith(f"{cid}-")]
    return [priorities[index] for index in order]


def test_ordering_is_honoured_under_a_one_at_a_time_cap(plugin_server: LivePlugin) -> None:
    gate = {"admission": "static-concurrency", "admission_params": {"cap": 1}}
    priorities = [3, 1, 4, 0, 2]
    by_priority = _admission_order(plugin_server, priorities, {"ordering": "static-priority", **gate})
    assert by_priority == sorted(priorities)
    assert _admission_order(plugin_server, priorities, {"ordering": "fcfs", **gate}) == priorities  # arrival


async def _chunked_and_decoding(url: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient() as client:
        return list(
            await asyncio.gather(
                complete(client, url, "short prompt", 120, {"slosched_job_id": "decoder"}),
                complete(client, url, unique_prompt(150), 6, {"slosched_job_id": "long"}),
            )
        )


def test_token_budget_and_decode_only_steps_take_effect(plugin_server: LivePlugin) -> None:
    p = plugin_server
    set_control(p.url, p.control_file, p.state_file, {"batching": "chunked", "params": {"token_budget": 32}})
    _, offset = steps_since(p.step_log_file, 0)
    results = asyncio.run(_chunked_and_decoding(p.url))
    assert [r["usage"]["completion_tokens"] for r in results] == [120, 6]
    records, offset = steps_since(p.step_log_file, offset)
    totals = [sum(r["scheduled"].values()) for r in records]
    assert max(totals) <= 32 and sum(1 for r in records if max(r["scheduled"].values(), default=0) > 1) >= 8


def _chunk_steps(records: list[dict[str, Any]]) -> int:
    return sum(1 for r in records if max(r["scheduled"].values(), default=0) > 1)


@pytest.mark.skip(
    reason="fails on a fresh checkout: the step log shows the long prompt prefilling alone (the decoding request "
    "is not running beside it), so every decode-only step is relaxed to mixed ('empty-step'); decode-only "
    "steps are still checked on vLLM's real Scheduler in test_real_scheduler.py. Open in issue 8."
)
def test_decode_only_steps_hold_back_prefill_chunks(plugin_server: LivePlugin) -> None:
    p = plugin_server
    budget = {"params": {"token_budget": 8}}
    set_control(p.url, p.control_file, p.state_file, budget)
    _, offset = steps_since(p.step_log_file, 0)
    decoder = submit(p.url, "short", 1500)  # decodes for seconds
    time.sleep(0.3)
    long = submit(p.url, unique_prompt(150), 3)  # > 100 prefill chunks of <= 8 tokens
    seen: list[dict[str, Any]] = []
    while _chunk_steps(seen) < 3:
        records, offset = steps_since(p.step_log_file, offset)
        seen += records
        time.sleep(0.005)
    set_control(p.url, p.control_file, p.state_file, {**budget, "mode_override": "decode_only"})
    time.sleep(0.5)
    set_control(p.url, p.control_file, p.state_file, budget)
    assert long.result(timeout=120)["usage"]["completion_tokens"] == 3
    assert decoder.result(timeout=120)["usage"]["completion_tokens"] == 1500
    records, _ = steps_since(p.step_log_file, offset)
    decode_steps = [r for r in records if r["mode"] == "decode_only" and r["scheduled"]]
    assert all(max(r["scheduled"].values()) == 1 and not r["new"] for r in decode_steps)  # decodes only
    holding = [r for r in decode_steps if r["held_running"]]
    assert len(holding) > 20  # the override lasted >= 0.5 s of steps while the long prompt was mid-prefill
    held = holding[0]["held_running"][0]
    assert any(r["mode"] != "decode_only" and r["scheduled"].get(held, 0) > 1 for r in records)  # then resumed


async def _burst(url: str, control: Any, seed: int) -> list[tuple[int, dict[str, Any]]]:
    rng = random.Random(seed)
    async with httpx.AsyncClient() as client:
        jobs = []
        for index in range(40):
            xargs = rng.choice([None, {"slosched_deadline_unix_s": time.time() + rng.uniform(1, 20)},
                                {"slosched_job_id": f"rq{index % 4}", "slosched_relquery_size": 10},
                                {"slosched_predicted_tokens": "many"}])  # fmt: skip
            tokens = rng.randint(1, 40)
            prompt = unique_prompt(rng.randint(5, 200))
            jobs.append((tokens, asyncio.create_task(complete(client, url, prompt, tokens, xargs))))
            if index % 8 == 7:
                await asyncio.to_thread(control, index // 8)
        return [(tokens, await task) for tokens, task in jobs]


def test_no_request_is_lost_while_policies_switch_live(plugin_server: LivePlugin) -> None:
    p = plugin_server
    policies = [
        {"preset": "urgency"},
        {"preset": "relserve"},
        {"preset": "lens"},
        {"preset": "static-priority", "drain": True},
        {"ordering": "fcfs", "batching": "prefill-first"},
    ]

    def control(stage: int) -> None:
        set_control(p.url, p.control_file, p.state_file, policies[stage % len(policies)])

    results = asyncio.run(_burst(p.url, control, seed=7))
    assert all(result["usage"]["completion_tokens"] == tokens for tokens, result in results)
    set_control(p.url, p.control_file, p.state_file, {})


def test_bad_metadata_is_counted_and_state_is_exported(plugin_server: LivePlugin) -> None:
    p = plugin_server
    set_control(p.url, p.control_file, p.state_file, {})
    before = read_state(p.state_file)
    assert before is not None
    bad = {"slosched_budget_s": "soon", "slosched_relquery_size": -3, "slosched_colour": "blue"}

    async def send() -> dict[str, Any]:
        async with httpx.AsyncClient() as client:
            return await complete(client, p.url, PROMPT, 5, bad)

    assert asyncio.run(send())["usage"]["completion_tokens"] == 5  # served with defaults
    time.sleep(0.5)
    after = read_state(p.state_file)
    assert after is not None
    problems_before = before["plugin"]["metadata_problems"]
    for key in ("slosched_budget_s", "slosched_relquery_size", "unknown:slosched_colour"):
        assert after["plugin"]["metadata_problems"][key] == problems_before.get(key, 0) + 1
    state = EngineState.from_mapping(after)  # PRISM reads the same document
    assert state.peak_tokens_per_s > 0 and after["age_s"] < 30 and after["heartbeat_age_s"] < 5
    assert after["step_model"]["num_observations"] > 10 and after["plugin"]["stats"]["mean_step_s"] > 0
