"""``bench stack-limits``: the two ceilings from a stack run's figures, label parsing, the page."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import slosched.bench.stack_limits.runs as stack_limits
from slosched.bench.stack_limits.report import write_page
from slosched.core.errors import ConfigError

ROW = {
    "strongest_baseline": "prism+chunked-fcfs[token_budget=512]",
    "capacity_rps": {"prism+chunked-fcfs[token_budget=512]": 10.0, "slosched": 12.0},
    "ratio_vs_strongest": 1.2,
    "capacity_target": 1.2,
    "goodput_ratio_2x": 1.1,
    "strongest_per_load": {"2x": {"label": "x", "goodput": 8.0}},
}


def test_ceilings_follow_from_saturation_and_the_baselines_overload_goodput() -> None:
    limits = stack_limits.limits_of("chat", ROW, {"slosched": 11.0, "prism": 10.5})
    assert limits["capacity_ceiling_ratio"] == pytest.approx(1.1)  # best saturation / strongest capacity
    assert limits["goodput_ceiling_2x"] == pytest.approx(2.5)  # 2 x 10 / 8: arrivals bound goodput
    assert limits["strongest_goodput_2x_over_capacity"] == pytest.approx(0.8)
    no_overload = dict(ROW, strongest_per_load={})
    assert math.isnan(stack_limits.limits_of("chat", no_overload, {"slosched": 1.0})["goodput_ceiling_2x"])


def test_labels_name_their_policy_and_engine_parameters() -> None:
    assert stack_limits._policy_text("least-tokens+static-concurrency[cap=64]") == "least-tokens+static-concurrency"
    assert stack_limits._engine_params("least-tokens+static-concurrency[cap=64]") == {"cap": 64}
    assert stack_limits._engine_params("slosched") == {}


def test_figures_load_from_a_printed_run_and_the_page_reads_them(tmp_path: Path) -> None:
    printed = tmp_path / "stack.json"
    printed.write_text("progress line\n" + json.dumps({"workloads": {"chat": ROW}, "mode": "full"}) + "\n")
    assert stack_limits.load_stack_figures(printed)["workloads"]["chat"] == ROW
    limits = stack_limits.limits_of("chat", dict(ROW, ratio_vs_strongest=1.0), {"slosched": 11.0, "prism": 10.5})
    page = write_page(tmp_path / "limits.md", {"workloads": {"chat": limits}, "seeds": 2, "source_mode": "full"})
    text = page.read_text()
    assert (
        "| chat |" in text
        and "1.10x" in text
        and "2.50x" in text
        and "above the sustained throughput these policies reach (1.10x)" in text
    )


def test_a_capacity_above_the_sustained_throughput_is_read_as_a_burst(tmp_path: Path) -> None:
    limits = stack_limits.limits_of("chat", ROW, {"slosched": 11.0, "prism": 10.5})  # measured 1.2x > 1.1x
    page = write_page(tmp_path / "limits.md", {"workloads": {"chat": limits}, "seeds": 2, "source_mode": "full"})
    assert "partly absorbed as a burst" in page.read_text()


def test_a_missing_or_foreign_stack_json_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"SLOSCHED_STACK_JSON.*cannot read"):
        stack_limits.load_stack_figures(tmp_path / "absent.json")
    other = tmp_path / "other.json"
    other.write_text('{"cases": []}\n')
    with pytest.raises(ConfigError, match="no 'workloads'"):
        stack_limits.load_stack_figures(other)


def test_a_ceiling_holds_only_where_no_capacity_exceeds_it_by_more_than_five_percent() -> None:
    # The stack's capacity 12.0 against the best sustained throughput: above 1.05x it is no ceiling.
    assert not stack_limits.limits_of("chat", ROW, {"slosched": 11.0, "prism": 10.5})["ceiling_holds"]
    held = stack_limits.limits_of("chat", ROW, {"slosched": 11.5, "prism": 10.5})
    assert held["ceiling_holds"] and held["sustained_jobs_per_s"] == 11.5
    assert held["max_capacity_over_sustained"] == pytest.approx(12.0 / 11.5)
    assert stack_limits._best({1.0: [3.0, 5.0], 2.0: [4.0, 4.5], 3.0: [math.nan]}) == pytest.approx(4.25)


def test_a_baseline_that_collapses_at_2x_bounds_no_ratio_there(tmp_path: Path) -> None:
    collapsed = dict(ROW, strongest_per_load={"2x": {"label": "x", "goodput": 0.02}})  # 0.002 of its capacity
    limits = stack_limits.limits_of("code", collapsed, {"slosched": 13.0, "prism": 10.5})
    assert math.isnan(limits["goodput_ceiling_2x"])  # 2 x 10 / 0.02 = 1000x would bound nothing
    page = write_page(tmp_path / "limits.md", {"workloads": {"code": limits}, "seeds": 2, "source_mode": "full"})
    assert "collapses (it keeps 0.00 of its capacity as goodput): no ratio against it there is bounded" in (
        page.read_text()
    )
    kept = dict(ROW, strongest_per_load={"2x": {"label": "x", "goodput": 1.0}})  # 0.1 of its capacity: a bound
    assert stack_limits.limits_of("code", kept, {"slosched": 13.0})["goodput_ceiling_2x"] == pytest.approx(20.0)
