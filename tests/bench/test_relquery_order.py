"""``bench relquery-order``: the same relQueries under both orders, the report page, and one real search."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("bokeh_sampledata")

import slosched.bench.relquery_order.runs as runs
import slosched.bench.relquery_order.setup as setup
from slosched.bench.relquery_order.report import PLOT, write_page
from slosched.evaluation import sizing


def test_both_orders_run_the_same_relqueries_only_the_order_and_groups_differ() -> None:
    table = setup.relquery_jobs("table", 12, seed=3)
    fields = setup.relquery_jobs("fields", 12, seed=3)
    assert [job.arrival_s for job in table] == [job.arrival_s for job in fields]
    for before, after in zip(table, fields, strict=True):
        calls_before, calls_after = before.stages[0].calls, after.stages[0].calls
        assert len(calls_before) == len(calls_after)
        # The same lines in another order: the same prompt tokens and the same outputs, row for row.
        assert sum(call.input_tokens for call in calls_before) == sum(call.input_tokens for call in calls_after)
        assert sorted(call.output_tokens for call in calls_before) == sorted(call.output_tokens for call in calls_after)
        assert all(call.group_key is None for call in calls_before)  # titles lead: nothing repeats
    assert any(call.group_key is not None for job in fields for call in job.stages[0].calls)


def test_every_candidate_runs_both_orders() -> None:
    from slosched.evaluation.workbench import simulate_candidate

    for order in setup.ORDERS:
        bench = setup.workbench(order, quick=True)
        jobs, history = bench.workload(1.0, seed=1)
        for candidate in setup.candidates():
            result = simulate_candidate(candidate, bench.instances, jobs[:6], bench.options, 1, history)
            assert len(result.jobs) == 6, candidate.label


def test_plans_are_those_of_the_jobs() -> None:
    jobs = setup.relquery_jobs("fields", 5, seed=2)
    plans = setup.relquery_plans("fields", 5, seed=2)
    assert [plan.num_rows for plan in plans] == [len(job.stages[0].calls) for job in jobs]


def _figures() -> dict[str, Any]:
    labels = [item.label for item in setup.candidates()]

    def spread(median: float) -> dict[str, Any]:
        return {"median": median, "min": median * 0.9, "max": median * 1.1, "values": [median]}

    orders = {
        order: {
            "capacity": {label: spread(1.0 + index + shift) for index, label in enumerate(labels)},
            "strongest_baseline": labels[3],
            "vs_strongest": {labels[0]: 1.0 / (4.0 + shift), labels[1]: 2.0 / (4.0 + shift)},
        }
        for order, shift in (("table", 0.0), ("fields", 0.2))
    }
    convergence = {
        order: {labels[0]: {"capacity": 1.0, "capacity_4x": 0.9, "steady_state": False}} for order in setup.ORDERS
    }
    return {
        "mode": "full",
        "seeds": [1, 2],
        "num_jobs": 60,
        "target": 0.9,
        "truth": ["vllm-v1"],
        "orders": orders,
        "order_gain": {label: (1.2 + index) / (1.0 + index) for index, label in enumerate(labels)},
        "convergence": convergence,
        "reuse": {order: {"adjacent_shared_share": 0.4, "simulated_hit_share": 0.2} for order in setup.ORDERS},
        "wall_s": 60.0,
    }


def test_the_page_shows_capacities_gains_convergence_and_the_plot(tmp_path: Path) -> None:
    page = write_page(tmp_path / "relquery-order.md", _figures()).read_text(encoding="utf-8")
    assert "| `slosched` | 1.000 [0.900-1.100] | 1.200 [1.080-1.320] | 1.20x |" in page
    assert "| `table` | `cache-aware+fcfs/prefix-wait/chunked[token_budget=512]` | `slosched` | **0.25x** |" in page
    assert "**no**" in page  # not steady at 4x
    assert (tmp_path / PLOT).stat().st_size > 0


@pytest.mark.slow
def test_one_search_per_order_finds_a_capacity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(setup, "QUICK", setup.Sizes(20, 5, (1,)))
    capacities = {order: runs._search((order, "slosched", 1, True, False)) for order in setup.ORDERS}
    for capacity, long in capacities.values():
        assert capacity > 0 and math.isnan(long)


def test_the_full_form_sizes_runs_by_the_work_rule_and_the_quick_form_does_not() -> None:
    assert setup.workbench("fields", quick=False).work_tolerance == sizing.WORK_TOLERANCE
    assert setup.workbench("fields", quick=True).work_tolerance is None
