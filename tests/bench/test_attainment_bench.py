"""``slosched bench attainment``: groups, loads, pooling, the page, and one tiny real run."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import slosched.bench.attainment.runs as runs
import slosched.bench.attainment.setup as setup
import slosched.bench.convergence.setup as convergence_setup
import slosched.bench.stack.setup as stack_setup
from slosched.bench.attainment.report import PLOT, write_page
from slosched.bench.registry import get_benchmark
from slosched.bench.stack.setup import Sizes
from slosched.core.errors import ConfigError, UnknownNameError
from slosched.core.job import JobKind
from slosched.core.records import JobRecord, Outcome
from slosched.metrics.summary import json_safe


def _job(kind: JobKind, template: str, tenant: str = "default") -> JobRecord:
    return JobRecord("j", kind, template, 0.0, Outcome.COMPLETED, 1, 1.0, 0.5, 0.5, tenant=tenant)


def test_groups_are_tenant_and_kind() -> None:
    assert setup.group_of(_job(JobKind.RELQUERY, "amazon/classify", "batch")) == "batch / relquery"
    assert setup.group_of(_job(JobKind.WORKFLOW, "text2sql/chess", "interactive")) == "interactive / text2sql"
    assert setup.group_of(_job(JobKind.SINGLE, "azure-conv")) == "default / azure-conv"


def test_loads_are_fractions_of_the_baselines_capacity(tmp_path: Path) -> None:
    results = tmp_path / "stack.json"
    assert setup.base_rate("mixed", "x", results) == stack_setup.workload("mixed").guess  # no file: the guess
    results.write_text(json.dumps({"workloads": {"mixed": {"capacity_rps": {"x": 3.5, "y": 0.0}}}}))
    assert setup.base_rate("mixed", "x", results) == 3.5
    assert setup.base_rate("mixed", "y", results) == stack_setup.workload("mixed").guess  # none measured
    assert setup.num_jobs("mixed", quick=False) == setup.LENGTH_FACTOR * stack_setup.workload("mixed").full.num_jobs


def test_workloads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert setup.workload_names(quick=True) == setup.QUICK_WORKLOADS
    assert setup.workload_names(quick=False) == setup.FULL_WORKLOADS
    monkeypatch.setenv(setup.WORKLOADS_ENV, "mixed, chat")
    assert setup.workload_names(quick=False) == ("chat", "mixed")
    monkeypatch.setenv(setup.WORKLOADS_ENV, "nope")
    with pytest.raises(UnknownNameError, match="nope"):
        setup.workload_names(quick=False)


def test_seeds_pool_by_jobs_not_by_share() -> None:
    assert runs.pooled([{"a": (9, 10), "b": (1, 2)}, {"a": (0, 90)}]) == {"a": (9, 100), "b": (1, 2)}


def test_the_page_shows_every_group_and_load(tmp_path: Path) -> None:
    row = {
        "policies": ["slosched", "prism+chunked-fcfs[token_budget=512]"],
        "base_rate": 3.3,
        "rates": [1.65, 3.3, 4.95],
        "num_jobs": 1200,
        "groups": {
            "interactive / azure-conv": {
                "slosched": [[97, 100], [81, 100], [70, 100]],
                "prism+chunked-fcfs[token_budget=512]": [[84, 100], [81, 100], [74, 100]],
            }
        },
        "overall": {"slosched": [0.97, 0.81, 0.70], "prism+chunked-fcfs[token_budget=512]": [0.84, 0.81, 0.74]},
    }
    figures = {"mode": "full", "seeds": [1, 2], "loads": [0.5, 1.0, 1.5], "workloads": {"mixed": row}, "wall_s": 60}
    page = write_page(tmp_path / "attainment.md", json.loads(json.dumps(json_safe(figures)))).read_text()
    assert "## mixed: `slosched` / `prism+chunked-fcfs[token_budget=512]`" in page
    assert "| interactive / azure-conv | 100 | **0.970** / 0.840 | 0.810 / 0.810 | 0.700 / **0.740** |" in page
    assert "| **all** | | **0.970** / 0.840 |" in page
    assert (tmp_path / PLOT).stat().st_size > 0


def test_a_tiny_run_counts_every_measured_job_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(stack_setup, "STACK_POLICY", "prism+urgency")
    monkeypatch.setattr(stack_setup, "STACK_JOB_POLICY", "stage-budget")
    monkeypatch.setattr(stack_setup, "STACK_SELF_TUNE", False)
    tiny = replace(stack_setup.CODE, quick=Sizes(12, 4))
    monkeypatch.setattr(stack_setup, "WORKLOADS", (tiny,))
    monkeypatch.setattr(convergence_setup, "STACK_RESULTS", tmp_path / "absent.json")
    monkeypatch.setattr(setup, "STACK_RESULTS", tmp_path / "absent.json")
    monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", "1")  # in-process, so the runs see the patched settings
    assert get_benchmark("attainment").run is runs.run
    figures = json.loads(json.dumps(json_safe(runs.run(quick=True))))
    row = figures["workloads"]["code"]
    assert row["policies"] == ["slosched", convergence_setup.REFERENCE_BASELINE]
    assert row["rates"] == pytest.approx([load * tiny.guess for load in setup.LOADS])
    for index in range(len(setup.LOADS)):
        for label in row["policies"]:
            assert sum(cells[label][index][1] for cells in row["groups"].values()) == 12  # each job once
        # The same jobs under both policies: every group holds as many jobs for each.
        for cells in row["groups"].values():
            ours, theirs = (cells[label][index][1] for label in row["policies"])
            assert ours == theirs
    assert all(0.0 <= share <= 1.0 for shares in row["overall"].values() for share in shares)


def test_a_variant_of_the_stack_is_pinned_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    assert setup.stack_settings() == {} and setup.stack_candidate({}) == stack_setup.stack_candidates()[0]
    monkeypatch.setenv(setup.STACK_ENV, '{"relegated_strict_from": null}')
    settings = setup.stack_settings()
    variant = setup.stack_candidate(settings)
    assert variant.label == 'slosched {"relegated_strict_from": null}'
    assert variant.params.stack["slosched"]["relegated_strict_from"] is None  # pinned: the tuner leaves it
    for text, message in (
        ("[1", "not JSON"),
        ("[1]", "a JSON object"),
        ('{"nope": 1}', "unknown parameter 'nope'"),
        ('{"token_budget": "big"}', "token_budget: expected int"),  # values too, before any run starts
        ('{"triage_factor": -1}', "triage_factor: must be >= 0"),
    ):
        monkeypatch.setenv(setup.STACK_ENV, text)
        with pytest.raises(ConfigError, match=message):
            setup.stack_settings()


def test_loads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert setup.loads() == setup.LOADS
    monkeypatch.setenv(setup.LOADS_ENV, "1, 2")
    assert setup.loads() == (1.0, 2.0)
    for text in ("1,x", "0", "1,-2", "inf"):
        monkeypatch.setenv(setup.LOADS_ENV, text)
        with pytest.raises(ConfigError, match="multiples of capacity"):
            setup.loads()


def test_seeds_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert setup.seeds(quick=False) == setup.FULL_SEEDS and setup.seeds(quick=True) == setup.QUICK_SEEDS
    monkeypatch.setenv(setup.SEEDS_ENV, "4, 5")
    assert setup.seeds(quick=True) == (4, 5)
    for text in ("1,x", "-1", "2,2", ","):
        monkeypatch.setenv(setup.SEEDS_ENV, text)
        with pytest.raises(ConfigError, match="SLOSCHED_ATTAINMENT_SEEDS"):
            setup.seeds(quick=False)


def test_another_baseline_is_checked_before_any_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(convergence_setup, "STACK_RESULTS", tmp_path / "absent.json")
    assert setup.baseline_label("mixed") == convergence_setup.REFERENCE_BASELINE  # unset: the strongest found
    monkeypatch.setenv(setup.BASELINE_ENV, "cache-aware+chunked-fcfs[token_budget=256]")
    assert setup.baseline_label("mixed") == "cache-aware+chunked-fcfs[token_budget=256]"
    for text, message in (
        ("nope+fcfs", "unknown name 'nope'"),
        ("cache-aware", "expected ROUTER\\+ENGINE"),
        ("cache-aware+chunked-fcfs[bogus=3]", "unknown parameter 'bogus'"),
    ):
        monkeypatch.setenv(setup.BASELINE_ENV, text)
        with pytest.raises(ConfigError, match=message) as raised:
            setup.baseline_label("mixed")
        assert "SLOSCHED_ATTAINMENT_BASELINE" in str(raised.value)
