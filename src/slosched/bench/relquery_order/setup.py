"""``bench relquery-order`` set-up: relQueries over a real table, sent in table order or prefix order.

The table is the Rotten-Tomatoes-like ``omdb`` table of ``bokeh-sampledata`` (the dev extra; films from
2000 on). A relQuery applies one of three record-form templates (an instruction, then one line per field)
to 10-100 of its rows, drawn at random without replacement; arrivals are Poisson. The same relQueries are
planned twice (``relquery.plan.plan_records``): in ``table`` order (rows as drawn, fields as the template
lists them, title first) and in ``fields`` order (repeated fields first, rows sorted; MLSys'25). The
simulated job carries each row's prefix group (the template, then the leading fields it shares with other
rows of its relQuery), so the simulated prefix cache sees what the order makes shareable.

True output lengths are an assumption (no model ran on this table): lognormal with mean half the
template's ``max_tokens`` and CV 0.5, clipped to [1, max_tokens]. Deadline: ``SLO_SCALE`` x the client's
no-contention estimate, as the stack bench's relQuery workload. Cluster: the stack bench's relQuery
cluster (OPT-13B on an A100-80G and an L40S, current-engine truth).

Candidates, each under both orders: the stack as shipped and with its ``prefix_wait`` key on (a call waits
while another computes the prefix it lacks); ``prism+chunked-fcfs[token_budget=512]``, the strongest baseline
of the stack bench's relQuery workload; and ``cache-aware+fcfs/prefix-wait/chunked[token_budget=512]``, the
prefix mechanisms of SGLang (its router's prefix affinity, its scheduler's in-batch prefix caching): a
baseline that does what the stack does for prefixes. The order is applied to every candidate alike, so a gain
of the order is nobody's edge.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

import slosched.bench.stack.setup as stack_setup
from slosched.bench.base import BenchmarkFailed
from slosched.core.job import JobSpec
from slosched.evaluation.sizing import work_tolerance
from slosched.evaluation.workbench import Candidate, Workbench
from slosched.policies.spec import PolicyParams
from slosched.relquery.plan import RelQueryPlan, plan_records
from slosched.relquery.source import TableRef, read_rows
from slosched.relquery.template import PromptTemplate
from slosched.sim.options import SimOptions
from slosched.workloads.arrivals import poisson
from slosched.workloads.relquery import relquery_job

ORDERS = ("table", "fields")
SLO_SCALE = 15.0
NOISE = 0.05
MIN_ROWS, MAX_ROWS = 10, 100
OUTPUT_CV = 0.5
TARGET = 0.9
WHERE = "Year >= 2000"


@dataclass(frozen=True, slots=True)
class RelTemplate:
    name: str
    text: str
    max_tokens: int


TEMPLATES = (
    RelTemplate(
        "genre",
        "Classify this film's genre as drama, comedy or other. Answer with one word.\n"
        "Title: {Title}\nDirector: {Director}\nRated: {Rating}\nGenre: {Genre}\nLanguage: {Language}",
        4,
    ),
    RelTemplate(
        "family",
        "Would this film suit a family audience? Answer yes or no, then give one reason.\n"
        "Title: {Title}\nCast: {Cast}\nRated: {Rating}\nGenre: {Genre}\nCountry: {Country}",
        32,
    ),
    RelTemplate(
        "tone",
        "Describe the likely tone of this film in one sentence.\n"
        "Title: {Title}\nWriter: {Writer}\nDirector: {Director}\nGenre: {Genre}\nAwards: {Awards}",
        40,
    ),
)


@dataclass(frozen=True, slots=True)
class Sizes:
    num_jobs: int
    num_warmup_jobs: int
    seeds: tuple[int, ...]


FULL = Sizes(120, 30, (1, 2, 3))
QUICK = Sizes(60, 15, (1, 2))


STACK_PREFIX_WAIT = f"{stack_setup.STACK_LABEL}[prefix_wait=True]"


def candidates() -> list[Candidate]:
    """The stack first (as shipped, then with its ``prefix_wait`` key on), then the baselines."""
    stack = Candidate(label=stack_setup.STACK_LABEL, policy=stack_setup.STACK_POLICY, job_policy="slosched")
    waiting = replace(stack, label=STACK_PREFIX_WAIT, params=PolicyParams(stack={"slosched": {"prefix_wait": True}}))
    return [
        stack,
        waiting,
        Candidate.of("prism+chunked-fcfs", {"token_budget": 512}),
        Candidate.of(
            "cache-aware+fcfs/prefix-wait/chunked",
            {"batching": {"token_budget": 512}},  # a parts engine takes its parameters per part
            label="cache-aware+fcfs/prefix-wait/chunked[token_budget=512]",
        ),
    ]


def is_stack(label: str) -> bool:
    return label in (stack_setup.STACK_LABEL, STACK_PREFIX_WAIT)


def table_path() -> Path:
    try:
        import bokeh_sampledata
    except ImportError:
        raise BenchmarkFailed(
            "bench relquery-order reads the omdb table of bokeh-sampledata (pip install -e '.[dev]')"
        ) from None
    return Path(bokeh_sampledata.__file__).parent / "_data" / "movies.db"


@functools.cache
def table_records() -> tuple[tuple[str, ...], list[dict[str, Any]]]:
    """The columns the templates use, for every film of ``WHERE`` (read once per process)."""
    columns = sorted({column for item in TEMPLATES for column in PromptTemplate.parse(item.text).columns})
    rows = read_rows(TableRef.parse(f"{table_path()}:omdb"), tuple(columns), WHERE, None)
    return tuple(columns), rows.records()


def relquery_jobs(order: str, num_jobs: int, seed: int) -> list[JobSpec]:
    """``num_jobs`` relQueries at 1 job/s (module level: the workbench pickles it to its workers); the same
    relQueries (rows, outputs, arrivals) whatever ``order``: the seed alone draws them."""
    rng = np.random.default_rng(seed)
    arrivals = poisson(num_jobs, 1.0, rng)
    jobs = []
    for index, (plan, outputs, name) in enumerate(_drawn(order, num_jobs, rng)):
        jobs.append(_job(f"rq-{index}", float(arrivals[index]), plan, outputs, name))
    return jobs


def relquery_plans(order: str, num_jobs: int, seed: int) -> list[RelQueryPlan]:
    """The plans of ``relquery_jobs(order, num_jobs, seed)``'s relQueries (their prompts, in the order sent)."""
    rng = np.random.default_rng(seed)
    poisson(num_jobs, 1.0, rng)  # the arrivals come first from the same stream
    return [plan for plan, _, _ in _drawn(order, num_jobs, rng)]


