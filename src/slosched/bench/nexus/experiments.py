"""The experiments of ``slosched bench nexus`` that need the simulator's insides: zero-config (an
unprofiled instance joins a loaded cluster) and the step-time model's accuracy per hardware.

Both build the simulation the way ``sim.runner.simulate`` does, but keep the engine objects so they can
read the LENS model (``StructuralStepModel``) while the run goes on, through events scheduled on the
simulator's own clock. Nothing here feeds back into a decision: these are measurements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from slosched.bench.nexus.setup import MODEL, OPTIONS, STACK, WORKLOADS
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.records import RunResult
from slosched.core.views import StepObservation
from slosched.evaluation.throughput import saturation_throughput
from slosched.evaluation.workbench import WARMUP_PREFIX, Candidate, Workbench, measured_only
from slosched.metrics.summary import serving_of
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.perf.roofline import RooflineModel
from slosched.perf.structural import StructuralParams, observation_rows, predict, r_squared
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.batching.lens import LensBatching
from slosched.policies.job.base import JOB_POLICIES
from slosched.policies.registry import PolicyContext
from slosched.sim.cluster import ClusterSim
from slosched.sim.models import InstanceModels
from slosched.workloads.generators import make_workload

# Shapes the zero-config probe compares model and truth on: (prefill, prefill ctx, decodes, decode ctx).
_PROBE_SHAPES = [(0, 0, b, b * 1500) for b in (1, 8, 32, 128)] + [(s, 0, 16, 16 * 1500) for s in (256, 1024, 4096)]


@dataclass(slots=True)
class _Recorder:
    """A StepObserver that keeps every observation with the simulated time it was delivered at."""

    sim: ClusterSim | None = None
    observations: list[tuple[float, StepObservation]] | None = None

    def observe_step(self, observation: StepObservation) -> None:
        assert self.sim is not None and self.observations is not None
        self.observations.append((self.sim.kernel.now_s, observation))


def build_sim(
    instances: Sequence[InstanceSpec], router: str, engine: str, seed: int, recorder: _Recorder | None = None
) -> tuple[ClusterSim, list[EnginePolicy]]:
    """A ClusterSim wired like ``simulate`` (same seeds), with its engines returned; ``recorder`` joins
    every engine's observers (before the simulator copies the observer lists)."""
    models = [InstanceModels.build(spec) for spec in instances]
    policy_rng, sim_seed = np.random.SeedSequence(seed).spawn(2)
    context = PolicyContext(tuple(instances), np.random.default_rng(policy_rng), HistoryOutputPredictor())
    engines = [ENGINE_PRESETS.build(engine, {}, context) for _ in models]
    if recorder is not None:
        for policy in engines:
            policy.observers.append(recorder)
    job_layer = JOB_POLICIES.build("deadline", {}, context)
    router_policy = ROUTERS.build(router, {}, context)
    sim = ClusterSim(
        models,
        engines,
        router_policy,
        job_layer,
        context.output_predictor,
        OPTIONS,
        seed=int(sim_seed.generate_state(1)[0]),
        policy_name=f"{router}+{engine}",
    )
    return sim, engines


def lens_of(engine: EnginePolicy) -> LensBatching:
    batching = engine.batching
    assert isinstance(batching, LensBatching)
    return batching


def probe_error(params: StructuralParams, truth: RooflineModel) -> float:
    """Median relative error of the model over the fixed probe shapes."""
    errors = []
    for p, pc, d, dc in _PROBE_SHAPES:
        pairs = p * (pc + 0.5 * (p + 1)) if p else 0.0
        predicted = predict(params, d + (1 if p else 0), p + d, dc, pairs)
        errors.append(abs(predicted / truth.step_time_s(p, pc, d, dc) - 1.0))
    return float(np.median(errors))


def zero_config(quick: bool) -> dict[str, Any]:
    """4x H100 with one joining at ``join_s``: its model error and the cluster's latency over time."""
    join_s = 10.0 if quick else 20.0
    end_s = join_s + (20.0 if quick else 60.0)
    specs = tuple(InstanceSpec(name=f"h100-{i}", gpu="H100", model=MODEL, stack=STACK) for i in range(4))
    workload = next(w for w in WORKLOADS if w.label == "sharegpt")
    # Loaded before the join, relieved after it: 80% of the burst saturation of 3 engines (this experiment
    # measures how fast the newcomer's model converges, not a capacity, so a burst estimate is enough).
    probe_jobs = workload.jobs(1.0, 1500, seed=7)
    rate = 0.8 * saturation_throughput(specs[:3], probe_jobs, "round-robin+chunked-fcfs")
    jobs = workload.jobs(rate, int(rate * end_s), seed=3)
    specs = (*specs[:3], replace(specs[3], available_from_s=join_s))
    sim, engines = build_sim(specs, "prism", "lens", seed=1)
    newcomer = lens_of(engines[3]).model
    truth = RooflineModel.build("H100", MODEL, 1, STACK)
    errors: list[tuple[float, float]] = []

    def probe(_: object) -> None:
        errors.append((sim.kernel.now_s - join_s, probe_error(newcomer.params, truth)))
        if sim.kernel.now_s + 0.5 <= end_s:
            sim.kernel.schedule(sim.kernel.now_s + 0.5, probe)

    sim.kernel.schedule(join_s, probe)
    result = sim.run(jobs)
    converge = _converged_after(errors, 0.10)
    return {
        "converge_s": converge,
        "error_curve": errors,
        "latency_curve": _latency_curve(result, jobs, specs[3].name, end_s),
        "join_s": join_s,
        "rate": rate,
    }


