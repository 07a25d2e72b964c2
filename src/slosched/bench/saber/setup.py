"""Set-up of ``slosched bench saber``: the instance, the code-task jobs, the candidates, one run's outcome.

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
truncated, for every policy alike). SABER's required speed uses it (the paper's rule). The SLO of a job is
its task's (the paper's 1/8/1/12 s, or per-task means measured at ``SLA_RATE``): it reads the task only,
never the job's true output length, so deadlines are leak-free by construction.

One engine: every router sends every job to it, so the baseline search is the engine sweep (best static
token budget, best static max concurrency) behind the reference router. The paper's own baseline is the
best static cap in 10..100 (``PAPER_CAPS``), chosen after the fact.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from slosched.bench.relserve.setup import run_candidate
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.request import Outcome
from slosched.evaluation.baseline_plan import REFERENCE_ROUTER, BaselinePlan
from slosched.evaluation.scoreboard import Scoreboard
from slosched.evaluation.workbench import WARMUP_PREFIX, Candidate, Workbench, measured_only
from slosched.metrics.serving import ServingStats
from slosched.metrics.summary import serving_of
from slosched.perf.speed_models import SpeedProfile
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from slosched.workloads._sampling import lognormal_quantile
from slosched.workloads.bundled import workload_section
from slosched.workloads.code import CODE_TASKS
from slosched.workloads.generators import make_workload

# A paper reproduction: the 2023 vLLM engine the paper measured on (Splitwise's fit), named in its report.
PAPER_STACK = "splitwise"

KV_BLOCKS = 4000
INSTANCE = InstanceSpec(
    name="a100-0",
    gpu="A100-40G",
    model="Qwen2.5-Coder-1.5B",
    stack=PAPER_STACK,
    max_running=256,
    max_batched_tokens=8192,
    num_kv_blocks=KV_BLOCKS,
)
MIXES = {"W1": "code-w1", "W2": "code-w2", "W3": "code-w3"}
NUM_REQUESTS = 100  # the paper's requests per run (the scoreboard's runs state their own size)
MAX_TOKENS_QUANTILE = 0.9
SLA_RATE = 10.0  # the "measured" SLA rule: each task's mean completion time at this load, default setting
DEFAULT_ENGINE = "chunked-fcfs"  # vLLM's default: admit whatever fits (max_running 256)
OPTIONS = SimOptions(noise_sigma=0.05)
PAPER_CAPS = tuple(range(10, 101, 10))
PAPER_POLICY = "saber"
ORACLE = "saber-oracle"  # demand = the true output length: reads ground truth, an upper bound
CAPPED = f"{REFERENCE_ROUTER}+static-concurrency"


def task_max_tokens(quantile: float = MAX_TOKENS_QUANTILE) -> dict[str, int]:
    """Task generator name -> the client's ``max_tokens`` for it."""
    facts = workload_section("code_assistant", "tasks")
    return {
        task: max(1, int(lognormal_quantile(facts[key]["out"]["mu"], facts[key]["out"]["sigma"], quantile)))
        for task, key in CODE_TASKS.items()
    }


def code_jobs(
    mix: str,
    rate: float,
    seed: int,
    max_tokens: Mapping[str, int],
    sla: Mapping[str, float] | None = None,
    num_jobs: int = NUM_REQUESTS,
) -> list[JobSpec]:
    """``num_jobs`` Poisson jobs of a mix; SLO = the paper's per task, or ``sla`` (task -> seconds)."""
    jobs = make_workload(MIXES[mix], {"process": "poisson", "rate": rate}, num_jobs, {"slo": "paper"}, seed)
    capped: list[JobSpec] = []
    for job in jobs:
        stage = job.stages[0]
        call = stage.calls[0]
        limit = max_tokens[job.template]
        call = replace(call, output_tokens=min(call.output_tokens, limit), max_output_tokens=limit)
        slo = job.slo_s if sla is None else sla.get(job.template, job.slo_s)
        capped.append(replace(job, stages=(replace(stage, calls=(call,)),), slo_s=slo))
    return capped


def unit_rate_jobs(mix: str, sla: tuple[tuple[str, float], ...], num_jobs: int, seed: int) -> list[JobSpec]:
    """The workbench's job source: ``num_jobs`` jobs of ``mix`` at 1 job/s (picklable via ``partial``)."""
    return code_jobs(mix, 1.0, seed, task_max_tokens(), dict(sla) or None, num_jobs)


