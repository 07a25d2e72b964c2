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


def _waiting_jobs(p: LivePlugin) -> list[str]:
    state = read_state(p.state_file)
    return [] if state is None else list(state["engine"]["waiting_head_jobs"])


def _engine_idle(p: LivePlugin) -> bool:
    engine = (read_state(p.state_file) or {"engine": {"num_running": -1}})["engine"]
    return bool(engine["num_running"] == 0 and engine.get("num_waiting") == 0)


def test_decode_only_steps_hold_back_prefill_chunks(plugin_server: LivePlugin) -> None:
    """A decode-only override holds back a request mid-prefill while another decodes; it resumes after.

    Both requests queue while the engine is drained and are admitted in one step (an idle engine's
    decode-only step is relaxed to admit: 'idle-decode-only'), so the decoder's lifetime and the long
    prompt's prefill are counted in engine steps from the same step; the override is lifted after enough
    held steps were logged, not after a sleep. Nothing depends on how fast the client or HTTP is."""
    p = plugin_server
    budget = {"params": {"token_budget": 64}}  # the decoder, stray nudges and a first chunk of the long prompt
    set_control(p.url, p.control_file, p.state_file, {**budget, "drain": True})
    decoder = submit(p.url, "short", 1500, {"slosched_job_id": "decoder"})  # ~1500 decode steps
    _wait_for(lambda: "decoder" in _waiting_jobs(p))
    long = submit(p.url, unique_prompt(150), 3, {"slosched_job_id": "long"})  # ~770 prompt tokens
    _wait_for(lambda: "long" in _waiting_jobs(p))
    _, offset = steps_since(p.step_log_file, 0)
    set_control(p.url, p.control_file, p.state_file, {**budget, "mode_override": "decode_only"})
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + 120
    while sum(1 for r in records if r["mode"] == "decode_only" and r["held_running"]) < 30:
        assert time.monotonic() < deadline, "no decode-only step held a prefilling request back"
        new_records, offset = steps_since(p.step_log_file, offset)
        records += new_records
        time.sleep(0.01)
    set_control(p.url, p.control_file, p.state_file, budget)
    long_result, decoder_result = long.result(timeout=120), decoder.result(timeout=120)
    assert long_result["usage"]["completion_tokens"] == 3
    assert decoder_result["usage"]["completion_tokens"] == 1500
    _wait_for(lambda: _engine_idle(p))  # nothing left running or waiting: no request was lost
    records += steps_since(p.step_log_file, offset)[0]
    admitted = next(r for r in records if r["new"])
    assert admitted["relaxed"] == "idle-decode-only" and len(admitted["new"]) >= 2  # both joined in one step
    decode_steps = [r for r in records if r["mode"] == "decode_only" and r["scheduled"]]
    assert all(max(r["scheduled"].values()) == 1 and not r["new"] for r in decode_steps)  # decodes only
    holding = [r for r in decode_steps if r["held_running"]]
    held = holding[0]["held_running"][0]
    assert held.startswith(f"{long_result['id']}-") and len(holding) >= 30
    assert all(r["held_running"] == [held] and held not in r["scheduled"] for r in holding)
    decoder_id = next(rid for rid in admitted["new"] if rid.startswith(f"{decoder_result['id']}-"))
    assert all(r["scheduled"].get(decoder_id) == 1 for r in holding)  # the decoder ran beside it
    assert admitted["scheduled"][held] > 1  # held back mid-prefill: its first chunk ran, the prompt did not
    resumed = [r for r in records if r["t"] > holding[-1]["t"] and r["scheduled"].get(held, 0) > 1]
    assert resumed and all(r["mode"] != "decode_only" for r in resumed)  # its prefill went on afterwards


async def _burst(url: str, control: Any, seed: int) -> list[tuple[int, dict[str, Any]]]:
    rng = random.Random(seed)
    async with httpx.AsyncClient() as client:
        jobs = []
        for index in range(40):
            xargs = rng.choice(
                [
                    None,
                    {"slosched_deadline_unix_s": time.time() + rng.uniform(1, 20)},
                    {"slosched_job_id": f"rq{index % 4}", "slosched_relquery_size": 10},
                    {"slosched_predicted_tokens": "many"},
                ]
            )
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
