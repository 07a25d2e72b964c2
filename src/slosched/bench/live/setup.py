"""Settings of ``slosched bench live``: the rows (policies), the two workloads, their SLOs and sizes.

Rows. The required ones: ``slosched`` (the stack: gateway ``policies: {stack: slosched}`` in front of vLLM
servers running slosched's scheduler plugin with the engine preset ``slosched``, so a job's deadline drives
the gateway's routing and queue and the engine's ordering, admission and batching), ``least-tokens+
chunked-fcfs`` (the simulator benches' reference baseline, on plain vLLM with EDF priorities), and
vllm-router (PyPI, Rust) with each of its policies ``round_robin``, ``power_of_two`` and ``cache_aware``
driving the same calls directly (no job API). ``EXTRA_ROWS`` are the earlier live rows (round-robin + FCFS,
Hexgen's workload-balanced + urgency), run only with ``SLOSCHED_LIVE_EXTRA_ROWS=1`` (they cost live time).

Workloads. ``text2sql``: CHESS Text-to-SQL workflows (``text2sql-chess``), SLO 4x the job's critical path.
``mixed``: the stack bench's mixed multi-tenant workload (``stack_setup.mixed_jobs``: chat, code, CHESS and
small relQueries at once), tenants ``interactive`` 3x and ``batch`` 10x their critical path. Lengths are
scaled for a CPU (inputs / 8 capped at 1,500, outputs / 6 capped at 128; shared prefixes / 8). A job's
critical path is its longest dependency chain at the per-call overhead and per-token times probed on the
plain servers before the runs (no contention). Every call's prompt is unique (the SDK salts each one) except
the prefix it shares by ``prefix_key`` (a CHESS database's schema), and each run renames those keys, so no
run finds the previous run's prefixes in the engines' caches.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import slosched.bench.stack.setup as stack_setup
from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobSpec, StageSpec
from slosched.workloads.generators import make_workload

PEER_POLICIES = ("round_robin", "power_of_two", "cache_aware")
STACK_LABEL = "slosched"
BASELINE_LABEL = "least-tokens+chunked-fcfs"
TEXT2SQL_SLO_SCALE = 4.0
TENANT_SCALES: Mapping[str, float] = dict(stack_setup.TENANT_SCALES)  # interactive 3x, batch 10x
# Offered load, jobs/s (chosen so the strongest row meets most SLOs and the weaker ones visibly fewer;
# ``SLOSCHED_LIVE_LOAD`` multiplies both).
RATES: Mapping[str, float] = {"text2sql": 0.9, "mixed": 1.6}
WORKLOADS = ("text2sql", "mixed")


@dataclass(slots=True, frozen=True)
class Row:
    """One compared system: through the gateway (``policies`` is its config section) or vllm-router
    (``peer_policy``), on the plain servers or on the plugin servers."""

    label: str
    kind: Literal["gateway", "peer"]
    servers: Literal["plain", "plugin"] = "plain"
    policies: Mapping[str, str] = field(default_factory=dict)
    forward_priority: bool = True
    peer_policy: str | None = None


ROWS = (
    Row(STACK_LABEL, "gateway", "plugin", {"stack": "slosched"}),
    Row(BASELINE_LABEL, "gateway", "plain", {"router": "least-tokens", "engine": "chunked-fcfs", "job": "deadline"}),
    *(Row(f"vllm-router {policy}", "peer", peer_policy=policy) for policy in PEER_POLICIES),
)
EXTRA_ROWS = (
    Row(
        "round-robin+fcfs",
        "gateway",
        "plain",
        {"router": "round-robin", "engine": "fcfs", "job": "deadline"},
        forward_priority=False,
    ),
    Row(
        "workload-balanced+urgency",
        "gateway",
        "plain",
        {"router": "workload-balanced", "engine": "urgency", "job": "stage-budget"},
    ),
)


def rows(extra: bool) -> tuple[Row, ...]:
    return ROWS + EXTRA_ROWS if extra else ROWS


@dataclass(slots=True, frozen=True)
class Sizes:
    """Jobs per run of each workload and the seeds (every row runs every seed)."""

    text2sql_jobs: int
    mixed_jobs: int
    seeds: tuple[int, ...]
    load: float = 1.0  # multiplies ``RATES``

    def jobs(self, workload: str) -> int:
        return self.text2sql_jobs if workload == "text2sql" else self.mixed_jobs


QUICK = Sizes(6, 20, (1,))
# Issue 24 judges the live stack on at least 3 seeds and 60 jobs per workload and seed.
FULL = Sizes(60, 60, (1, 2, 3))


def sizes(quick: bool, env: Mapping[str, str] | None = None) -> Sizes:
    """The quick or full sizes; ``SLOSCHED_LIVE_SEEDS=N`` runs seeds 1..N instead and ``SLOSCHED_LIVE_LOAD=X``
    multiplies the offered load. Read before any server starts, so a bad value fails at once (``ConfigError``)."""
    chosen = QUICK if quick else FULL
    environ = os.environ if env is None else env
    count, load = environ.get("SLOSCHED_LIVE_SEEDS"), environ.get("SLOSCHED_LIVE_LOAD")
    if count:
        if not count.strip().isdigit() or int(count) < 1:
            raise ConfigError("SLOSCHED_LIVE_SEEDS", f"got {count!r}; allowed: a whole number >= 1")
        chosen = replace(chosen, seeds=tuple(range(1, int(count) + 1)))
    if load:
        try:
            factor = float(load)
        except ValueError:
            factor = math.nan
        if not (math.isfinite(factor) and factor > 0):
            raise ConfigError("SLOSCHED_LIVE_LOAD", f"got {load!r}; allowed: a number > 0")
        chosen = replace(chosen, load=factor)
    return chosen


@dataclass(slots=True, frozen=True)
class Speed:
    """A server alone: fixed seconds per call (HTTP, scheduling, detokenising) and per token."""

    s_per_call: float
    s_per_token: float
    s_per_prompt_token: float

    @staticmethod
    def mean(speeds: Sequence[Speed]) -> Speed:
        count = len(speeds)
        return Speed(
            sum(s.s_per_call for s in speeds) / count,
            sum(s.s_per_token for s in speeds) / count,
            sum(s.s_per_prompt_token for s in speeds) / count,
        )


def scale_call(call: CallSpec) -> CallSpec:
    """A call with CPU-sized lengths; a shared prefix keeps its key and shrinks like the prompt."""
    input_tokens = min(max(call.input_tokens // 8, 4), 1500)
    prefix_tokens = min(call.prefix_tokens // 8, input_tokens) if call.prefix_key else 0
    output_tokens = min(max(call.output_tokens // 6, 2), 128)
    return CallSpec(input_tokens, output_tokens, None, call.prefix_key if prefix_tokens else None, prefix_tokens)


def scale_job(job: JobSpec) -> JobSpec:
    """The job with CPU-sized lengths (same structure, arrival and tenant), no SLO yet."""
    stages = tuple(replace(stage, calls=tuple(scale_call(c) for c in stage.calls)) for stage in job.stages)
    return replace(job, stages=stages, slo_s=None, ttft_slo_s=None, tpot_slo_s=None)


def build_jobs(workload: str, count: int, seed: int, load: float = 1.0) -> list[JobSpec]:
    """``count`` CPU-sized jobs of ``workload`` at ``RATES[workload] * load`` jobs/s (Poisson), seeded."""
    rate = RATES[workload] * load
    if workload == "text2sql":
        jobs = make_workload("text2sql-chess", {"process": "poisson", "rate": rate}, count, seed=seed)
    elif workload == "mixed":
        jobs = [replace(j, arrival_s=j.arrival_s / rate) for j in stack_setup.mixed_jobs(count, seed)]
    else:
        raise ValueError(f"unknown live workload {workload!r}; known: {WORKLOADS}")
    return [scale_job(job) for job in jobs]


def salt_prefixes(jobs: Sequence[JobSpec], salt: str) -> list[JobSpec]:
    """The jobs with every prefix key renamed for this run (same sharing within the run, none across runs)."""

    def stage(spec: StageSpec) -> StageSpec:
        calls = tuple(replace(c, prefix_key=f"{c.prefix_key}@{salt}") if c.prefix_key else c for c in spec.calls)
        return replace(spec, calls=calls)

    return [replace(job, stages=tuple(stage(s) for s in job.stages)) for job in jobs]


def critical_path_s(job: JobSpec, speed: Speed) -> float:
    """Time of the job's longest dependency chain alone on a server (no queueing, no batching)."""
    deps = job.dependencies()
    finish: dict[str, float] = {}
    for stage in job.topological_stages():
        start = max((finish[parent] for parent in deps[stage.name]), default=0.0)
        work = max(
            (
                speed.s_per_call + c.output_tokens * speed.s_per_token + c.input_tokens * speed.s_per_prompt_token
                for c in stage.calls
            ),
            default=0.0,
        )
        finish[stage.name] = start + work + stage.tool_duration_s
    return max(finish.values())


def slo_scale(workload: str, tenant: str) -> float:
    """How many critical paths a job of ``tenant`` gets: 4x on text2sql, the tenant's scale on mixed."""
    if workload == "text2sql":
        return TEXT2SQL_SLO_SCALE
    return TENANT_SCALES[tenant]


def with_slos(workload: str, jobs: Sequence[JobSpec], speed: Speed) -> list[JobSpec]:
    return [replace(job, slo_s=slo_scale(workload, job.tenant) * critical_path_s(job, speed)) for job in jobs]


COUNTERS = ("vllm:request_success_total", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total")


def parse_counters(text: str, names: Sequence[str] = COUNTERS) -> dict[str, float]:
    """Prometheus counters summed over their labels (``name{...} value`` and ``name value`` lines)."""
    totals = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in totals:
            try:
                totals[name] += float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                continue
    return totals