def workbench(
    mix: str, sla: Mapping[str, float] | None, num_jobs: int, num_warmup_jobs: int, work_tolerance: float | None = None
) -> Workbench:
    """``run_candidate`` runs the simulator, and gives an oracle candidate the predictor of true lengths;
    ``work_tolerance``: the work rule's (``evaluation/sizing.py``), on in the full form."""
    jobs = functools.partial(unit_rate_jobs, mix, tuple(sorted((sla or {}).items())))
    name = f"{mix} ({MIXES[mix]})"
    return Workbench(
        name, (INSTANCE,), jobs, num_jobs, OPTIONS, num_warmup_jobs, run_candidate, work_tolerance=work_tolerance
    )


def baseline_plan(quick: bool) -> BaselinePlan:
    """One engine: the reference router only; caps include the paper's 10..100 and the engine's own 256."""
    if quick:
        return BaselinePlan(token_budgets=(512, 2048), caps=(20, 50, 100, 256), routers=(REFERENCE_ROUTER,))
    return BaselinePlan(token_budgets=(256, 512, 1024, 2048), caps=(*PAPER_CAPS, 256), routers=(REFERENCE_ROUTER,))


def saber_candidates(profile: SpeedProfile, extended: bool) -> list[Candidate]:
    """SABER (USL, whole-window scan: the paper) first; then the earlier one-pick reading, belief demand,
    the ORACLE that budgets for true output lengths (the limit), and (``extended``) the linear / logistic
    speed fits (the paper's ablation)."""
    usl = asdict(profile.model("usl"))
    variants: dict[str, dict[str, Any]] = {
        PAPER_POLICY: {"speed": usl},
        "saber-first": {"speed": usl, "scan": "first"},
        "saber-predicted": {"speed": usl, "demand": "predicted"},
        ORACLE: {"speed": usl, "demand": "predicted"},
    }
    if extended:
        variants["saber-linear"] = {"speed": asdict(profile.model("linear"))}
        variants["saber-logistic"] = {"speed": asdict(profile.model("logistic"))}
    policy = f"{REFERENCE_ROUTER}+saber"
    return [Candidate.of(policy, params, label=name, oracle=name == ORACLE) for name, params in variants.items()]


def cap_label(cap: int) -> str:
    return Candidate.of(CAPPED, {"cap": cap}).label


def paper_baseline(board: Scoreboard, caps: Sequence[int]) -> str:
    """The paper's baseline: the static cap in 10..100 with the highest median 90% capacity (a cap screened
    out on the first seed is judged on that seed's; the one chosen is then searched on every seed)."""
    swept = [cap for cap in caps if cap in PAPER_CAPS and cap_label(cap) in board.baselines]
    return cap_label(max(swept, key=lambda cap: board.baselines[cap_label(cap)].median_90))


@dataclass(slots=True, frozen=True)
class RunOutcome:
    """Per measured job (in job order): completion time / SLA (inf when it did not complete)."""

    ratios: np.ndarray
    num_preemptions: int
    serving: ServingStats | None = None  # the measured requests in vLLM's serving terms

    @property
    def attainment(self) -> float:
        """Share of jobs that finished within their SLA (the paper's "goodput")."""
        return float(np.mean(self.ratios <= 1.0 + 1e-12)) if self.ratios.size else 0.0


@dataclass(slots=True, frozen=True)
class GridTask:
    workbench: Workbench
    candidate: Candidate
    rate: float
    seed: int


def grid_task(task: GridTask) -> RunOutcome:
    """One run of the paper's per-load table (module level: it runs in worker processes)."""
    bench = task.workbench
    jobs, history = bench.workload(task.rate, task.seed)
    result = bench.run_fn(task.candidate, bench.instances, jobs, bench.options, task.seed, history)
    ratios = [
        (job.finish_s - job.arrival_s) / job.slo_s if job.outcome is Outcome.COMPLETED else np.inf
        for job in result.jobs
        if not job.id.startswith(WARMUP_PREFIX)
    ]
    preemptions = sum(stats.num_preemptions for stats in result.instances)
    return RunOutcome(np.array(ratios, dtype=np.float64), preemptions, serving_of(measured_only(result)))


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