def _drawn(order: str, num_jobs: int, rng: np.random.Generator) -> list[tuple[RelQueryPlan, list[int], str]]:
    _, records = table_records()
    drawn = []
    for _ in range(num_jobs):
        item = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
        count = int(rng.integers(MIN_ROWS, MAX_ROWS + 1))
        chosen = rng.choice(len(records), size=count, replace=False)
        outputs = _outputs(rng, item.max_tokens, count)
        rows = [records[i] for i in chosen]
        plan = plan_records("omdb", PromptTemplate.parse(item.text), rows, item.max_tokens, order=order)
        drawn.append((plan, outputs, item.name))
    return drawn


def _outputs(rng: np.random.Generator, max_tokens: int, count: int) -> list[int]:
    mean = max_tokens / 2
    sigma = math.sqrt(math.log1p(OUTPUT_CV**2))
    draws = rng.lognormal(math.log(mean) - sigma**2 / 2, sigma, count)
    return [int(min(max(round(value), 1), max_tokens)) for value in draws]


def _job(job_id: str, arrival_s: float, plan: RelQueryPlan, outputs: list[int], name: str) -> JobSpec:
    """The plan's rows in its order, each with the output of the table row it renders."""
    rows = [(max(1, tokens), outputs[row]) for tokens, row in zip(plan.row_tokens, plan.table_rows, strict=True)]
    return relquery_job(
        job_id, arrival_s, plan.template_tokens, rows, plan.max_output_tokens, None, f"relquery/{name}", plan.groups()
    )


def workbench(order: str, quick: bool) -> Workbench:
    sizes = QUICK if quick else FULL
    return Workbench(
        f"relquery-{order}",
        stack_setup.relquery_cluster(),
        functools.partial(relquery_jobs, order),
        sizes.num_jobs,
        SimOptions(noise_sigma=NOISE, slo_scale=SLO_SCALE),
        sizes.num_warmup_jobs,
        work_tolerance=work_tolerance(quick),
    )
