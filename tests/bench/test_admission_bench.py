"""``slosched bench admission``: its variants, loads and figures, on a tiny Text-to-SQL workbench (the
capacity search and the steady-state sizing stubbed, and the self-tuning stack tuned on a tiny window)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import slosched.bench.admission.runs as runs
import slosched.evaluation.workbench as workbench_module
from slosched.bench.admission.setup import LOADS, PLAIN, VARIANTS
from slosched.bench.stack.setup import MIXED, TEXT2SQL, Sizes, StackWorkload

TINY = replace(TEXT2SQL, quick=Sizes(12, 4))


# This file's tunings, kept apart from other files' (the memo's key does not hold the window's size) and shared
# by its tests (two of them run the same variants at the same loads).
_TINY_TUNED: dict[tuple[Any, ...], dict[str, Any]] = {}


@pytest.fixture(autouse=True)
def tiny_tuning_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every variant self-tunes before each run, and its replays of the full 60-job window were 98% of a test's
    time (15 runs, 105 replays: 715 of 733 s); a tiny run tunes on a tiny window."""
    monkeypatch.setattr(workbench_module, "MAX_WINDOW_JOBS", 12)
    monkeypatch.setattr(workbench_module, "_TUNED", _TINY_TUNED)


def test_variants_set_the_two_mechanisms() -> None:
    by_label = {variant.label: variant for variant in VARIANTS}
    # The reference is the stack without job-level admission (on by default since it went through bench stack)
    assert by_label["stack"].candidate().params.stack == {"slosched": {"backlog": False}}
    assert by_label["stack+backlog"].candidate().params.stack == {"slosched": {"backlog": True}}
    assert by_label["stack+reject"].workbench(TINY, True).options.on_infeasible == "reject"
    assert PLAIN.workbench(TINY, True).options.on_infeasible == "relegate"


def test_figures_per_variant_and_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", "1")
    monkeypatch.setattr(runs, "QUICK_WORKLOADS", (TINY,))
    monkeypatch.setattr(runs, "workload", lambda name: TINY)
    monkeypatch.setattr(runs, "steady_capacity", lambda *args: SimpleNamespace(capacity={0.9: 0.4, 0.95: 0.3}))
    monkeypatch.setattr(runs, "steady_jobs", lambda bench, seed, rate: bench.num_jobs)
    figures = runs.run(quick=True)
    row = figures["workloads"]["text2sql"]
    assert row["capacity_rps"] == 0.4  # the loosest target's capacity sets the loads
    loads = [f"{load:g}x" for load in LOADS]
    assert set(row["goodput"]) == {variant.label for variant in VARIANTS if variant.applies_to(TINY)}
    for label, goodput in row["goodput"].items():
        assert list(goodput) == loads and all(math.isfinite(value) for value in goodput.values())
        versus = row["goodput_vs_capacity"][label]
        assert versus == {load: goodput[load] / row["goodput"]["stack"]["1x"] for load in loads}
        assert row["holds"][label] == all(versus[load] >= 1.0 for load in loads[1:])
    assert row["num_jobs"] == {load: 12 for load in loads}


def _quick_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, only: StackWorkload, capacity: float) -> dict[str, Any]:
    """``bench admission --quick`` on ``only`` alone, in one process, its page in ``tmp_path``, with the plain
    stack's capacity search replaced by ``capacity`` (the variants' runs are real)."""
    monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", "1")
    monkeypatch.setenv(runs.REPORT_ENV, str(tmp_path))
    monkeypatch.setattr(runs, "QUICK_WORKLOADS", (only,))
    monkeypatch.setattr(runs, "workload", lambda name: only)
    monkeypatch.setattr(runs, "steady_capacity", lambda *args: SimpleNamespace(capacity={0.9: capacity}))
    monkeypatch.setattr(runs, "steady_jobs", lambda bench, seed, rate: bench.num_jobs)
    return runs.run(quick=True)


def test_the_report_page_shows_every_variant_from_the_figures(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    figures = _quick_run(monkeypatch, tmp_path, TINY, capacity=0.4)
    page = (tmp_path / "admission.md").read_text()
    assert (tmp_path / "admission" / "admission_goodput.png").stat().st_size > 1000
    row = figures["workloads"]["text2sql"]
    for variant in (variant for variant in VARIANTS if variant.applies_to(TINY)):
        goodput = row["goodput"][variant.label]["3x"]
        assert f"| {variant.label} |" in page and f"{goodput:.3f}" in page
    assert "Plain stack's capacity: 0.400 jobs/s" in page


def test_tenant_class_variants_run_only_where_there_are_tenants() -> None:
    by_label = {variant.label: variant for variant in VARIANTS}
    engine_only, both = by_label["stack+backlog+bands (engine)"], by_label["stack+backlog+bands"]
    assert not engine_only.applies_to(TEXT2SQL) and both.applies_to(MIXED) and PLAIN.applies_to(TEXT2SQL)
    fair = both.candidate().params.fair_share
    assert fair is not None and fair.band_of("interactive") < fair.band_of("batch")  # the tighter tenant first
    assert both.candidate().params.stack == {"slosched": {"backlog": True, "tenant_bands": True}}
    assert engine_only.candidate().params.stack == {"slosched": {"backlog": True, "tenant_bands": False}}


def test_a_two_tenant_workload_reports_each_tenants_attainment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tiny_mixed = replace(MIXED, quick=Sizes(16, 4))
    row = _quick_run(monkeypatch, tmp_path, tiny_mixed, capacity=2.0)["workloads"]["mixed"]
    assert set(row["goodput"]) == {variant.label for variant in VARIANTS}  # the band variants too
    tenants = row["attainment_by_tenant"]["stack+backlog+bands"]["2x"]
    assert set(tenants) == {"interactive", "batch"} and all(0.0 <= value <= 1.0 for value in tenants.values())
    page = (tmp_path / "admission.md").read_text()
    assert "Attainment per tenant" in page and "| stack+backlog+bands |" in page
