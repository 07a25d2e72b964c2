"""``slosched bench fidelity``: how closely the simulator predicts a real vLLM engine.

One vLLM CPU server (tiny random-weight model, eager mode, vLLM's default scheduler: FCFS with chunked
prefill, ``max_num_batched_tokens`` 2048, 128 sequences, prefix caching, 128-token blocks; slosched's
plugin loaded in ``bypass`` mode, which changes no decision and only writes every step's shape and time)
is profiled: ``slosched profile``'s sweep measures the front end, and the step costs are fitted to the
steps the engine itself ran during the sweeps and calibration replays (``bench.fidelity.calibration``
says why). Then each trace (chat, code mix, Text-to-SQL workflows, relQueries) at a light, medium and
heavy load (fractions of the capacity estimated from the first sweep) is replayed directly against it
(``fidelity.replay``) and simulated with the profile as the instance's truth and the matching engine
policy (``chunked-fcfs``, same limits, no noise). ``fidelity.compare`` turns both runs into the cases of
the JSON.

Profile and replays are interleaved and repeated (``ROUNDS``): each round sweeps the engine, replays the
calibration mix, then replays every case once; the simulation runs on one profile fitted to every round
and is compared with the mean of the case's replays. On this shared machine a core's speed moves by a
third between states that last seconds, independently on each core (``devtools.core_speed``, measured
after every run), so one 10-second replay, or one sweep, sees whichever states it happened to hit; rounds
spread both over the same stretch of time. And the plugin times a speed probe between steps, so each
replay is also simulated at the speed its engine's core had (``fidelity.speed``): the headline errors
compare each case's replays with those simulations; ``uncorrected`` gives them for one simulation at the
calibration's median speed. The full run writes ``docs/results/fidelity.md`` and keeps the
measured profile and the real runs in ``docs/results/fidelity/`` (the comparison can be recomputed from
them).
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slosched.bench.fidelity.calibration import (
    CalibratedEngine,
    Segment,
    StepTimings,
    calibration_traces,
    engine_profile,
)
from slosched.bench.fidelity.report import write_report
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobKind, JobSpec
from slosched.core.records import RunResult
from slosched.devtools import core_speed
from slosched.devtools.affinity import isolate_engine
from slosched.devtools.up import wait_ready
from slosched.devtools.vllm_launch import start_plugin_servers, stop_plugin_servers
from slosched.evaluation.formatting import fixed, print_figures
from slosched.evaluation.rows import row_finished
from slosched.evaluation.runners import progress_bar
from slosched.fidelity.compare import Case, compare_replays, summarize_cases
from slosched.fidelity.records_io import save_run
from slosched.fidelity.replay import replay
from slosched.fidelity.speed import replay_factor, scaled, step_model_ratio
from slosched.fidelity.traces import TRACES, capacity_jobs_per_s, make_trace
from slosched.metrics.summary import serving_of
from slosched.perf.profile_fit import MeasuredProfile
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from slosched.tuning.engine_profile import SweepDesign, SweepResult, fit_sweeps, run_sweep
from slosched.tuning.openai_client import OpenAIClient

LAYERS = 4
# Eager mode: torch.compile specializes on new step shapes during a run, and a fresh server meeting new
# shapes stalls for seconds now and then, which no step model can predict.
ENGINE_ARGS = ("--enforce-eager",)
LOADS = {"light": 0.25, "medium": 0.5, "heavy": 0.75}
ROUNDS = 3  # sweeps and replays of every case, interleaved (module docstring)
SPEED_PROBE_INTERVAL_S = 0.1  # the plugin's speed probe (``perf.speed_probe``: ~0.4 ms each)
MACHINE_PROBE_S = 20.0  # the machine's own speed, measured after the run (``devtools.core_speed``)
RESULTS_DIR = Path("docs/results/fidelity")
SEED = 11
# The server's scheduler limits (vLLM 0.32 CPU defaults for the OpenAI server) and KV block size.
MAX_BATCHED_TOKENS, MAX_NUM_SEQS, MAX_MODEL_LEN, BLOCK_SIZE = 2048, 128, 2048, 128
DESIGN = SweepDesign(
    prompt_lengths=(16, 64, 256, 512, 1024, 1536),  # single-request waves of each give the prefill rows
    concurrencies=(1, 4, 16, 48),
    output_lengths=(96,),  # long enough that even a 48-wide wave, admitted over ~0.5 s, decodes together
    repeats=1,  # per round: ROUNDS sweeps give each point ROUNDS waves
    max_batched_tokens=MAX_BATCHED_TOKENS,
)


def case_duration_s(quick: bool) -> float:
    return 10.0 if quick else 30.0


def simulate_trace(jobs: list[JobSpec], profile_path: Path) -> RunResult:
    """The trace on one simulated instance whose truth is the measured profile (vLLM's scheduler limits)."""
    spec = InstanceSpec(
        name="engine",
        gpu="A100-80G",
        model="Llama-3-8B",
        max_running=MAX_NUM_SEQS,
        max_batched_tokens=MAX_BATCHED_TOKENS,
        max_model_len=MAX_MODEL_LEN,
        block_size=BLOCK_SIZE,
        profile=str(profile_path),
    )
    options = SimOptions(noise_sigma=0.0)
    return simulate([spec], jobs, PolicyPair.parse("round-robin+chunked-fcfs"), SEED, options)


def plan_cases(profile: MeasuredProfile, quick: bool) -> list[tuple[str, str, list[JobSpec]]]:
    """(trace, load, jobs) for every trace and load; a case lasts about ``case_duration_s`` of arrivals."""
    model = profile.step_model()
    cases = []
    for index, trace in enumerate(TRACES):
        capacity = capacity_jobs_per_s(make_trace(trace, 200, 1.0, SEED + index), model)
        for load, fraction in LOADS.items():
            rate = fraction * capacity
            num_jobs = max(8, math.ceil(rate * case_duration_s(quick)))
            cases.append((trace, load, make_trace(trace, num_jobs, rate, SEED + index)))
    return cases


def run(quick: bool) -> dict[str, Any]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="slosched-fidelity-") as tmp:
        work = Path(tmp)
        timings = StepTimings(work / "engine-step-timings.jsonl")
        plugin = {  # stock vLLM scheduling, measured
            "bypass": True,
            "step_timing_file": str(timings.path),
            "speed_probe_interval_s": SPEED_PROBE_INTERVAL_S,
        }
        servers = start_plugin_servers([LAYERS], work, extra_config=plugin, server_args=ENGINE_ARGS)
        try:
            wait_ready([server.server for server in servers], timeout_s=900)
            startup_s = time.monotonic() - started
            # The server was started on core 0 (start_servers' first core): keep the whole engine there
            # and the HTTP side (API server, this client) off it (devtools.affinity says why).
            previous = isolate_engine(servers[0].server.process.pid, engine_cpu=0)
            try:
                figures = _measure(servers[0].url, timings, work, quick)
            finally:
                if previous is not None:
                    os.sched_setaffinity(0, previous)
        finally:
            stop_plugin_servers(servers)
    figures["machine"] = core_speed.measure(MACHINE_PROBE_S).to_json_dict()
    figures["server_start_s"] = round(startup_s, 1)
    figures["wall_s"] = round(time.monotonic() - started, 1)
    _print(figures)
    if not quick:
        write_report(figures)
    return figures


