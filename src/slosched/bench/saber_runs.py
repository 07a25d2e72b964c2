"""Experiment pieces of ``slosched bench saber``: the instance, the code-task jobs, one run's outcomes.

Setup (DESIGN 4.4), the paper's regime: a small code model (Qwen2.5-Coder-1.5B, bf16, vLLM-class stack)
on one A100-40G whose KV pool is limited to ``KV_BLOCKS`` blocks of 16 tokens (64k tokens, about 1.8 GB:
what vLLM leaves at ``gpu_memory_utilization`` ~0.17 on that card, a GPU shared with other work). About
70 (W1) to 100 (W3) requests fit at once, so caps above that, and an uncapped engine, preempt (by
recompute) under load; with the whole card (1M tokens of KV) nothing ever preempts and admitting
more never costs anything. Chunked prefill, ``max_running`` 256 so only the policy (and KV) limits
concurrency. One request alone gets about 120 tokens/s, above the paper's SLAs' largest demand
(about 92 tokens/s at the translation task's ``max_tokens``), so every task is feasible alone.

Every request carries its task's ``max_tokens``, what a client sets per task: the
``MAX_TOKENS_QUANTILE`` quantile of the task's output-length distribution (true outputs above it are
truncated, for every policy alike). SABER's required speed uses it (the paper's rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.records import RunResult
from slosched.core.request import Outcome
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams, simulate
from slosched.workloads._sampling import lognormal_quantile
from slosched.workloads.bundled import workload_section
from slosched.workloads.code import CODE_TASKS
from slosched.workloads.generators import make_workload

KV_BLOCKS = 4000
INSTANCE = InstanceSpec(
    name="a100-0",
    gpu="A100-40G",
    model="Qwen2.5-Coder-1.5B",
    max_running=256,
    max_batched_tokens=8192,
    num_kv_blocks=KV_BLOCKS,
)
MIXES = {"W1": "code-w1", "W2": "code-w2", "W3": "code-w3"}
NUM_REQUESTS = 100
MAX_TOKENS_QUANTILE = 0.9
SLA_RATE = 10.0  # the "measured" SLA rule: each task's mean completion time at this load, default setting
DEFAULT_ENGINE = "chunked-fcfs"  # vLLM's default: admit whatever fits (max_running 256)


def task_max_tokens(quantile: float = MAX_TOKENS_QUANTILE) -> dict[str, int]:
    """Task generator name -> the client's ``max_tokens`` for it."""
    facts = workload_section("code_assistant", "tasks")
    return {
        task: max(1, int(lognormal_quantile(facts[key]["out"]["mu"], facts[key]["out"]["sigma"], quantile)))
        for task, key in CODE_TASKS.items()
    }


def code_jobs(
    mix: str, rate: float, seed: int, max_tokens: Mapping[str, int], sla: Mapping[str, float] | None = None
) -> list[JobSpec]:
    """``NUM_REQUESTS`` Poisson jobs of a mix; SLO = the paper's per task, or ``sla`` (task -> seconds)."""
    jobs = make_workload(MIXES[mix], {"process": "poisson", "rate": rate}, NUM_REQUESTS, {"slo": "paper"}, seed)
    capped: list[JobSpec] = []
    for job in jobs:
        stage = job.stages[0]
        call = stage.calls[0]
        limit = max_tokens[job.template]
        call = replace(call, output_tokens=min(call.output_tokens, limit), max_output_tokens=limit)
        slo = job.slo_s if sla is None else sla.get(job.template, job.slo_s)
        capped.append(replace(job, stages=(replace(stage, calls=(call,)),), slo_s=slo))
    return capped


@dataclass(slots=True, frozen=True)
class RunOutcome:
    """Per request (in job order): its task, completion time / SLA (inf when it did not complete)."""

    tasks: tuple[str, ...]
    ratios: np.ndarray

    @property
    def goodput(self) -> float:
        """Share of requests that finished within their SLA."""
        return float(np.mean(self.ratios <= 1.0))


def outcome_of(result: RunResult) -> RunOutcome:
    ratios = [
        (job.finish_s - job.arrival_s) / job.slo_s if job.outcome is Outcome.COMPLETED else np.inf
        for job in result.jobs
    ]
    return RunOutcome(tuple(job.template for job in result.jobs), np.array(ratios, dtype=np.float64))


def run_policy(jobs: Sequence[JobSpec], engine: str, params: Mapping[str, Any], seed: int) -> RunOutcome:
    result = simulate(
        [INSTANCE],
        jobs,
        PolicyPair("round-robin", engine),
        seed,
        SimOptions(noise_sigma=0.05),
        PolicyParams(engine={engine: dict(params)}),
    )
    return outcome_of(result)


def measured_sla(mix: str, seeds: Sequence[int], max_tokens: Mapping[str, int]) -> dict[str, float]:
    """Each task's mean completion time at ``SLA_RATE`` requests/s under the default setting."""
    times: dict[str, list[float]] = {}
    for seed in seeds:
        jobs = code_jobs(mix, SLA_RATE, seed, max_tokens)
        result = simulate([INSTANCE], jobs, PolicyPair("round-robin", DEFAULT_ENGINE), seed, SimOptions())
        for job in result.jobs:
            if job.outcome is Outcome.COMPLETED:
                times.setdefault(job.template, []).append(job.finish_s - job.arrival_s)
    return {task: float(np.mean(values)) for task, values in sorted(times.items())}
