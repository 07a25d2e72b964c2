"""``slosched bench sim-speed``: simulated requests per wall-clock second.

Azure 2023 conversation lengths on the demo cluster (2x A100 + 2x A6000, Llama-3-8B), chunked prefill,
least-loaded routing, noise on, at 80% of the cluster's measured saturation throughput; the wall time
includes computing every metric. ``fast_forward_speedup`` is the wall time of the same run stepping
every iteration divided by the fast-forwarded one; ``identical`` checks both gave the same records.

Speed work (issue 17 item 7), measured on the shared 2-core machine, base and new runs interleaved:
full 11,700 -> 14,000 requests/s (x1.20), ``--quick`` 10,800 -> 14,400 (x1.33), records bit-identical.
Wins: the cyclic GC paused during a run (it took ~15% of a run's CPU and freed nothing), one-stage jobs
set up without building their stage graph, arrivals heapified at once, cached decode-step bases and
cheaper no-contention latencies, slice sums for KV growth, positional construction of per-request records.
Round 2 (x1.06-1.10 over round 1, interleaved): the sorted arrivals kept out of the event heap as a
merged stream (x1.06: a 40,000-entry heap cost cache misses on every pop and push), one-stage jobs
sharing their unchanging stage graph (x1.02: the run keeps every job state, so less memory is touched),
request columns of ``summarize`` in one row-wise pass (55 -> 23 ms). Memory, not instructions, decides
much of what is left: deferring belief observations until a predictor reads them, or making job states
at arrival instead of up front, each made the run 7-10% slower (more live or interleaved memory).
What remains is flat (py-spy, no function above ~6%): step forming and decode-run setup, routing and
request setup, refit-tick observations (~8%, mostly freeing old observations), per-request records.
Round 3: the hot modules compiled with mypyc (``slosched native build``, ``slosched/native``), x1.5 on the
same sources. The bench runs the pure-Python modules too, in a child process with ``SLOSCHED_NATIVE=0``:
``pure_python_requests_per_second`` and ``native_speedup`` keep the measurement that justifies
compiling, and ``identical_to_pure_python`` checks both gave the same records (a digest of every one).
Round 4 (issue 26: the ``vllm-v1`` truth costs more per step; main vs this round's sources, each with its
own native build, interleaved in alternating order, load average 5-9 on the shared 2-core machine, so wall
figures swing by +-30%): ``--quick`` 5,342-6,829 -> 6,706-8,785 req/s (median x1.40 over 3 pairs), the full
form 6,878 -> 11,823 (one pair, x1.72); the process CPU time of ``measure``'s run, which the other work
disturbs less, x1.24-1.26 (10,000 requests, 4 pairs) and x1.27-1.35 (40,000, 4 pairs); records identical
(the same digests; ``tests.native._identity_probe`` quick and full unchanged). py-spy showed ~9% of a
compiled run in ``__init__``s the dataclasses module generates: mypyc compiles a dataclass's own methods but
not the generated ones, so the compiled modules' hot dataclasses (``StepWork``, ``Seq``, ``JobState``, the
pending feeds) became plain slotted classes (x1.06 alone). Then: a refit tick's belief observations go to
``LinearStepPredictor.observe_steps`` as tuples in one call (a frozen ``StepObservation`` costs several
times a plain object: ``object.__setattr__`` per field; ~3 per request); decode runs are timed and summed in
one typed loop; ``step_time_s`` looks its decode KV term up by batch size (vllm-v1's occupancy rule added a
call, a max and a division to every mixed step); no-contention latencies reuse the prefill step of a prompt
alone (4 in 5 repeat a prompt; 1.5 -> 0.8 us a cached call); the output-length predictor computes its ratio
once. Not done: the frozen ``core`` dataclasses a run builds per request (``JobView``, ``PrefixId``,
``StageDecision``) cost the same way, and setting their slots through the member descriptors measured only
~35% cheaper (it would patch public classes); compiling ``perf/`` would reject the numpy numbers the gateway
and third-party policies may pass (``native/modules.py``); arrivals cut ~45% of the decode steps a run times
in advance, but timing runs in chunks adds events for an estimated 2-3%.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from slosched.bench.base import Benchmark
from slosched.core.instance import InstanceSpec
from slosched.core.records import RunResult
from slosched.evaluation.formatting import print_figures
from slosched.evaluation.throughput import saturation_throughput
from slosched.metrics.summary import summarize
from slosched.native import is_compiled, native_status
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from slosched.workloads.generators import make_workload

POLICY = "least-loaded+chunked-fcfs"
LOAD = 0.8
ResultT = TypeVar("ResultT")


def demo_cluster() -> tuple[InstanceSpec, ...]:
    """2x A100-80G + 2x A6000 serving Llama-3-8B (the demo's heterogeneous cluster)."""
    base = InstanceSpec(name="", gpu="A100-80G", model="Llama-3-8B", max_running=256, max_batched_tokens=2048)
    return (
        replace(base, name="a100-0"),
        replace(base, name="a100-1"),
        replace(base, name="a6000-0", gpu="A6000"),
        replace(base, name="a6000-1", gpu="A6000"),
    )


def best_of(repeats: int, run: Callable[[], ResultT]) -> tuple[float, ResultT]:
    """Smallest wall time of ``repeats`` runs (this machine is noisy) and the last result."""
    best = float("inf")
    result: ResultT | None = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return best, result


def run(quick: bool) -> dict[str, Any]:
    figures = measure(quick)
    pure = _measure_pure_python(quick) if figures["native"] else None
    if pure is not None:
        figures["pure_python_requests_per_second"] = pure["requests_per_second"]
        figures["native_speedup"] = figures["requests_per_second"] / pure["requests_per_second"]
        figures["identical_to_pure_python"] = pure["records_digest"] == figures["records_digest"]
    else:
        figures["native_reason"] = native_status().reason
    print_figures("sim-speed", figures)
    if not quick:
        _write_results(figures)
    return figures


def measure(quick: bool) -> dict[str, Any]:
    """The timed runs, in whichever modules this process imported (compiled or not)."""
    import slosched.sim.cluster as cluster_module

    instances = demo_cluster()
    num_jobs = 10_000 if quick else 40_000
    probe = make_workload("azure-conv", {"process": "poisson", "rate": 1.0}, 3000, seed=7)
    capacity = saturation_throughput(instances, probe, POLICY)
    rate = LOAD * capacity
    jobs = make_workload("azure-conv", {"process": "poisson", "rate": rate}, num_jobs, seed=1)

    def simulate_and_measure(fast_forward: bool) -> tuple[RunResult, Any]:
        options = SimOptions(noise_sigma=0.05, fast_forward=fast_forward, slo_scale=5.0)
        result = simulate(instances, jobs, PolicyPair.parse(POLICY), 1, options)
        return result, summarize(result)

    fast_s, (fast, summary) = best_of(1 if quick else 2, lambda: simulate_and_measure(True))
    step_s, (stepped, _) = best_of(1, lambda: simulate_and_measure(False))
    identical = [dataclasses.astuple(r) for r in fast.requests] == [dataclasses.astuple(r) for r in stepped.requests]
    steps = sum(stats.num_steps for stats in fast.instances)
    return {
        "requests_per_second": len(fast.requests) / fast_s,
        "native": is_compiled(cluster_module),
        "fast_forward_speedup": step_s / fast_s,
        "identical": identical,
        "num_requests": len(fast.requests),
        "wall_s": fast_s,
        "stepping_wall_s": step_s,
        "simulated_s": fast.end_s,
        "arrival_rate_per_s": rate,
        "saturation_rate_per_s": capacity,
        "engine_steps": steps,
        "events_fast_forward": fast.num_events,
        "events_stepping": stepped.num_events,
        "mean_latency_s": summary.job_latency.mean_s,
        "p99_ttft_s": summary.ttft.p99_s,
        "records_digest": records_digest(fast),
    }


def records_digest(result: RunResult) -> str:
    """sha256 over every request and job record (floats by repr, so equal digests mean equal bits)."""
    digest = hashlib.sha256()
    for records in (result.requests, result.jobs):
        for record in records:
            digest.update(repr(dataclasses.astuple(record)).encode())
    return digest.hexdigest()


def _measure_pure_python(quick: bool) -> dict[str, Any]:
    """``measure`` in a child process that imports the pure-Python modules (``SLOSCHED_NATIVE=0``)."""
    code = (
        "import json, sys; from slosched.bench.sim_speed import measure; "
        "print(json.dumps(measure(sys.argv[1] == 'quick')))"
    )
    env = {**os.environ, "SLOSCHED_NATIVE": "0"}
    done = subprocess.run(
        [sys.executable, "-c", code, "quick" if quick else "full"], env=env, capture_output=True, text=True, check=True
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["native"]:
        raise AssertionError("the pure-Python twin run imported compiled modules")
    return figures


def _write_results(figures: dict[str, Any]) -> None:
    """docs/results/sim-speed.md: the full run's figures (relative to the working directory)."""
    lines = [
        "# Simulator speed (`slosched bench sim-speed`)",
        "",
        "Azure 2023 conversation lengths on 2x A100-80G + 2x A6000 (Llama-3-8B), chunked prefill (budget 2048),",
        "least-loaded routing, step-time noise on, Poisson arrivals at 80% of the cluster's measured saturation",
        "throughput; wall time includes computing every metric. `fast_forward_speedup` divides the wall time of",
        "the same run stepping every iteration by the fast-forwarded one; `identical` compares every record.",
        "`native`: the simulator's hot modules ran compiled with mypyc (`slosched native build`); the same run",
        "with the pure-Python modules, in a child process, gives `pure_python_requests_per_second`, and",
        "`identical_to_pure_python` compares a digest of every record of the two.",
        "",
        "| figure | value |",
        "|---|---:|",
    ]
    for key, value in figures.items():
        lines.append(f"| {key} | {value:,.3f} |" if isinstance(value, float) else f"| {key} | {value} |")
    path = Path("docs/results/sim-speed.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


BENCHMARK = Benchmark(
    name="sim-speed",
    summary="simulated requests per wall-clock second",
    run=run,
)