def _converged_after(errors: list[tuple[float, float]], threshold: float) -> float:
    """Seconds after the join from which the probe error stays <= threshold (inf if it never does)."""
    converged = math.inf
    for since, error in reversed(errors):
        if error > threshold:
            break
        converged = since
    return max(converged, 0.0)


def _latency_curve(
    result: RunResult, jobs: Sequence[JobSpec], newcomer: str, end_s: float
) -> list[tuple[float, float, float]]:
    """(window start, mean latency of all requests, of the newcomer's) per 2 s window of arrival."""
    rows = []
    records = [r for r in result.requests if r.outcome.value == "completed"]
    for start in np.arange(0.0, end_s, 2.0):
        window = [r for r in records if start <= r.arrival_s < start + 2.0]
        mine = [r.latency_s for r in window if r.instance == newcomer]
        rows.append(
            (
                float(start),
                float(np.mean([r.latency_s for r in window])) if window else math.nan,
                float(np.mean(mine)) if mine else math.nan,
            )
        )
    return rows


def model_accuracy(hardware: tuple[str, int], quick: bool) -> dict[str, Any]:
    """R^2 of the LENS model against the noise-free truth, on steps the instance ran after the
    snapshot of the model taken halfway through (held out: the snapshot never saw them)."""
    gpu, tp = hardware
    spec = InstanceSpec(name=f"{gpu}-tp{tp}", gpu=gpu, model=MODEL, tp=tp, stack=STACK)
    mix = {"components": {"sharegpt": 0.5, "summarization": 0.25, "flowgpt": 0.25}}
    probe_jobs = make_workload("mix", {"process": "poisson", "rate": 1.0}, 400, mix, seed=5)
    rate = 0.6 * saturation_throughput((spec,), probe_jobs, "round-robin+chunked-fcfs")
    duration = 20.0 if quick else 120.0
    jobs = make_workload("mix", {"process": "poisson", "rate": rate}, max(int(rate * duration), 120), mix, seed=6)
    recorder = _Recorder(observations=[])
    sim, engines = build_sim((spec,), "round-robin", "lens", seed=1, recorder=recorder)
    recorder.sim = sim
    model = lens_of(engines[0]).model
    snapshot: list[tuple[float, StructuralParams]] = []
    half = jobs[len(jobs) // 2].arrival_s
    sim.kernel.schedule(half, lambda _: snapshot.append((sim.kernel.now_s, model.params)))
    sim.run(jobs)
    truth = RooflineModel.build(gpu, MODEL, tp, STACK)
    taken_s, params = snapshot[0]
    predicted, actual = [], []
    assert recorder.observations is not None
    for delivered_s, obs in recorder.observations:
        if delivered_s <= taken_s:
            continue
        for b, s, c, a, _ in observation_rows(obs):
            predicted.append(predict(params, b, s, c, a))
            decode_ctx = int(c)
            actual.append(
                truth.step_time_s(obs.num_prefill_tokens, obs.prefill_context_tokens, obs.num_decode_seqs, decode_ctx)
            )
    pred, true = np.asarray(predicted), np.asarray(actual)
    return {
        "hardware": f"{gpu}" + (f" TP{tp}" if tp > 1 else ""),
        "r2": r_squared(pred, true),
        "median_rel_error": float(np.median(np.abs(pred / true - 1.0))) if len(true) else math.nan,
        "num_steps": len(true),
        "shape_fits": model.num_shape_fits,
        "linear_fits": model.num_linear_fits,
        "points": list(
            zip(true[:: max(len(true) // 400, 1)].tolist(), pred[:: max(len(true) // 400, 1)].tolist(), strict=True)
        ),
    }


HARDWARE = (("H100", 1), ("A100-80G", 1), ("A6000", 2), ("A6000", 1))


def miss_breakdown(bench: Workbench, candidates: Sequence[Candidate], rate: float, seed: int = 1) -> dict[str, Any]:
    """Why a policy loses under overload: per candidate, its measured calls, TTFT and TPOT misses, calls
    meeting both, and each instance's share of the calls, in one run at ``rate`` (warm-up left out)."""
    out: dict[str, Any] = {}
    for candidate in candidates:
        jobs, history = bench.workload(rate, seed)
        result = bench.run_fn(candidate, bench.instances, jobs, bench.options, seed, history)
        calls = [r for r in result.requests if not r.job_id.startswith(WARMUP_PREFIX)]
        shares: dict[str, float] = {}
        for record in calls:
            shares[record.instance] = shares.get(record.instance, 0.0) + 1.0 / max(len(calls), 1)
        out[candidate.label] = {
            "calls": len(calls),
            "ttft_missed": sum(1 for r in calls if r.ttft_slo_s is not None and r.ttft_s > r.ttft_slo_s),
            "tpot_missed": sum(1 for r in calls if r.tpot_slo_s is not None and r.tpot_s > r.tpot_slo_s),
            "met": sum(1 for r in calls if r.token_slos_met),
            "shares": shares,
            "serving": serving_of(measured_only(result)).to_json_dict(),
        }
    return {"rate": rate, "seed": seed, "results": out}
