"""The plugin's engine state on its way to PRISM, without vLLM: state file -> gauges on ``/metrics`` (the
collector vLLM's API server runs) -> the gateway's scrape parser -> ``BackendView.exported`` -> routing."""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from slosched.gateway.backends.backend import EngineMetrics, parse_vllm_metrics
from slosched.gateway.backends.engine_state import AGE, ScrapedEngineState, engine_state_from_gauges, exported_mapping
from slosched.gateway.dispatch.views import BackendView
from slosched.policies.engine import nexus_state as keys
from slosched.vllm_ext.config import CONFIG_ENV
from slosched.vllm_ext.state_export import write_atomic
from slosched.vllm_ext.state_metrics import AGE_GAUGE, EngineStateCollector, register, state_gauges
from tests.gateway.helpers import make_request, offline_dispatcher

_VLLM = 'vllm:num_requests_running{engine="0",model_name="tiny"} 3.0\n'


def _state(pending: float = 4.0, peak: float = 9000.0, snapshot_age_s: float = 1.5, **extra: Any) -> dict[str, Any]:
    now = time.time()
    return {
        keys.LATENCY: 0.04,
        keys.PENDING_PREFILL: 700.0,
        keys.PENDING_REQUESTS: pending,
        keys.FREE_KV: 50_000.0,
        keys.PEAK: peak,
        "snapshot_unix_s": now - snapshot_age_s,
        "written_unix_s": now - 0.1,
        "engine": {"num_running": 2},
        **extra,
    }


def _exposition(path: Path) -> str:
    registry = CollectorRegistry()
    registry.register(EngineStateCollector(path))
    return generate_latest(registry).decode()


def test_state_file_round_trips_through_metrics_to_the_scrape(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    assert _exposition(path) == ""  # no file yet: no gauges, the gateway falls back
    write_atomic(path, _state(peak=math.inf))  # an unfitted peak: JSON null
    text = _exposition(path)
    assert "slosched:engine_peak_tokens_per_second +Inf" in text
    metrics = parse_vllm_metrics(_VLLM + text)
    assert metrics.num_running == 3.0
    state = metrics.engine_state
    assert state is not None
    assert (state.latency_s, state.pending_prefill_tokens, state.pending_requests) == (0.04, 700.0, 4.0)
    assert state.free_kv_tokens == 50_000.0 and math.isinf(state.peak_tokens_per_s)
    assert 1.4 < state.age_s < 10.0  # a busy engine: as old as its snapshot
    assert abs(state.snapshot_unix_s - (time.time() - 1.5)) < 10.0


def test_an_idle_engine_is_as_fresh_as_its_writer_heartbeat() -> None:
    # An idle engine publishes a snapshot as it goes idle and a new one at its next step: the old idle
    # snapshot stays true while the writer thread lives.
    busy = state_gauges({**_state(snapshot_age_s=30.0), "age_s": 30.0, "heartbeat_age_s": 0.2})
    idle = state_gauges({**_state(pending=0.0, snapshot_age_s=30.0), "age_s": 30.0, "heartbeat_age_s": 0.2})
    assert busy is not None and idle is not None
    assert (busy[AGE_GAUGE], idle[AGE_GAUGE]) == (30.0, 0.2)


def test_incomplete_state_exports_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    partial = _state()
    del partial[keys.FREE_KV]
    write_atomic(path, partial)
    assert _exposition(path) == ""
    path.write_text("{not json")
    assert _exposition(path) == ""
    assert engine_state_from_gauges({AGE_GAUGE: 1.0}) is None
    assert parse_vllm_metrics(_VLLM).engine_state is None  # stock vLLM


def test_register_reads_the_state_file_from_the_plugin_config(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_atomic(path, _state())
    registry = CollectorRegistry()
    env = {CONFIG_ENV: json.dumps({"preset": "lens", "state_file": str(path)})}
    assert register(env, registry)
    assert not register(env, registry)  # vLLM may load general plugins more than once per process
    assert "slosched:engine_pending_requests 4.0" in generate_latest(registry).decode()
    assert not register({}, CollectorRegistry())  # no plugin config: nothing to export
    assert not register({CONFIG_ENV: "{bad"}, CollectorRegistry())  # logged, never fatal to vLLM


def _scraped(pending: float, age_s: float = 0.5) -> ScrapedEngineState:
    return ScrapedEngineState(0.05, 800.0, pending, 40_000.0, 12_000.0, age_s, time.time())


def test_view_exports_the_plugin_state_plus_the_gateway_queue() -> None:
    async def scenario() -> None:
        dispatcher = offline_dispatcher(router="prism")
        queue, backend = dispatcher.queues[0], dispatcher.backends[0]
        now = dispatcher.clock()
        for i in range(3):  # window 2: the third waits at the gateway, where the engine cannot see it
            queue.enqueue(make_request(i, now), 100)
        assert BackendView(backend, queue, now).exported == {}  # nothing scraped: chunked-fcfs exports nothing
        backend.metrics = EngineMetrics(scraped_s=now - 1.0, engine_state=_scraped(pending=5.0))
        exported = BackendView(backend, queue, now).exported
        waiting = make_request(2, now)
        assert exported[keys.PENDING_REQUESTS] == 5.0 + 1
        assert exported[keys.PENDING_PREFILL] == 800.0 + 100
        assert exported[keys.FREE_KV] == 40_000.0 - (waiting.prompt_tokens + waiting.predicted_output_tokens)
        assert (exported[keys.LATENCY], exported[keys.PEAK]) == (0.05, 12_000.0)
        assert exported[AGE] == 0.5 + 1.0  # age at the scrape + time since, on the gateway's clock
        stale = now - backend.engine_state_max_age_s
        backend.metrics = EngineMetrics(scraped_s=stale, engine_state=_scraped(pending=5.0))
        assert BackendView(backend, queue, now).exported == {}  # too old to route on: the fallback

    asyncio.run(scenario())


def test_prism_routes_on_the_scraped_state() -> None:
    async def scenario() -> None:
        dispatcher = offline_dispatcher(router="prism")
        now = dispatcher.clock()
        for backend, pending in zip(dispatcher.backends, (30.0, 2.0, 12.0), strict=True):
            backend.metrics = EngineMetrics(scraped_s=now, engine_state=_scraped(pending))
        assert dispatcher.choose(make_request(0, now), set()).index == 1  # least pending work exported
        state = dispatcher.backends[1].metrics.engine_state
        assert state is not None
        dispatcher.backends[1].metrics = EngineMetrics(scraped_s=now - 60.0, engine_state=state)
        # backend 1's state is stale: it is scored on the gateway's own (idle) accounting, which looks
        # better than the others' exported load, so it still wins; the stale numbers are not used.
        views = [BackendView(b, q, now) for b, q in zip(dispatcher.backends, dispatcher.queues, strict=True)]
        assert AGE not in views[1].exported and AGE in views[0].exported
        assert dispatcher.choose(make_request(1, now), set()).index == 1

    asyncio.run(scenario())


def test_exported_mapping_is_none_when_stale() -> None:
    state = _scraped(pending=1.0, age_s=4.0)
    assert exported_mapping(state, 10.0, 10.5, 5.0, [], 0) is not None
    assert exported_mapping(state, 10.0, 11.5, 5.0, [], 0) is None
