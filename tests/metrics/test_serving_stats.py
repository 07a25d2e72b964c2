"""vLLM serving-benchmark terms from simulator records: throughput, goodput, TTFT/TPOT/ITL/e2e in ms; ITL
pools each request's equal gaps (its TPOT) weighted by their number, as the records hold no token times."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import yaml

from slosched.cli.main import run
from slosched.core.records import RequestRecord
from slosched.core.request import Outcome
from slosched.metrics.serving import median_over_runs, serving_stats
from tests.scenario.test_config import BASE

_VLLM_KEYS = {
    *("duration", "completed", "total_input_tokens", "total_output_tokens", "request_throughput"),
    *("request_goodput", "output_throughput", "total_token_throughput"),
    *(f"{stat}_{name}_ms" for name in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p99")),
}


def _record(index: int, tokens: int, finish_s: float, deadline_s: float = math.inf) -> RequestRecord:
    return RequestRecord(
        id=f"r{index}",
        job_id=f"j{index}",
        stage="s",
        instance="i",
        arrival_s=0.0,
        prompt_tokens=10,
        output_tokens=tokens,
        outcome=Outcome.COMPLETED,
        first_token_s=0.1,
        finish_s=finish_s,
        deadline_s=deadline_s,
    )


def test_throughput_goodput_and_latencies_in_vllm_terms() -> None:
    # TPOT 10 ms over 2 gaps, 100 ms over 100 gaps; one single-token request (no TPOT), one missed deadline.
    records = [_record(0, 3, 0.12), _record(1, 101, 10.1), _record(2, 1, 0.1)]
    records.append(_record(3, 3, 0.12, deadline_s=0.11))
    records.append(dataclasses.replace(_record(4, 5, 1.0), outcome=Outcome.REJECTED))
    stats = serving_stats(records, duration_s=2.0)
    assert stats.completed == 4 and stats.total_output_tokens == 108 and stats.total_input_tokens == 40
    assert stats.output_throughput == 54.0 and stats.total_token_throughput == 74.0
    assert stats.request_throughput == 2.0 and stats.request_goodput == 1.5  # 3 of 4 met their deadline
    assert stats.ttft.mean_ms == pytest.approx(100.0)
    assert stats.tpot.median_ms == pytest.approx(10.0)  # per request: 10, 100, 10
    # ITL pooled over 104 gaps: 4 of 10 ms, 100 of 100 ms.
    assert stats.itl.mean_ms == pytest.approx((4 * 10 + 100 * 100) / 104)
    assert stats.itl.median_ms == pytest.approx(100.0) and stats.itl.p99_ms == pytest.approx(100.0)
    assert set(stats.to_json_dict()) == _VLLM_KEYS


def test_a_figure_over_seeds_is_each_keys_median_over_the_runs_where_it_is_finite() -> None:
    runs = [
        {"output_throughput": 10.0, "p99_ttft_ms": math.nan, "completed": 3},
        {"output_throughput": 30.0, "p99_ttft_ms": 5.0, "completed": 4},
        None,  # a run not measured
        {"output_throughput": 20.0, "p99_ttft_ms": 7.0, "completed": 6},
    ]
    assert median_over_runs(runs) == {"output_throughput": 20.0, "p99_ttft_ms": 6.0, "completed": 4.0}
    one = serving_stats([_record(0, 3, 0.12)], duration_s=1.0).to_json_dict()
    assert median_over_runs([one]) == pytest.approx(one, nan_ok=True)  # one seed: its own figures
    assert median_over_runs([]) == {}
    assert math.isnan(median_over_runs([{"p99_itl_ms": math.nan}])["p99_itl_ms"])


def test_a_call_without_a_first_token_time_counts_but_shows_no_ttft() -> None:
    """A live call that was not streamed: throughput, e2e latency and goodput (where it carries no token SLO)
    are known; TTFT, TPOT and ITL are not, and a TTFT SLO it carries cannot be shown met."""
    unknown = [dataclasses.replace(_record(i, 5, 1.0, deadline_s=2.0), first_token_s=math.nan) for i in range(2)]
    unknown[1] = dataclasses.replace(unknown[1], ttft_slo_s=0.5)
    stats = serving_stats(unknown, duration_s=1.0)
    assert stats.completed == 2 and stats.output_throughput == 10.0 and stats.e2el.p99_ms == pytest.approx(1000.0)
    assert stats.request_goodput == 1.0  # the one without a TTFT SLO
    assert math.isnan(stats.ttft.p99_ms) and math.isnan(stats.tpot.mean_ms) and math.isnan(stats.itl.median_ms)


def test_nothing_completed_is_nan_not_an_error() -> None:
    stats = serving_stats([], duration_s=math.nan)
    assert stats.completed == 0 and math.isnan(stats.request_throughput) and math.isnan(stats.itl.p99_ms)


def test_compare_reports_the_serving_section_in_json_and_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({**BASE, "workload": {**BASE["workload"], "num_jobs": 20}}))
    assert run(["compare", str(path), "--json"]) == 0
    text = capsys.readouterr().out
    payload = json.loads(text.strip().splitlines()[-1])
    for figures in payload["policies"].values():
        serving = figures["serving"]
        assert set(serving) == _VLLM_KEYS and serving["completed"] > 0 and serving["output_throughput"] > 0
    assert "serving benchmark terms" in text and "p99 ITL ms" in text and "out tok/s" in text
