"""Helpers shared by benchmarks: clusters, capacity estimates, best-of timing, printing."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
from rich.console import Console
from rich.table import Table

from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.request import Outcome
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams, simulate

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


def saturation_throughput(
    instances: Sequence[InstanceSpec],
    jobs: Sequence[JobSpec],
    policy: str,
    seed: int = 0,
    params: PolicyParams | None = None,
) -> float:
    """Jobs per second the cluster sustains when everything is queued at once (middle 60% of finishes,
    so the start-up ramp and the drain do not count); ``params``: the policy's parameters."""
    burst = [replace(job, arrival_s=0.0) for job in jobs]
    result = simulate(instances, burst, PolicyPair.parse(policy), seed, SimOptions(noise_sigma=0.0), params)
    finishes = np.sort([job.finish_s for job in result.jobs if job.outcome is Outcome.COMPLETED])
    low, high = int(0.2 * len(finishes)), int(0.8 * len(finishes))
    return (high - low) / float(finishes[high] - finishes[low])


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


def print_figures(title: str, figures: dict[str, Any]) -> None:
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in figures.items():
        text = f"{value:,.3f}" if isinstance(value, float) else str(value)
        table.add_row(key, text)
    Console(stderr=True).print(table)
