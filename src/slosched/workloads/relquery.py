"""relQuery jobs: one templated LLM call per table row, and the synthetic ``relquery`` generator.

A relQuery job has one stage ``"rows"`` with one call per row; every call's prompt starts with the
template's ``template_tokens`` (prefix key ``f"{id}/template"``, shared by the rows of this relQuery
only), followed by the row's own tokens. This is exactly the shape a ``relquery`` JSONL trace line
describes, so generated jobs round-trip through ``trace_io``.

Generator ``relquery`` (facts from ``relquery`` in ``workloads.json``, the RelServe paper's Tables 4-5):

- ``dataset``: ``amazon``, ``rotten``, ``beer``, ``pdmx`` (mean input/output tokens per row), or
  ``mixed`` (one drawn uniformly per relQuery). Default ``amazon``.
- ``query_type``: ``filter``, ``classify``, ``rate``, ``summarize``, ``open_qa`` (their output limits
  become ``max_output_tokens``), or ``mixed`` (default: one drawn uniformly per relQuery).
- ``min_rows`` (1), ``max_rows`` (100): rows per relQuery, uniform integers.
- ``template_share``: the share of a row's mean input that is template text, which is what the prefix
  cache can reuse across the relQuery's rows. Default: drawn per relQuery from ``template_share`` in
  ``workloads.json`` (a beta law whose mean reproduces the paper's ~38% average prefix-cache hit ratio
  with 16-token KV blocks, clipped to its ``min``/``max``), so relQueries differ in how much of their
  prompt is shared and hence in their cache hits. A number in [0, 1) fixes it for every relQuery (the
  earlier behaviour was a fixed 0.4).
- ``length_cv`` (0.4): coefficient of variation of row input lengths (lognormal); outputs are lognormal
  with 1.5x that CV (generation lengths vary more than rows of one column) and clipped to the query
  type's limit. ``slo_s``: optional end-to-end SLO per relQuery.
- ``id_prefix`` (``rq``): job ids are ``f"{id_prefix}-{i}"``; the template is ``dataset/query_type``
  so output-length predictors learn per query type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.workloads._sampling import gc_paused, lognormal_params, to_tokens
from slosched.workloads._validation import Params
from slosched.workloads.bundled import workload_section

DATASETS = ("amazon", "rotten", "beer", "pdmx")
QUERY_TYPES = ("filter", "classify", "rate", "summarize", "open_qa")
RELQUERY_STAGE = "rows"


def relquery_job(
    job_id: str,
    arrival_s: float,
    template_tokens: int,
    rows: Sequence[tuple[int, int]],
    max_output_tokens: int | None,
    slo_s: float | None = None,
    template: str = "",
    groups: Sequence[tuple[str, int] | None] | None = None,
) -> JobSpec:
    """A relQuery over ``rows`` of ``(row input tokens, true output tokens)`` (the trace line's shape);
    ``groups`` gives a row's prefix group ``(name, tokens of its row input shared with the group)``, or None."""
    key = f"{job_id}/template"
    grouped = groups if groups is not None else [None] * len(rows)
    calls = tuple(
        CallSpec(template_tokens + row_in, row_out, max_output_tokens, key, template_tokens)
        if group is None
        else CallSpec(
            template_tokens + row_in, row_out, max_output_tokens, key, template_tokens, None, group[0], group[1]
        )
        for (row_in, row_out), group in zip(rows, grouped, strict=True)
    )
    return JobSpec(job_id, JobKind.RELQUERY, arrival_s, (StageSpec(RELQUERY_STAGE, calls),), slo_s, template=template)


def relquery(params: Mapping[str, Any], arrivals: np.ndarray, rng: np.random.Generator) -> list[JobSpec]:
    """One relQuery per arrival, in arrival order (see the module docstring for the parameters)."""
    reader = Params("relquery", params)
    dataset = reader.choice("dataset", "amazon", (*DATASETS, "mixed"))
    query_type = reader.choice("query_type", "mixed", (*QUERY_TYPES, "mixed"))
    min_rows = reader.integer("min_rows", 1)
    max_rows = reader.integer("max_rows", 100, minimum=min_rows)
    fixed_share = reader.raw("template_share")
    if fixed_share is not None:
        fixed_share = reader.number("template_share", None, strict=False)
    cv = reader.number("length_cv", 0.4, strict=False)
    slo_s = reader.optional_number("slo_s")
    id_prefix = reader.text("id_prefix", "rq")
    reader.finish()
    if fixed_share is not None and fixed_share >= 1.0:
        raise ConfigError("relquery.template_share", f"must be in [0, 1), got {fixed_share}")
    facts = workload_section("relquery", "datasets_avg_tokens")
    limits = workload_section("relquery", "query_types_output_limit")
    count = len(arrivals)
    num_rows = rng.integers(min_rows, max_rows + 1, size=count)
    datasets = rng.choice(DATASETS, size=count) if dataset == "mixed" else np.full(count, dataset)
    types = rng.choice(QUERY_TYPES, size=count) if query_type == "mixed" else np.full(count, query_type)
    shares = np.full(count, fixed_share) if fixed_share is not None else template_shares(rng, count)
    jobs: list[JobSpec] = []
    with gc_paused():
        for index in range(count):
            fact = facts[str(datasets[index])]
            limit = int(limits[str(types[index])])
            share = float(shares[index])
            template_tokens = round(share * fact["input"])
            rows_in = _lognormal(rng, (1.0 - share) * fact["input"], cv, int(num_rows[index]), 1e9)
            rows_out = _lognormal(rng, fact["output"], cv * 1.5, int(num_rows[index]), limit)
            jobs.append(
                relquery_job(
                    f"{id_prefix}-{index}",
                    float(arrivals[index]),
                    template_tokens,
                    list(zip(rows_in.tolist(), rows_out.tolist(), strict=True)),
                    limit,
                    slo_s,
                    f"{datasets[index]}/{types[index]}",
                )
            )
    return jobs


def template_shares(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` per-relQuery template shares from the ``template_share`` law in ``workloads.json``."""
    law = workload_section("relquery", "template_share")
    mean, concentration = float(law["mean"]), float(law["concentration"])
    draws = rng.beta(mean * concentration, (1.0 - mean) * concentration, size=count)
    return np.clip(draws, float(law["min"]), float(law["max"]))


def _lognormal(rng: np.random.Generator, mean: float, cv: float, size: int, cap: float) -> np.ndarray:
    if cv <= 0:
        return to_tokens(np.full(size, mean), cap)
    mu, sigma = lognormal_params(mean, cv * mean)
    return to_tokens(rng.lognormal(mu, sigma, size), cap)