def _measure(url: str, timings: StepTimings, work: Path, quick: bool) -> dict[str, Any]:
    client = OpenAIClient(url, "tiny")
    return judge(_interleaved_rounds(client, timings, quick), client, work, quick)


def judge(rounds: Rounds, client: OpenAIClient, work: Path, quick: bool) -> dict[str, Any]:
    """The figures from what the rounds measured: the engine's profile and speed model, then every case
    simulated and compared (no server needed: ``client`` only names the engine in the profile)."""
    keep = RESULTS_DIR if not quick else work
    keep.mkdir(parents=True, exist_ok=True)
    engine = engine_profile(rounds.sweeps, rounds.calibration, client, DESIGN)
    profile_path = engine.profile.save(keep / "profile.json")
    cases: list[Case] = []
    uncorrected: list[Case] = []
    serving: list[dict[str, Any]] = []
    for trace, load, jobs in rounds.plan:
        reals = rounds.replays[(trace, load)]
        factors = [replay_factor(segment.probes, engine.speed) for segment in rounds.replay_segments[(trace, load)]]
        step_ratios = [
            step_model_ratio(segment.steps, engine.profile, factor)
            for segment, factor in zip(rounds.replay_segments[(trace, load)], factors, strict=True)
        ]
        sims = [simulate_trace(jobs, _speed_profile(engine, factor, work)) for factor in factors]
        at_reference = simulate_trace(jobs, profile_path)
        multi_call = any(job.kind is not JobKind.SINGLE for job in jobs)
        compared = compare_replays(trace, load, reals, sims, job_metrics=multi_call)
        cases += compared
        uncorrected += compare_replays(trace, load, reals, [at_reference], job_metrics=multi_call)
        serving.append(
            serving_pair(trace, load, reals, sims)
            | {"speed_factors": [round(f, 4) for f in factors], "step_model_ratios": [round(r, 4) for r in step_ratios]}
        )
        row_finished(f"{trace}/{load}", {"cases": [case.to_json_dict() for case in compared], "serving": serving[-1]})
        if not quick:
            for index, (real, sim) in enumerate(zip(reals, sims, strict=True)):
                save_run(keep / f"{trace}-{load}-{index + 1}.json", jobs, real, sim)
    summary = summarize_cases(cases)
    summary["uncorrected"] = {key: value for key, value in summarize_cases(uncorrected).items() if key != "cases"}
    summary["speed"] = engine.speed.to_json_dict()
    summary["serving"] = serving
    summary["rounds"] = ROUNDS
    summary["profile"] = {
        "params": engine.profile.to_json_dict()["params"],
        "residual_rel_std": engine.profile.residual_rel_std,
        "num_steps": engine.profile.num_steps,
    }
    return summary


