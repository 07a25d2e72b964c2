"""requests.parquet / requests.csv and jobs.csv: one row per request / job per policy, fixed columns."""

from __future__ import annotations

import csv
import math
import sys
from dataclasses import replace
from math import nan

import pyarrow.parquet as pq

from slosched.core.request import Outcome
from slosched.metrics.export import JOB_COLUMNS, REQUEST_COLUMNS, write_exports
from slosched.metrics.summary import summarize

from .factories import job, rejected, request, run


def two_runs():
    jobs = [job("a", latency_s=1.0, slo_s=2.0, template="chat", tenant="t1"), job("b", latency_s=3.0, slo_s=2.0)]
    jobs.append(rejected("c"))
    unserved = replace(request("c", outcome=Outcome.REJECTED), first_scheduled_s=nan, first_token_s=nan, finish_s=nan)
    requests = [request("a", ttft_s=0.2), request("b", arrival_s=1.0), unserved]
    requests[0].deadline_s, requests[1].deadline_s = 2.0, 3.0  # b finishes at 1.2 + 0.1: met; a at 0.3: met
    requests[1].instance = "gpu1"
    return {"p1": run(jobs, requests, policy="p1"), "p2": run(jobs[:1], requests[:1], policy="p2")}


def test_parquet_and_jobs_csv_have_one_row_per_record_per_policy(tmp_path):
    results = two_runs()
    paths = write_exports(tmp_path, results)
    assert [p.name for p in paths] == ["requests.parquet", "jobs.csv"]
    table = pq.read_table(tmp_path / "requests.parquet").to_pydict()
    assert tuple(table) == REQUEST_COLUMNS
    assert table["policy"] == ["p1", "p1", "p1", "p2"]
    assert table["template"][:2] == ["chat", "t"] and table["tenant"][0] == "t1"
    assert table["instance"][:2] == ["i0", "gpu1"]
    assert table["outcome"][2] == "rejected" and math.isnan(table["first_token_s"][2])
    assert table["first_token_s"][0] == 0.2 and table["prompt_tokens"][0] == 100
    assert table["deadline_met"] == [True, True, False, True]

    with (tmp_path / "jobs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == JOB_COLUMNS and len(rows) == 4
    met = [row["deadline_met"] == "True" for row in rows if row["policy"] == "p1"]
    assert sum(met) == summarize(results["p1"]).deadline_met == 1
    assert rows[2]["finish_s"] == "" and rows[2]["outcome"] == "rejected"


def test_csv_fallback_without_pyarrow(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    paths = write_exports(tmp_path, two_runs())
    assert [p.name for p in paths] == ["requests.csv", "jobs.csv"]
    with (tmp_path / "requests.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == REQUEST_COLUMNS and len(rows) == 4
    assert rows[0]["first_token_s"] == "0.2" and rows[2]["first_token_s"] == "" and rows[2]["deadline_s"] == "inf"


def test_export_of_empty_runs_writes_headers_only(tmp_path):
    write_exports(tmp_path, {"empty": run(policy="empty")})
    assert pq.read_table(tmp_path / "requests.parquet").num_rows == 0
    assert (tmp_path / "jobs.csv").read_text().strip() == ",".join(JOB_COLUMNS)
