"""The three runtimes make the same decisions (issue 14, item 7).

Engine half: the same waiting requests, at the same time, on the same (idle) engine state go through the
simulator's instance (``SimInstance`` forming a step), the gateway's ``InstanceQueue.pump`` and the vLLM
plugin's ``SloschedEngine.before_schedule`` (over a fake scheduler: no vLLM needed), for every registered
engine preset, each built from the registries with the same seed. All three use one ``PolicyQueue``; this
test holds their wiring together: the same admissions, in the same order, and the same order of those
left waiting (the gateway, which forms no batches, is exempt from admissions that follow the step's batch
plan). Limits are chosen so that only the running cap binds (ample token budget and KV), the one
limit every runtime has. The plugin hands an ungated policy's whole queue to vLLM, whose own running cap
then takes the head of it.

Router half: added by the router pipeline work (same file, its own tests).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from slosched.contract import XARG_DEADLINE_UNIX_S, XARG_JOB_ID, XARG_PREDICTED_TOKENS, XARG_PRIORITY
from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.gateway.dispatch.queues import InstanceQueue
from slosched.perf.linear import LinearStepPredictor
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.batching.relserve_arranger import SingleJobAdmission
from slosched.policies.registry import PolicyContext
from slosched.sim.belief import BeliefFeed
from slosched.sim.instance import SimInstance
from slosched.sim.kernel import EventKernel
from slosched.sim.noise import NoiseStream
from slosched.sim.seq import Seq
from slosched.vllm_ext import engine as plugin_engine
from slosched.vllm_ext.config import config_from_mapping
from slosched.vllm_ext.engine import SloschedEngine, spec_from_scheduler
from slosched.vllm_ext.metadata import MetadataProblems, XargsTrust, request_metadata
from tests.vllm_ext.fakes import FakeRequest, FakeScheduler

NOW_S = 100.0
MAX_RUNNING = 4
ENGINE_PARAMS: dict[str, dict[str, Any]] = {
    "saber": {"speed": {"kind": "usl", "lam": 40.0, "sigma": 0.05, "kappa": 1e-3}, "window": 3},
    "static-concurrency": {"cap": 3},
}
# (id, prompt tokens, max tokens, arrival, job, deadline - arrival, priority, predicted output tokens)
REQUESTS = [
    ("r0", 40, 64, 90.0, "j0", 30.0, 0.0, 40.0),
    ("r1", 12, 16, 91.0, "j1", 12.0, 2.0, 10.0),
    ("r2", 64, 200, 92.0, "j0", 30.0, 0.0, 150.0),
    ("r3", 24, 32, 93.5, "j2", 8.0, 1.0, 20.0),
    ("r4", 8, 400, 95.0, "j3", 9.0, 0.0, 300.0),
    ("r5", 30, 48, 96.0, "j2", 8.0, 3.0, 30.0),
    ("r6", 16, 20, 98.0, "j4", 60.0, 0.0, 18.0),
    ("r7", 50, 128, 99.0, "j1", 12.0, 0.0, 100.0),
]


@dataclasses.dataclass(frozen=True)
class EngineDecision:
    """Admitted this pass (in admission order) and still waiting (in queue order)."""

    admitted: list[str]
    waiting: list[str]


class _LinearTruth:
    """A ground truth for the simulated instance; the decisions compared here never read it."""

    def step_time_s(self, num_prefill: int, prefill_ctx: int, num_decode: int, decode_ctx: int) -> float:
        return 0.01 + 1e-5 * (num_prefill + decode_ctx)

    def decode_step_terms(self, num_decode_seqs: int) -> tuple[float, float]:
        return 0.01, 1e-5

    def decode_run_s(self, num_decode_seqs: int, decode_context_tokens: int, num_steps: int) -> np.ndarray:
        steps = np.arange(num_steps)
        return 0.01 + 1e-5 * (decode_context_tokens + (steps + 1) * num_decode_seqs)


def _scheduler() -> FakeScheduler:
    sched = FakeScheduler(max_tokens=4096, max_active=MAX_RUNNING, free_blocks=200)
    for rid, prompt, max_tokens, arrival, job, slo, priority, predicted in REQUESTS:
        xargs = {XARG_JOB_ID: job, XARG_DEADLINE_UNIX_S: arrival + slo, XARG_PREDICTED_TOKENS: predicted}
        if priority:
            xargs[XARG_PRIORITY] = priority
        sched.add(FakeRequest(rid, prompt, max_tokens=max_tokens, arrival=arrival, xargs=xargs))
    return sched


def _requests(sched: FakeScheduler) -> list[Request]:
    """The requests as the plugin parses them; the simulator and the gateway get the same (copies)."""
    problems = MetadataProblems()
    requests = []
    for raw in sched.waiting:
        extra = raw.sampling_params.extra_args
        meta = request_metadata(
            raw.request_id,
            raw.arrival_time,
            raw.num_prompt_tokens,
            raw.max_tokens,
            raw.priority,
            extra,
            problems,
            XargsTrust.from_env(),
        )
        requests.append(meta.request)
    assert not problems.counts
    return requests


def _policy(name: str, spec: InstanceSpec) -> EnginePolicy:
    context = PolicyContext((spec,), np.random.default_rng(0), HistoryOutputPredictor())  # the plugin's seed 0
    return ENGINE_PRESETS.build(name, ENGINE_PARAMS.get(name, {}), context)


def _predictor() -> LinearStepPredictor:
    return LinearStepPredictor(window=256, refit_every=64)  # the plugin's


def simulator_decision(name: str, spec: InstanceSpec, requests: list[Request]) -> EngineDecision:
    policy = _policy(name, spec)
    kernel = EventKernel()
    kernel.schedule(NOW_S, lambda _: None)
    kernel.run()
    noise = NoiseStream(np.random.default_rng(0), 0.0)
    belief = BeliefFeed(_predictor(), policy.observers)
    instance = SimInstance(
        0, spec, spec.num_kv_blocks or 1, _LinearTruth(), noise, policy, belief, kernel, lambda *_: None, 1
    )
    instance._busy = True  # all arrive while a step is in progress: one pass sees them together
    for request in requests:
        copy = dataclasses.replace(request)
        instance.enqueue(Seq(copy, 10, copy.arrival_s, 0, copy.prompt_tokens))
    instance._busy = False
    instance._start_step()
    admitted = [seq.request.id for seq in instance.running.values()]
    return EngineDecision(admitted, [seq.request.id for seq in instance.waiting])


def gateway_decision(name: str, spec: InstanceSpec, requests: list[Request]) -> EngineDecision:
    async def run() -> EngineDecision:
        clock = [0.0]
        queue = InstanceQueue(0, spec, _policy(name, spec), _predictor(), lambda: clock[0], max_queue=64)
        queue.window = 0  # hold admissions until every request waits
        seqs = []
        for request in requests:
            clock[0] = request.arrival_s  # the gateway stamps enqueue_s with its clock
            seqs.append(queue.enqueue(dataclasses.replace(request), request.prompt_tokens))
        clock[0] = NOW_S
        queue.window = spec.max_running
        queue.pump()
        admitted = [seq.request.id for seq in queue.running_seqs]
        return EngineDecision(admitted, [seq.request.id for seq in queue.waiting])

    return asyncio.run(run())


class _FrozenTime:
    """``time`` for the plugin module: the step happens at NOW_S."""

    @staticmethod
    def time() -> float:
        return NOW_S

    @staticmethod
    def perf_counter() -> float:
        return 0.0

    @staticmethod
    def sleep(seconds: float) -> None:
        return None


def plugin_decision(name: str, sched: FakeScheduler, monkeypatch: pytest.MonkeyPatch) -> EngineDecision:
    monkeypatch.setattr(plugin_engine, "time", _FrozenTime)
    config: Mapping[str, Any] = {"preset": name, "params": ENGINE_PARAMS.get(name, {}), "seed": 0}
    engine = SloschedEngine(sched, config=config_from_mapping(config))
    context = engine.before_schedule(sched)
    assert context is not None
    decision = context.decision
    engine.undo(sched, context)
    return EngineDecision([raw.request_id for raw in decision.admitted], [r.request_id for r in decision.held_waiting])


@pytest.mark.parametrize("name", ENGINE_PRESETS.names())
def test_engine_presets_decide_alike_in_simulator_gateway_and_plugin(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sched = _scheduler()
    spec = spec_from_scheduler(sched)
    requests = _requests(sched)
    sim = simulator_decision(name, spec, requests)
    gateway = gateway_decision(name, spec, requests)
    plugin = plugin_decision(name, sched, monkeypatch)
    assert sim.admitted, "the step admitted nothing: the comparison would be empty"
    if isinstance(_policy(name, spec).admission, SingleJobAdmission):
        # The gateway forms no batches, so an admission that follows the step's batch plan (RelServe's
        # single-job prefill) does not restrict it; the same order still decides who goes first.
        assert len(gateway.admitted) == MAX_RUNNING
        assert gateway.waiting == [rid for rid in sim.waiting if rid in gateway.waiting]
    else:
        assert gateway == sim
    if plugin.waiting or len(plugin.admitted) <= MAX_RUNNING:
        assert plugin == sim  # a gated policy: the plugin ran the pass itself
    else:  # ungated: the whole queue goes to vLLM in order, and vLLM's running cap takes its head
        assert plugin.admitted == sim.admitted + sim.waiting


# ---- router half ---------------------------------------------------------------------------------------
# Every registered router, built twice from the registry with the same seed, routes the same request
# sequence over idle instances with queues: once over the simulator's snapshots (``take_snapshot`` of real
# ``SimInstance``s, updated with ``note_routed`` as the cluster does between refreshes), once over the
# gateway's ``BackendView``s of ``InstanceQueue``s (the routed request joins the queue). Equivalent state,
# so the same chosen instance at every step, and the views agree on what routers read.

ROUTER_ENGINE = "chunked-fcfs"  # exports no engine state: PRISM estimates it from the views in both
ROUTER_INSTANCES = 4


def _router_specs() -> tuple[InstanceSpec, ...]:
    from tests.conftest import make_instance

    return tuple(make_instance(f"i{index}", num_kv_blocks=2000 + 500 * index) for index in range(ROUTER_INSTANCES))


def _router_requests() -> list[Request]:
    requests = []
    for number in range(24):
        prompt, predicted = 50 + (number * 137) % 900, 20.0 + (number * 53) % 300
        requests.append(
            Request(
                id=f"q{number}",
                job_id=f"j{number % 5}",
                stage="s",
                template="t",
                prompt_tokens=prompt,
                max_output_tokens=512,
                arrival_s=NOW_S + number * 0.25,
                job_arrival_s=NOW_S,
                deadline_s=NOW_S + 30.0,
                session_id=f"s{number % 3}" if number % 2 else None,
                predicted_output_tokens=predicted,
                tpot_slo_s=0.05 if number % 3 else None,
            )
        )
    return requests


def _router_context(specs: tuple[InstanceSpec, ...]) -> PolicyContext:
    return PolicyContext(specs, np.random.default_rng(7), HistoryOutputPredictor())


def simulator_router_views(specs: tuple[InstanceSpec, ...]) -> list[Any]:
    from slosched.sim.views import take_snapshot

    kernel = EventKernel()
    kernel.schedule(NOW_S, lambda _: None)
    kernel.run()
    views = []
    for index, spec in enumerate(specs):
        policy = _policy(ROUTER_ENGINE, spec)
        belief = BeliefFeed(_predictor(), policy.observers)
        noise = NoiseStream(np.random.default_rng(0), 0.0)
        instance = SimInstance(
            index, spec, spec.num_kv_blocks or 1, _LinearTruth(), noise, policy, belief, kernel, lambda *_: None, 1
        )
        views.append(take_snapshot(instance, has_exporters=False))
    return views


def router_decisions_in_simulator(name: str, specs: tuple[InstanceSpec, ...]) -> list[int]:
    router = ROUTERS.build(name, {}, _router_context(specs))
    views = simulator_router_views(specs)
    chosen = []
    for request in _router_requests():
        index = router.route(request, views, request.arrival_s)
        views[index].note_routed(dataclasses.replace(request))
        chosen.append(index)
    return chosen


def router_decisions_in_gateway(name: str, specs: tuple[InstanceSpec, ...]) -> list[int]:
    from types import SimpleNamespace

    from slosched.gateway.backends.backend import EngineMetrics
    from slosched.gateway.dispatch.views import BackendView

    async def run() -> list[int]:
        router = ROUTERS.build(name, {}, _router_context(specs))
        clock = [NOW_S]
        queues = []
        for index, spec in enumerate(specs):
            queue = InstanceQueue(index, spec, _policy(ROUTER_ENGINE, spec), _predictor(), lambda: clock[0], 64)
            queue.window = 0  # idle engines: routed requests wait, as in the simulated snapshots
            queues.append(queue)
        backends = [SimpleNamespace(metrics=EngineMetrics(), engine_state_max_age_s=5.0) for _ in specs]
        chosen = []
        for request in _router_requests():
            clock[0] = request.arrival_s
            views = [BackendView(b, q, clock[0]) for b, q in zip(backends, queues, strict=True)]  # type: ignore[arg-type]
            index = router.route(request, views, request.arrival_s)
            queues[index].enqueue(dataclasses.replace(request), request.prompt_tokens)
            chosen.append(index)
        return chosen

    return asyncio.run(run())


def _router_fields(view: Any) -> tuple[float, ...]:
    return (
        view.num_running,
        view.num_waiting,
        view.waiting_prefill_tokens,
        view.outstanding_decode_tokens,
        view.num_free_kv_blocks,
        view.num_kv_blocks,
    )


def test_router_views_agree_between_simulator_and_gateway() -> None:
    """Same requests queued at the same instances: every field routers read is the same in both."""
    from types import SimpleNamespace

    from slosched.gateway.backends.backend import EngineMetrics
    from slosched.gateway.dispatch.views import BackendView

    specs = _router_specs()
    sim_views = simulator_router_views(specs)
    requests = _router_requests()
    for number, request in enumerate(requests):
        sim_views[number % len(specs)].note_routed(request)

    async def gateway() -> list[tuple[float, ...]]:
        queues = [
            InstanceQueue(i, spec, _policy(ROUTER_ENGINE, spec), _predictor(), lambda: NOW_S, 64)
            for i, spec in enumerate(specs)
        ]
        for queue in queues:
            queue.window = 0
        for number, request in enumerate(requests):
            queues[number % len(specs)].enqueue(request, request.prompt_tokens)
        backend = SimpleNamespace(metrics=EngineMetrics(), engine_state_max_age_s=5.0)
        return [_router_fields(BackendView(backend, queue, NOW_S)) for queue in queues]  # type: ignore[arg-type]

    assert [_router_fields(view) for view in sim_views] == asyncio.run(gateway())


@pytest.mark.parametrize("name", sorted(set(ROUTERS.names()) - {"pipeline"}))  # pipeline: below
def test_routers_choose_alike_in_simulator_and_gateway(name: str) -> None:
    specs = _router_specs()
    assert router_decisions_in_simulator(name, specs) == router_decisions_in_gateway(name, specs)


def test_pipeline_profile_chooses_alike_in_simulator_and_gateway() -> None:
    specs = _router_specs()
    params = {
        "filters": ["kv-fits"],
        "picker": {"name": "max", "params": {"combine": "product"}},
        "scorers": [
            {"name": "least-tokens"},
            {"name": "session-affinity", "params": {"miss_score": 0.5}},
            {"name": "prism-load", "weight": 0.5},
        ],
    }
    original = ROUTERS.build

    def build(name: str, _params: Mapping[str, Any], context: PolicyContext) -> Any:
        return original("pipeline", params, context)

    sim = _with_builder(build, lambda: router_decisions_in_simulator("pipeline", specs))
    gateway = _with_builder(build, lambda: router_decisions_in_gateway("pipeline", specs))
    assert sim == gateway and len(set(sim)) > 1


def _with_builder(build: Any, action: Any) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ROUTERS, "build", build)
        return action()