def _speed_profile(engine: CalibratedEngine, factor: float, work: Path) -> Path:
    """The profile's file with its step costs at ``factor`` (``fidelity.speed``)."""
    return scaled(engine.profile, factor).save(work / f"profile-x{factor:.4f}.json")


@dataclass(slots=True)
class Rounds:
    """What the interleaved rounds measured: the compared cases, their replays and what the engine wrote during
    each (its steps and speed probes), the sweeps, and the engine's steps and probes during the sweeps and
    calibration replays."""

    plan: list[tuple[str, str, list[JobSpec]]] = field(default_factory=list)
    replays: dict[tuple[str, str], list[RunResult]] = field(default_factory=dict)
    replay_segments: dict[tuple[str, str], list[Segment]] = field(default_factory=dict)
    sweeps: list[SweepResult] = field(default_factory=list)
    calibration: Segment = field(default_factory=Segment)


def _interleaved_rounds(client: OpenAIClient, timings: StepTimings, quick: bool) -> Rounds:
    """``ROUNDS`` rounds of a sweep, the calibration replays (``bench.fidelity.calibration``), then one
    replay of every compared case."""
    rounds = Rounds()
    per_round = 2 + len(TRACES) * len(LOADS)
    with progress_bar() as progress:
        bar = progress.add_task("fidelity", total=ROUNDS * per_round)
        for index in range(ROUNDS):
            progress.update(bar, description=f"round {index + 1}/{ROUNDS}: sweep")
            timings.skip()  # anything since the last read (start-up, warm-up): never fitted
            rounds.sweeps.append(asyncio.run(run_sweep(client, DESIGN)))
            rounds.calibration.extend(timings.segment())
            progress.advance(bar)
            if index == 0:  # the rates only shape the traces: the first sweep sets them for every round
                first_fit = fit_sweeps(rounds.sweeps, client, DESIGN)
                rounds.plan = plan_cases(first_fit, quick)
            progress.update(bar, description=f"round {index + 1}/{ROUNDS}: calibration mix")
            for jobs in calibration_traces(first_fit, case_duration_s(quick) / 2, index):
                replay(client.base_url, jobs)
            rounds.calibration.extend(timings.segment())
            progress.advance(bar)
            for trace, load, jobs in rounds.plan:
                progress.update(bar, description=f"round {index + 1}/{ROUNDS}: {trace}/{load}")
                rounds.replays.setdefault((trace, load), []).append(replay(client.base_url, jobs))
                rounds.replay_segments.setdefault((trace, load), []).append(timings.segment())
                progress.advance(bar)
    return rounds


