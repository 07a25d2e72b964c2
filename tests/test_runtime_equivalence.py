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
from slosched.perf.linear import LinearStepPredictor
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.relserve_arranger import SingleJobAdmission
from slosched.policies.registry import PolicyContext
from slosched.serve.queues import InstanceQueue
from slosched.sim.belief import BeliefFeed
from slosched.sim.instance import SimInstance
from slosched.sim.kernel import EventKernel
from slosched.sim.noise import NoiseStream
from slosched.sim.seq import Seq
from slosched.vllm_ext import engine as plugin_engine
from slosched.vllm_ext.config import config_from_mapping
from slosched.vllm_ext.engine import SloschedEngine, spec_from_scheduler
from slosched.vllm_ext.metadata import MetadataProblems, request_metadata
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
            raw.request_id, raw.arrival_time, raw.num_prompt_tokens, raw.max_tokens, raw.priority, extra, problems
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
