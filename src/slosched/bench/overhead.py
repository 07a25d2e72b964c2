"""``slosched bench overhead``: median wall time of one scheduling decision on synthetic views.

* routers over 16 instances (``prism`` reads each engine's exported state; the baselines their counters);
* one engine step plan with 512 waiting and 256 running requests (H100, Llama-3-8B, max 512 running,
  8192 batched tokens), for ``lens`` (its model fitted beforehand on 2000 synthetic steps) and the
  static presets.

Each decision is timed alone with ``time.perf_counter`` and the median over many is reported in
microseconds (the paper: about 1 ms per routing decision, under 1 ms per LENS step; goals here: <= 50 us
and <= 200 us). JSON: ``prism_us``, ``lens_us`` and ``router_<name>_us`` / ``engine_<name>_us``.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from slosched.bench.base import Benchmark
from slosched.core.belief import StepPredictor
from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.core.views import StepObservation
from slosched.evaluation.formatting import print_figures
from slosched.perf.linear import LinearStepPredictor
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.perf.roofline import RooflineModel
from slosched.policies.cluster.base import ROUTERS, Router
from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.batching.lens import LensBatching
from slosched.policies.registry import PolicyContext
from slosched.sim.views import InstanceSnapshot

ROUTER_NAMES = ("prism", "round-robin", "least-loaded", "session-affinity", "latency-lagging", "weighted-static")
ENGINE_NAMES = ("lens", "chunked-fcfs", "fcfs")


@dataclass(slots=True)
class FakeSeq:
    """A SeqView with fixed progress."""

    request: Request
    num_prompt_tokens: int
    num_computed_tokens: int
    num_output_tokens: int
    enqueue_s: float
    first_token_s: float | None = None
    num_preemptions: int = 0


@dataclass(slots=True)
class FakeEngine:
    """An EngineView over fixed queues (no simulator behind it)."""

    spec: InstanceSpec
    running_seqs: list[FakeSeq]
    waiting: list[FakeSeq]
    now_s: float = 100.0
    num_free_kv_blocks: int = 10_000
    num_kv_blocks: int = 25_000
    step_predictor: StepPredictor = field(default_factory=LinearStepPredictor)

    @property
    def num_running(self) -> int:
        return len(self.running_seqs)

    def cached_prefix_tokens(self, request: Request) -> int:
        return 0


def _request(rng: np.random.Generator, index: int, now_s: float) -> Request:
    request = Request(
        id=f"r{index}",
        job_id=f"j{index}",
        stage="call",
        template="chat",
        prompt_tokens=int(rng.integers(100, 2000)),
        max_output_tokens=1024,
        arrival_s=now_s - float(rng.uniform(0, 2)),
        job_arrival_s=0.0,
        session_id=f"s{index % 50}",
        ttft_slo_s=1.0,
        tpot_slo_s=0.05,
    )
    request.predicted_output_tokens = 250.0
    return request


def _engine(rng: np.random.Generator) -> FakeEngine:
    spec = InstanceSpec(name="h100", gpu="H100", model="Llama-3-8B", stack="vidur", max_running=512)
    running = []
    for index in range(256):
        request = _request(rng, index, 100.0)
        running.append(FakeSeq(request, request.prompt_tokens, request.prompt_tokens, int(rng.integers(1, 300)), 99.0))
    waiting = []
    for index in range(256, 256 + 512):
        request = _request(rng, index, 100.0)
        waiting.append(FakeSeq(request, request.prompt_tokens, 0, 0, request.arrival_s))
    return FakeEngine(spec, running, waiting)


def _train(engine: EnginePolicy, rng: np.random.Generator) -> None:
    """Fit LENS's model on synthetic steps of the H100 truth, so the timed plan searches realistic numbers."""
    batching = engine.batching
    if not isinstance(batching, LensBatching):
        return
    truth = RooflineModel.build("H100", "Llama-3-8B", 1, "vidur")
    for _ in range(2000):
        decodes = int(rng.integers(1, 256))
        prefill = int(rng.choice([0, int(rng.integers(1, 8192))]))
        context = decodes * int(rng.integers(200, 3000))
        seconds = truth.step_time_s(prefill, 0, decodes, context)
        batching.observe_step(StepObservation(prefill, 0, decodes, context, (seconds,)))


def _median_us(decide: Callable[[], Any], repeats: int) -> float:
    for _ in range(20):
        decide()
    samples = []
    clock = time.perf_counter
    for _ in range(repeats):
        start = clock()
        decide()
        samples.append(clock() - start)
    return 1e6 * statistics.median(samples)


def _route_next(router: Router, requests: Iterator[Request], views: list[InstanceSnapshot]) -> int:
    return router.route(next(requests), views, 100.0)


def _views(rng: np.random.Generator, lens_state: dict[str, float]) -> list[InstanceSnapshot]:
    spec = InstanceSpec(name="h100", gpu="H100", model="Llama-3-8B", stack="vidur")
    views = []
    for index in range(16):
        state = dict(lens_state)
        state["pending_prefill_tokens"] = float(rng.integers(0, 20_000))
        state["latency_s"] = float(rng.uniform(0.01, 0.05))
        views.append(
            InstanceSnapshot(
                index=index,
                spec=spec,
                snapshot_s=100.0,
                num_running=int(rng.integers(0, 256)),
                num_waiting=int(rng.integers(0, 64)),
                waiting_prefill_tokens=int(rng.integers(0, 20_000)),
                outstanding_decode_tokens=float(rng.integers(0, 50_000)),
                num_free_kv_blocks=int(rng.integers(0, 25_000)),
                num_kv_blocks=25_000,
                step_predictor=LinearStepPredictor(),
                exported=state,
            )
        )
    return views


def run(quick: bool) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    repeats = 500 if quick else 3000
    engine_view = _engine(rng)
    context = PolicyContext((engine_view.spec,) * 16, np.random.default_rng(1), HistoryOutputPredictor())
    figures: dict[str, Any] = {}
    lens_state: dict[str, float] = {}
    for name in ENGINE_NAMES:
        engine = ENGINE_PRESETS.build(name, {}, context)
        _train(engine, rng)
        figures[f"engine_{name}_us"] = _median_us(partial(engine.batching.plan, engine_view), repeats)
        if name == "lens":
            lens_state = dict(engine.export_state(engine_view))
            figures["lens_export_us"] = _median_us(partial(engine.export_state, engine_view), repeats)
    views = _views(rng, lens_state)
    requests = [_request(rng, index, 100.0) for index in range(64)]
    for name in ROUTER_NAMES:
        router = ROUTERS.build(name, {}, context)
        cursor = itertools.cycle(requests)
        figures[f"router_{name}_us"] = _median_us(partial(_route_next, router, cursor, views), repeats)
    figures = {"prism_us": figures["router_prism_us"], "lens_us": figures["engine_lens_us"], **figures}
    print_figures("overhead (median us per decision)", figures)
    return figures


BENCHMARK = Benchmark(
    name="overhead",
    summary="median wall time of one scheduling decision on synthetic views",
    run=run,
)
