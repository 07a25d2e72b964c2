"""Per-request and per-job export of a comparison: one row per request (job) per policy.

``requests.parquet`` when pyarrow is installed (typed columns, NaN for times that never happened),
otherwise ``requests.csv``; ``jobs.csv`` always (small, and opens in any spreadsheet). In CSV an empty
cell is a time that never happened (NaN) and ``inf`` a missing deadline. Rows follow the policies' order,
then the run's record order, so the files are deterministic.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slosched.core.records import RunResult
from slosched.core.request import Outcome
from slosched.metrics.summary import token_slo_missed_jobs

REQUEST_COLUMNS = (
    "policy",
    "request_id",
    "job_id",
    "stage",
    "template",
    "tenant",
    "instance",
    "arrival_s",
    "first_scheduled_s",
    "first_token_s",
    "finish_s",
    "prompt_tokens",
    "output_tokens",
    "cached_tokens",
    "num_preemptions",
    "outcome",
    "reason",
    "deadline_s",
    "deadline_met",
)
JOB_COLUMNS = (
    "policy",
    "job_id",
    "kind",
    "template",
    "tenant",
    "arrival_s",
    "finish_s",
    "latency_s",
    "slo_s",
    "no_contention_s",
    "num_requests",
    "outcome",
    "reason",
    "deadline_met",
)
Columns = dict[str, list[Any]]


def request_table(results: Mapping[str, RunResult]) -> Columns:
    """Column name -> values over every request of every run. ``deadline_met``: completed by the job's
    absolute deadline and within the request's own TTFT/TPOT SLOs."""
    table: Columns = {name: [] for name in REQUEST_COLUMNS}
    for policy, result in results.items():
        jobs = {job.id: job for job in result.jobs}
        for r in result.requests:
            job = jobs.get(r.job_id)
            met = r.outcome is Outcome.COMPLETED and r.finish_s <= r.deadline_s * (1 + 1e-12) and r.token_slos_met
            row = (
                policy,
                r.id,
                r.job_id,
                r.stage,
                job.template if job else "",
                job.tenant if job else "",
                r.instance,
                r.arrival_s,
                r.first_scheduled_s,
                r.first_token_s,
                r.finish_s,
                r.prompt_tokens,
                r.output_tokens,
                r.cached_tokens,
                r.num_preemptions,
                r.outcome.value,
                r.reason,
                r.deadline_s,
                met,
            )
            for name, value in zip(REQUEST_COLUMNS, row, strict=True):
                table[name].append(value)
    return table


def job_table(results: Mapping[str, RunResult]) -> Columns:
    """Column name -> values over every job of every run; ``deadline_met`` as counted by ``summarize``."""
    table: Columns = {name: [] for name in JOB_COLUMNS}
    for policy, result in results.items():
        missed_tokens = token_slo_missed_jobs(result.requests)
        for j in result.jobs:
            met = j.deadline_met and j.id not in missed_tokens
            row = (
                policy,
                j.id,
                j.kind.value,
                j.template,
                j.tenant,
                j.arrival_s,
                j.finish_s,
                j.latency_s,
                j.slo_s,
                j.no_contention_s,
                j.num_requests,
                j.outcome.value,
                j.reason,
                met,
            )
            for name, value in zip(JOB_COLUMNS, row, strict=True):
                table[name].append(value)
    return table


def write_csv(path: Path, table: Columns) -> Path:
    names = list(table)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        writer.writerows(zip(*(map(_csv_cell, table[name]) for name in names), strict=True))
    return path


def _csv_cell(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return repr(value)  # shortest round-tripping form; inf stays "inf"
    return value


def write_parquet(path: Path, table: Columns) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(table), path)
    return path


def write_exports(folder: Path, results: Mapping[str, RunResult]) -> list[Path]:
    """``requests.parquet`` (or ``requests.csv`` without pyarrow) and ``jobs.csv`` in ``folder``."""
    requests = request_table(results)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        request_path = write_csv(folder / "requests.csv", requests)
    else:
        request_path = write_parquet(folder / "requests.parquet", requests)
    return [request_path, write_csv(folder / "jobs.csv", job_table(results))]
