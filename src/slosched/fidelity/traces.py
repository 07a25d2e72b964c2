"""Traces for the fidelity benchmark, sized for the tiny CPU model (``max-model-len`` 2048).

Four shapes, each a list of ``JobSpec`` (so the simulator runs them as they are and the replay client
sends exactly their work): ``chat`` (single calls, log-normal lengths), ``code`` (half long-prompt code
completions with short outputs, half chat), ``workflow`` (Text-to-SQL-like chains: schema linking, three
parallel candidates, a tool step, a revision, a pick; every call of a database shares the schema prefix)
and ``relquery`` (one call per row; rows of a query share the template prefix). Arrivals are Poisson at a
rate the caller chooses as a fraction of the engine's estimated capacity (``capacity_jobs_per_s``).
Deterministic by seed. Lengths are the truth of the trace: replay sends them with ``ignore_eos``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from slosched.core.belief import StepTimeModel
from slosched.core.errors import UnknownNameError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec

MAX_MODEL_LEN = 2048
SCHEMA_TOKENS = 384  # a Text-to-SQL database schema shared by every call on that database
TEMPLATE_TOKENS = 256  # a relQuery's instruction template shared by its rows
REFERENCE_BATCH = 32  # the batch the capacity estimate assumes the engine decodes at under load


def _lognormal_int(rng: np.random.Generator, median: float, sigma: float, low: int, high: int) -> int:
    return int(np.clip(round(float(rng.lognormal(math.log(median), sigma))), low, high))


def _chat_call(rng: np.random.Generator) -> CallSpec:
    return CallSpec(_lognormal_int(rng, 160, 0.8, 16, 1200), _lognormal_int(rng, 80, 0.7, 8, 400))


def _code_call(rng: np.random.Generator) -> CallSpec:
    return CallSpec(int(rng.integers(600, 1600)), int(rng.integers(8, 48)))


def chat_job(rng: np.random.Generator, index: int) -> JobSpec:
    call = _chat_call(rng)
    return JobSpec(f"chat{index}", JobKind.SINGLE, 0.0, (StageSpec("call", (call,)),), template="chat")


def code_job(rng: np.random.Generator, index: int) -> JobSpec:
    is_code = rng.random() < 0.5
    call = _code_call(rng) if is_code else _chat_call(rng)
    template = "code" if is_code else "chat"
    return JobSpec(f"code{index}", JobKind.SINGLE, 0.0, (StageSpec("call", (call,)),), template=template)


def workflow_job(rng: np.random.Generator, index: int) -> JobSpec:
    """Schema linking -> 3 parallel SQL candidates -> execute (tool, 50 ms) -> revise -> pick."""
    database = f"db{int(rng.integers(0, 3))}"

    def call(question: tuple[int, int], output: tuple[int, int]) -> CallSpec:
        own = int(rng.integers(*question))
        return CallSpec(SCHEMA_TOKENS + own, int(rng.integers(*output)), None, database, SCHEMA_TOKENS)

    stages = (
        StageSpec("link", (call((40, 120), (24, 64)),)),
        StageSpec("generate", tuple(call((100, 220), (48, 140)) for _ in range(3))),
        StageSpec("execute", (), tool_duration_s=0.05),
        StageSpec("revise", (call((150, 300), (40, 120)),)),
        StageSpec("pick", (call((200, 400), (8, 24)),)),
    )
    return JobSpec(f"wf{index}", JobKind.WORKFLOW, 0.0, stages, template="text2sql")


def relquery_job(rng: np.random.Generator, index: int) -> JobSpec:
    rows = int(rng.choice([4, 8, 16, 32]))
    key = f"rq{index}/template"
    calls = tuple(
        CallSpec(TEMPLATE_TOKENS + int(rng.integers(24, 96)), int(rng.integers(8, 40)), None, key, TEMPLATE_TOKENS)
        for _ in range(rows)
    )
    return JobSpec(f"rq{index}", JobKind.RELQUERY, 0.0, (StageSpec("rows", calls),), template="relquery")


TRACES: dict[str, Callable[[np.random.Generator, int], JobSpec]] = {
    "chat": chat_job,
    "code": code_job,
    "workflow": workflow_job,
    "relquery": relquery_job,
}


def make_trace(name: str, num_jobs: int, rate_per_s: float, seed: int) -> list[JobSpec]:
    """``num_jobs`` jobs of trace ``name`` with Poisson arrivals at ``rate_per_s`` (first at 0)."""
    if name not in TRACES:
        raise UnknownNameError("trace", name, list(TRACES))
    rng = np.random.default_rng(seed)
    jobs = [TRACES[name](rng, index) for index in range(num_jobs)]
    return with_poisson_arrivals(jobs, rate_per_s, seed)


def with_poisson_arrivals(jobs: list[JobSpec], rate_per_s: float, seed: int) -> list[JobSpec]:
    """The same jobs, arriving as a Poisson process at ``rate_per_s`` (the first at time 0)."""
    gaps = np.random.default_rng([seed, 1]).exponential(1.0 / rate_per_s, len(jobs))
    arrivals = np.concatenate(([0.0], np.cumsum(gaps[1:])))
    return [replace(job, arrival_s=round(float(t), 6)) for job, t in zip(jobs, arrivals, strict=True)]


def job_work_s(job: JobSpec, model: StepTimeModel, batch: int = REFERENCE_BATCH) -> float:
    """Engine time one job costs when the engine decodes ``batch`` sequences at once: its prefills (alone,
    uncached) plus its share ``1 / batch`` of each decode step it takes part in."""
    total = 0.0
    for stage in job.stages:
        for call in stage.calls:
            total += model.step_time_s(call.input_tokens, 0, 0, 0)
            context = batch * (call.input_tokens + call.output_tokens // 2)
            total += (call.output_tokens - 1) * model.step_time_s(0, 0, batch, context) / batch
    return total


def capacity_jobs_per_s(jobs: list[JobSpec], model: StepTimeModel, batch: int = REFERENCE_BATCH) -> float:
    """Estimated jobs per second the engine sustains on this mix (the inverse of the mean job work)."""
    return 1.0 / float(np.mean([job_work_s(job, model, batch) for job in jobs]))
