"""``slosched bench fidelity``: how closely the simulator predicts a real vLLM engine.

One vLLM CPU server (tiny random-weight model, eager mode, vLLM's default scheduler: FCFS with chunked
prefill, ``max_num_batched_tokens`` 2048, 128 sequences, prefix caching, 128-token blocks) is profiled with
``slosched profile``'s sweep; then each trace (chat, code mix, Text-to-SQL workflows, relQueries) at a
light, medium and heavy load (fractions of the capacity estimated from the profile) is replayed directly
against it (``fidelity.replay``) and simulated with the profile as the instance's truth and the matching
engine policy (``chunked-fcfs``, same limits, no noise). ``fidelity.compare`` turns both runs into the
cases of the JSON. The full run writes ``docs/results/fidelity.md`` and keeps the measured profile and
the real runs in ``docs/results/fidelity/`` (the comparison can be recomputed from them).
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from slosched.bench.fidelity.report import write_report
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobKind, JobSpec
from slosched.core.records import RunResult
from slosched.devtools.affinity import isolate_engine
from slosched.devtools.up import start_servers, stop_servers, wait_ready
from slosched.evaluation.formatting import fixed, print_figures
from slosched.evaluation.rows import row_finished
from slosched.fidelity.compare import Case, compare_runs, summarize_cases
from slosched.fidelity.records_io import save_run
from slosched.fidelity.replay import replay
from slosched.fidelity.traces import TRACES, capacity_jobs_per_s, make_trace
from slosched.metrics.summary import serving_of
from slosched.perf.profile_fit import MeasuredProfile
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from slosched.tuning.engine_profile import SweepDesign, profile_endpoint
from slosched.tuning.openai_client import OpenAIClient

LAYERS = 4
# Eager mode: torch.compile specializes on new step shapes during a run, and a fresh server meeting new
# shapes stalls for seconds now and then, which no step model can predict.
ENGINE_ARGS = ("--enforce-eager",)
LOADS = {"light": 0.25, "medium": 0.5, "heavy": 0.75}
RESULTS_DIR = Path("docs/results/fidelity")
SEED = 11
# The server's scheduler limits (vLLM 0.32 CPU defaults for the OpenAI server) and KV block size.
MAX_BATCHED_TOKENS, MAX_NUM_SEQS, MAX_MODEL_LEN, BLOCK_SIZE = 2048, 128, 2048, 128
DESIGN = SweepDesign(
    prompt_lengths=(16, 64, 256, 512, 1024, 1536),  # single-request waves of each give the prefill rows
    concurrencies=(1, 4, 16, 48),
    output_lengths=(96,),  # long enough that even a 48-wide wave, admitted over ~0.5 s, decodes together
    repeats=2,
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
        servers = start_servers([LAYERS], work, priority=False, extra_args=ENGINE_ARGS)
        try:
            wait_ready(servers, timeout_s=900)
            startup_s = time.monotonic() - started
            # The server was started on core 0 (start_servers' first core): keep the whole engine there
            # and the HTTP side (API server, this client) off it (devtools.affinity says why).
            previous = isolate_engine(servers[0].process.pid, engine_cpu=0)
            try:
                figures = _measure(servers[0].url, work, quick)
            finally:
                if previous is not None:
                    os.sched_setaffinity(0, previous)
        finally:
            stop_servers(servers)
    figures["server_start_s"] = round(startup_s, 1)
    figures["wall_s"] = round(time.monotonic() - started, 1)
    _print(figures)
    if not quick:
        write_report(figures)
    return figures


def _measure(url: str, work: Path, quick: bool) -> dict[str, Any]:
    profile = profile_endpoint(OpenAIClient(url, "tiny"), DESIGN)
    keep = RESULTS_DIR if not quick else work
    keep.mkdir(parents=True, exist_ok=True)
    profile_path = profile.save(keep / "profile.json")
    cases: list[Case] = []
    serving: list[dict[str, Any]] = []
    for trace, load, jobs in plan_cases(profile, quick):
        real = replay(url, jobs)
        sim = simulate_trace(jobs, profile_path)
        multi_call = any(job.kind is not JobKind.SINGLE for job in jobs)
        compared = compare_runs(trace, load, real, sim, job_metrics=multi_call)
        cases += compared
        serving.append(serving_pair(trace, load, real, sim))
        row_finished(f"{trace}/{load}", {"cases": [case.to_json_dict() for case in compared], "serving": serving[-1]})
        if not quick:
            save_run(keep / f"{trace}-{load}.json", jobs, real, sim)
    summary = summarize_cases(cases)
    summary["serving"] = serving
    summary["profile"] = {
        "params": profile.to_json_dict()["params"],
        "residual_rel_std": profile.residual_rel_std,
        "num_steps": profile.num_steps,
    }
    return summary


def serving_pair(trace: str, load: str, real: RunResult, sim: RunResult) -> dict[str, Any]:
    """One case in vLLM's serving terms, the real run (its streamed first tokens) and the simulated one
    through the same function (``metrics.summary.serving_of``, what ``compare`` reports)."""
    real_figures, sim_figures = serving_of(real).to_json_dict(), serving_of(sim).to_json_dict()
    return {"trace": trace, "load": load, "real": real_figures, "sim": sim_figures}


def serving_text(pair: dict[str, Any]) -> str:
    """The compact view: output tokens/s and p99 TTFT / TPOT in ms, real and simulated."""
    real, sim = pair["real"], pair["sim"]
    shown = (("tok/s", "output_throughput"), ("p99 TTFT ms", "p99_ttft_ms"), ("p99 TPOT ms", "p99_tpot_ms"))
    return "  ".join(f"{name} real {fixed(real[key], 1)} sim {fixed(sim[key], 1)}" for name, key in shown)


def _print(figures: dict[str, Any]) -> None:
    flat: dict[str, Any] = {}
    for case in figures["cases"]:
        if case["metric"] in ("request_latency_mean_s", "request_latency_p90_s", "job_latency_mean_s", "ttft_mean_s"):
            flat[f"{case['trace']}/{case['load']}/{case['metric']}"] = (
                f"real {case['real']:.3f}  sim {case['sim']:.3f}  ({case['error_pct']:+.1f}%)"
            )
    for pair in figures.get("serving", []):
        flat[f"{pair['trace']}/{pair['load']}/serving"] = serving_text(pair)
    for key in ("mean_abs_error_pct", "p90_abs_error_pct", "all_abs_error_pct", "server_start_s", "wall_s"):
        flat[key] = figures[key]
    print_figures("fidelity: simulator vs a real vLLM CPU server", flat)
