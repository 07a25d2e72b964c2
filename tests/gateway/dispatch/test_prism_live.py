"""PRISM live: the gateway's ``prism`` router routes on the state two real vLLM plugin servers export.

Two tiny-model servers (2 layers each, so they differ only in load) run slosched's scheduler plugin; its
engine state reaches the gateway as ``slosched:engine_*`` gauges on vLLM's ``/metrics``. A client the
gateway does not know about loads one server directly; calls through the gateway then avoid it, and the
router's recorded views show why: the loaded engine's exported pending work, fresh (small ``age_s``).
Swapping the two exported states in a recorded decision flips it, so the decision rested on them.

Asserts are on what the views carried and on decisions taken while the exported states clearly differed,
never on timings, so a loaded 2-core machine only makes the test slower.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.devtools.stub import serve_app
from slosched.devtools.up import gateway_config, wait_ready
from slosched.devtools.vllm_launch import start_plugin_servers, stop_plugin_servers
from slosched.gateway.backends.engine_state import AGE
from slosched.gateway.http.app import Gateway
from slosched.gateway.ops.config import parse_config
from slosched.policies.engine import nexus_state as keys
from slosched.sim.views import InstanceSnapshot

pytestmark = pytest.mark.vllm

_MAX_AGE_S = 15.0  # generous: a loaded machine slows the engine's steps, and with them its snapshots
_BACKGROUND = 12  # long requests sent straight to the busy server
_MIN_PENDING = 3.0  # pending requests the busy engine must export for a decision to count


@dataclass(frozen=True)
class Decision:
    request: Request
    chosen: int  # backend index
    views: tuple[InstanceSnapshot, ...]


@dataclass(frozen=True)
class _Running:
    name: str
    url: str


@pytest.fixture(scope="module")
def prism_servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Any]]:
    """Two plugin servers exporting every 0.2 s, stopped (by PID) when this module's tests are done;
    ``SLOSCHED_PRISM_URLS=URL,URL`` reuses running ones (a development loop)."""
    existing = os.environ.get("SLOSCHED_PRISM_URLS")
    if existing:
        yield [_Running(f"plugin-{i}", url) for i, url in enumerate(existing.split(","))]
        return
    vllm_python: Path = request.getfixturevalue("vllm_python")
    work = tmp_path_factory.mktemp("prism-live")
    servers = start_plugin_servers([2, 2], work, None, {"export_interval_s": 0.2}, python=vllm_python)
    try:
        wait_ready([server.server for server in servers], timeout_s=900)
        yield servers
    finally:
        stop_plugin_servers(servers)


def _freeze(view: InstanceView) -> InstanceSnapshot:
    """What the router saw of one backend, kept after the decision (live views change)."""
    return InstanceSnapshot(
        index=view.index,
        spec=view.spec,
        snapshot_s=0.0,
        num_running=view.num_running,
        num_waiting=view.num_waiting,
        waiting_prefill_tokens=view.waiting_prefill_tokens,
        outstanding_decode_tokens=view.outstanding_decode_tokens,
        num_free_kv_blocks=view.num_free_kv_blocks,
        num_kv_blocks=view.num_kv_blocks,
        step_predictor=view.step_predictor,
        exported=dict(view.exported),
    )


def _record(gateway: Gateway, decisions: list[Decision]) -> Any:
    """Record every routing decision; returns the router's own ``route`` (for what-if questions)."""
    router = gateway.dispatcher.router
    route = router.route

    def recording(request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        frozen = tuple(_freeze(view) for view in instances)
        position = route(request, instances, now_s)
        decisions.append(Decision(request, instances[position].index, frozen))
        return position

    router.route = recording  # type: ignore[method-assign]
    return route


def _prompt(seed: int, length: int) -> list[int]:
    return [50 + (seed * 131 + k * 7) % 400 for k in range(length)]  # distinct: no prefix-cache shortcut


async def _direct(client: httpx.AsyncClient, url: str, seed: int, prompt: int, output: int) -> None:
    body = {"model": "tiny", "prompt": _prompt(seed, prompt), "max_tokens": output, "ignore_eos": True}
    response = await client.post(f"{url}/v1/completions", json=body)
    assert response.status_code == 200, response.text


def _exported(decision: Decision, index: int) -> Mapping[str, float]:
    """The state backend ``index`` exported at the decision; empty when it was not a candidate (a health
    check that timed out on a loaded machine takes a backend out of one decision: seen once as a
    StopIteration here)."""
    return next((view.exported for view in decision.views if view.index == index), {})


def _clear(decision: Decision, busy: int, idle: int) -> bool:
    """Both engines' states were live, the idle one reported nothing pending and the busy one several
    requests (then PRISM's every factor favours the idle one, whatever the two fitted peaks)."""
    loaded, other = _exported(decision, busy), _exported(decision, idle)
    if AGE not in loaded or AGE not in other:
        return False
    return other[keys.PENDING_REQUESTS] == 0 and loaded[keys.PENDING_REQUESTS] >= _MIN_PENDING


async def _until_idle(gateway: Gateway, indices: Sequence[int], timeout_s: float = 120.0) -> bool:
    """Until the gateway has scraped an idle state from these engines (a call that just finished may still
    be in the last snapshot for a moment); False on timeout."""
    backends = [gateway.dispatcher.backends[index] for index in indices]
    for _ in range(int(timeout_s / 0.1)):
        states = [backend.metrics.engine_state for backend in backends]
        if all(state is not None and state.pending_requests == 0 for state in states):
            return True
        await asyncio.sleep(0.1)
    return False


async def _scenario(servers: list[Any]) -> tuple[list[Decision], Any]:
    config: dict[str, Any] = gateway_config(servers, router="prism", engine="chunked-fcfs", job="deadline")
    config.update(scrape_interval_s=0.2, health_interval_s=0.5, engine_state_max_age_s=_MAX_AGE_S)
    gateway = Gateway(parse_config(config))
    decisions: list[Decision] = []
    route = _record(gateway, decisions)
    busy = servers[0]
    async with serve_app(gateway.app, lifespan="on") as url, httpx.AsyncClient(timeout=600) as client:
        # Same warm-up on both engines, so both step models are fitted alike (the comparison is on load).
        await asyncio.gather(*(_direct(client, s.url, i, 200, 64) for s in servers for i in range(4)))
        assert await _until_idle(gateway, (0, 1)), "the engines never exported an idle state"
        call = {"prompt": "hello", "max_tokens": 4, "ignore_eos": True}
        response = await client.post(f"{url}/v1/completions", json=call)  # both idle: a baseline decision
        assert response.status_code == 200, response.text
        background: list[asyncio.Task[None]] = []
        wave = 0
        for _ in range(60):  # through the gateway, one at a time, while the busy engine works
            if all(task.done() for task in background):
                # Keep the busy engine busy however fast this machine finishes a wave: a fresh wave of long
                # requests whenever the last one is done (their admission and completion times vary a lot).
                await asyncio.gather(*background)
                background = [
                    asyncio.create_task(_direct(client, busy.url, 100 + wave * _BACKGROUND + i, 1000, 800))
                    for i in range(_BACKGROUND)
                ]
                wave += 1
            await _until_idle(gateway, (1,), timeout_s=30.0)  # so the comparison is busy vs idle
            response = await client.post(f"{url}/v1/completions", json=call)
            assert response.status_code == 200, response.text
            if sum(_clear(d, 0, 1) for d in decisions) >= 8:
                break
        await asyncio.gather(*background)
    return decisions, route


def test_prism_routes_on_plugin_exported_state(prism_servers: list[Any]) -> None:
    decisions, route = asyncio.run(_scenario(prism_servers))
    busy, idle = 0, 1  # backend indices: the gateway config lists the servers in order
    # Every decision saw both engines' live state: all of s_e, fresh, the peak known (a fitted step model).
    for decision in decisions:
        for view in decision.views:
            state = view.exported
            assert AGE in state, f"backend {view.index} exported no live state: {state}"
            assert 0.0 <= state[AGE] <= _MAX_AGE_S
            assert math.isfinite(state[keys.PEAK]) and state[keys.PEAK] > 0
    idle_first = decisions[0]
    assert all(_exported(idle_first, i)[keys.PENDING_REQUESTS] == 0 for i in (busy, idle))
    # While the busy engine exported clearly more pending work, PRISM sent the calls to the other one.
    clear = [d for d in decisions if _clear(d, busy, idle)]
    assert len(clear) >= 3, f"only {len(clear)} decisions with a clearly busier engine: {_summary(decisions)}"
    loaded = _exported(clear[0], busy)
    assert loaded[keys.LATENCY] > 0 and loaded[keys.PENDING_PREFILL] + loaded[keys.PENDING_REQUESTS] > 0
    assert [d.chosen for d in clear] == [idle] * len(clear), _summary(decisions)
    # The decision rested on the exported state: swapped between the engines, it goes the other way.
    for decision in clear:
        swapped = _swap(decision.views, busy, idle)
        assert swapped[route(decision.request, swapped, 0.0)].index == busy


def _swap(views: Sequence[InstanceSnapshot], a: int, b: int) -> list[InstanceSnapshot]:
    exported = {view.index: view.exported for view in views}
    exported[a], exported[b] = exported[b], exported[a]
    return [replace(view, exported=exported[view.index]) for view in views]


def _summary(decisions: Sequence[Decision]) -> str:
    rows = []
    for d in decisions:
        states = [
            (v.index, round(v.exported.get(keys.PENDING_REQUESTS, -1)), round(v.exported.get(AGE, -1), 2))
            for v in d.views
        ]
        rows.append(f"chose {d.chosen} over {states}")
    return "; ".join(rows)