def serving_pair(trace: str, load: str, reals: Sequence[RunResult], sims: Sequence[RunResult]) -> dict[str, Any]:
    """One case in vLLM's serving terms, the real runs (their streamed first tokens) and the simulated ones
    through the same function (``metrics.summary.serving_of``, what ``compare`` reports); each figure the
    mean over the runs."""
    return {"trace": trace, "load": load, "real": _mean_serving(reals), "sim": _mean_serving(sims)}


def _mean_serving(runs: Sequence[RunResult]) -> dict[str, Any]:
    figures = [serving_of(run).to_json_dict() for run in runs]
    return {key: _mean_figure([each[key] for each in figures]) for key in figures[0]}


def _mean_figure(values: list[Any]) -> Any:
    """The mean of numbers (an int stays an int when every replay agrees), else the first value."""
    if all(isinstance(value, int | float) and not isinstance(value, bool) for value in values):
        mean = sum(values) / len(values)
        return values[0] if all(value == values[0] for value in values) else mean
    return values[0]


def serving_text(pair: dict[str, Any]) -> str:
    """The compact view: output tokens/s and p99 TTFT / TPOT in ms, real and simulated."""
    real, sim = pair["real"], pair["sim"]
    shown = (("tok/s", "output_throughput"), ("p99 TTFT ms", "p99_ttft_ms"), ("p99 TPOT ms", "p99_tpot_ms"))
    text = "  ".join(f"{name} real {fixed(real[key], 1)} sim {fixed(sim[key], 1)}" for name, key in shown)
    ratios = [ratio for ratio in pair.get("step_model_ratios", []) if math.isfinite(ratio)]
    return text + (f"  engine time / model {statistics.mean(ratios):.2f}" if ratios else "")


def _print(figures: dict[str, Any]) -> None:
    flat: dict[str, Any] = {}
    for case in figures["cases"]:
        if case["metric"] in ("request_latency_mean_s", "request_latency_p90_s", "job_latency_mean_s", "ttft_mean_s"):
            flat[f"{case['trace']}/{case['load']}/{case['metric']}"] = (
                f"real {case['real']:.3f}  sim {case['sim']:.3f}  ({case['error_pct']:+.1f}%)"
            )
    for pair in figures.get("serving", []):
        flat[f"{pair['trace']}/{pair['load']}/serving"] = serving_text(pair)
    for key in ("mean_abs_error_pct", "p90_abs_error_pct", "all_abs_error_pct"):
        flat[key] = figures[key]
        flat[f"uncorrected {key}"] = figures["uncorrected"][key]
    flat["speed model"] = figures["speed"]
    for key in ("server_start_s", "wall_s"):
        flat[key] = figures[key]
    print_figures("fidelity: simulator vs a real vLLM CPU server", flat)
