"""``bench stack`` in parts (``bench/stack/parts.py``): a subset of workloads, saved parts, and a run assembled
from them giving the figures the one run gave."""

from __future__ import annotations

import json
import math
import pickle
from dataclasses import replace
from pathlib import Path

import pytest

import slosched.bench.stack.parts as parts
import slosched.bench.stack.refresh as refresh
import slosched.bench.stack.runs as stack
import slosched.bench.stack.setup as stack_setup
from slosched.bench.stack.figures import WorkloadRun
from slosched.bench.stack.setup import WORKLOADS, Sizes
from slosched.core.errors import ConfigError
from slosched.evaluation import sizing, task_cache
from slosched.evaluation.baseline_plan import BaselinePlan
from slosched.evaluation.board import Scoreboard
from slosched.evaluation.judgement import JUDGEMENT_NAME
from slosched.metrics.summary import json_safe
from tests.bench.test_stack import STAND_IN


def _empty_run(name: str = "code", seeds: tuple[int, ...] = (1, 2)) -> WorkloadRun:
    workload = next(item for item in WORKLOADS if item.name == name)
    return WorkloadRun(workload, workload.quick, Scoreboard(name, workload.quick.num_jobs, seeds), 12.0, 20.0)


def test_the_chosen_workloads_keep_the_bench_order_and_unknown_names_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(parts.WORKLOADS_ENV, raising=False)
    assert parts.chosen_workloads(WORKLOADS) == WORKLOADS
    monkeypatch.setenv(parts.WORKLOADS_ENV, " mixed, text2sql ")
    assert [item.name for item in parts.chosen_workloads(WORKLOADS)] == ["text2sql", "mixed"]
    monkeypatch.setenv(parts.WORKLOADS_ENV, "chat,sql")
    with pytest.raises(ConfigError, match=r"SLOSCHED_STACK_WORKLOADS.*unknown workload\(s\) sql; allowed: text2sql"):
        parts.chosen_workloads(WORKLOADS)


def test_a_saved_part_loads_only_for_its_mode_seeds_and_sizes(tmp_path: Path) -> None:
    run = _empty_run()
    path = parts.save_part(tmp_path, run, quick=True)
    assert path.name == "quick-code.pkl" and not list(tmp_path.glob("*.tmp"))
    loaded = parts.load_part(tmp_path, run.workload, quick=True, seeds=(1, 2))
    assert loaded is not None and loaded.loaded and not run.loaded
    assert (loaded.board, loaded.sizes, loaded.wall_s, loaded.cpu_s) == (run.board, run.sizes, 12.0, 20.0)
    assert parts.load_part(tmp_path, run.workload, quick=False, seeds=(1, 2)) is None  # no full part
    assert parts.load_part(tmp_path, run.workload, quick=True, seeds=(1, 2, 3)) is None
    bigger = replace(run.workload, quick=Sizes(run.sizes.num_jobs + 1, run.sizes.num_warmup_jobs))
    assert parts.load_part(tmp_path, bigger, quick=True, seeds=(1, 2)) is None


def test_full_forms_run_the_work_rule_and_a_part_saved_without_it_is_measured_again(tmp_path: Path) -> None:
    assert all(
        item.full.work_tolerance == sizing.WORK_TOLERANCE and item.quick.work_tolerance is None for item in WORKLOADS
    )
    workload = next(item for item in WORKLOADS if item.name == "relquery")
    assert workload.workbench(quick=False).work_tolerance == sizing.WORK_TOLERANCE
    assert workload.workbench(quick=True).work_tolerance is None
    # A part pickled before the rule holds the two counts only: it reads as measured without the rule.
    old = Sizes.__new__(Sizes)
    old.__setstate__([workload.full.num_jobs, workload.full.num_warmup_jobs])
    assert old == replace(workload.full, work_tolerance=None) != workload.full
    board = Scoreboard("relquery", workload.full.num_jobs, (1, 2))
    parts.save_part(tmp_path, WorkloadRun(workload, old, board, 12.0, 20.0), quick=False)
    assert parts.load_part(tmp_path, workload, quick=False, seeds=(1, 2)) is None
    parts.save_part(tmp_path, WorkloadRun(workload, workload.full, board, 12.0, 20.0), quick=False)
    assert parts.load_part(tmp_path, workload, quick=False, seeds=(1, 2)) is not None


def test_a_part_judged_another_way_is_measured_again(tmp_path: Path) -> None:
    run = _empty_run()
    assert run.judgement == JUDGEMENT_NAME
    parts.save_part(tmp_path, replace(run, judgement="all jobs, and the second half strictly"), quick=True)
    assert parts.load_part(tmp_path, run.workload, quick=True, seeds=(1, 2)) is None
    # A part pickled before runs named their judgement lacks the slot: judged the old way, measured again.
    path = parts.part_path(tmp_path, "code", quick=True)
    older = WorkloadRun.__new__(WorkloadRun)
    for name in ("workload", "sizes", "board", "wall_s", "cpu_s", "loaded", "topped_up"):
        setattr(older, name, getattr(run, name))
    path.write_bytes(pickle.dumps(older))
    assert parts.load_part(tmp_path, run.workload, quick=True, seeds=(1, 2)) is None


def test_a_part_that_is_not_reused_says_why(tmp_path: Path) -> None:
    run = _empty_run()
    assert parts.stale_part(tmp_path, run.workload, quick=True, seeds=(1, 2)) is None  # none saved
    parts.save_part(tmp_path, run, quick=True)
    assert parts.stale_part(tmp_path, run.workload, quick=True, seeds=(1, 2)) is None  # it loads
    assert "seeds [1, 2], this run's are [1, 2, 3]" in str(parts.stale_part(tmp_path, run.workload, True, (1, 2, 3)))
    bigger = replace(run.workload, quick=Sizes(run.sizes.num_jobs + 1, run.sizes.num_warmup_jobs))
    assert "this run's are Sizes(num_jobs=" in str(parts.stale_part(tmp_path, bigger, True, (1, 2)))
    parts.save_part(tmp_path, replace(run, judgement=None), quick=True)
    assert "judged 'before judgement.py'" in str(parts.stale_part(tmp_path, run.workload, True, (1, 2)))


def test_a_stale_part_is_announced_and_a_top_up_run_refuses_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _empty_run()
    parts.save_part(tmp_path, replace(run, judgement=None), quick=True)
    monkeypatch.setenv(parts.PARTS_ENV, str(tmp_path))
    monkeypatch.setattr(stack_setup, "WORKLOADS", (run.workload,))
    monkeypatch.setattr(stack, "QUICK_SEEDS", (1, 2))
    monkeypatch.setattr(stack, "score", _must_not_measure)
    monkeypatch.setenv(refresh.REMEASURE_ENV, "stack")
    with pytest.raises(ConfigError, match=r"SLOSCHED_STACK_REMEASURE.*quick-code\.pkl cannot be topped up.*judged"):
        stack.run(quick=True)  # refused before anything is measured
    monkeypatch.delenv(refresh.REMEASURE_ENV)
    monkeypatch.setattr(stack, "score", lambda workload, quick, seeds, **resumable: run)
    assert stack.measured_or_saved(run.workload, True, (1, 2)) is run  # measured whole (and saved), ...
    assert "is not reused (judged 'before judgement.py'" in capsys.readouterr().out  # ... saying why
    assert parts.stale_part(tmp_path, run.workload, True, (1, 2)) is None


def test_an_unreadable_part_fails_naming_the_file(tmp_path: Path) -> None:
    run = _empty_run()
    for damaged in (b"not a pickle", b"garbage\n"):  # the second fails unpickling with a ValueError
        parts.part_path(tmp_path, "code", quick=True).write_bytes(damaged)
        with pytest.raises(ConfigError, match=r"SLOSCHED_STACK_PARTS.*quick-code\.pkl.*delete it to rerun"):
            parts.load_part(tmp_path, run.workload, quick=True, seeds=(1, 2))


def test_a_run_assembled_from_parts_gives_the_figures_of_the_one_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(stack_setup, "STACK_POLICY", STAND_IN[0])
    monkeypatch.setattr(stack_setup, "STACK_SELF_TUNE", False)
    monkeypatch.setattr(stack_setup, "STACK_JOB_POLICY", STAND_IN[1])
    plan = BaselinePlan(token_budgets=(512,), caps=(64,), routers=("least-tokens",))
    monkeypatch.setattr(stack_setup, "baseline_plan", lambda quick: plan)
    monkeypatch.setattr(stack, "QUICK_SEEDS", (1,))
    monkeypatch.setattr(sizing, "WINDOW_FACTOR", 2.0)  # a tiny run: the rule itself is tested in evaluation
    monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", "1")
    tiny_code = replace(stack_setup.CODE, quick=Sizes(16, 4))
    tiny_chat = replace(stack_setup.CHAT, quick=Sizes(16, 4))
    monkeypatch.setattr(stack_setup, "WORKLOADS", (tiny_code, tiny_chat))
    monkeypatch.setenv(parts.PARTS_ENV, str(tmp_path / "parts"))
    monkeypatch.setenv(stack.REPORT_ENV, str(tmp_path / "page"))

    monkeypatch.setenv(parts.WORKLOADS_ENV, "code")  # one part now ...
    first = stack.run(quick=True)
    assert list(first["workloads"]) == ["code"] and first["left_out"] == ["chat"] and not first["loaded_parts"]
    assert "Not in this run: chat" in (tmp_path / "page" / "stack.md").read_text(encoding="utf-8")
    monkeypatch.setenv(parts.WORKLOADS_ENV, "code,chat")  # ... the other later, the first read back
    whole = stack.run(quick=True)
    assert list(whole["workloads"]) == ["code", "chat"] and whole["loaded_parts"] == ["code"]
    assert whole["workloads"]["code"] == first["workloads"]["code"]
    assert whole["wall_s"] >= first["workloads"]["code"]["wall_s"] and not whole["left_out"]
    page = (tmp_path / "page" / "stack.md").read_text(encoding="utf-8")
    assert "Assembled from saved parts" in page and "their time included above: code." in page
    assert "Not in this run" not in page

    monkeypatch.setattr(stack, "score", _must_not_measure)  # both saved now: nothing is measured again
    again = stack.run(quick=True)
    assert again["loaded_parts"] == ["code", "chat"]
    assert again["workloads"] == whole["workloads"]
    assert math.isfinite(again["min_ratio_vs_strongest"])

    # The bench gains a load: each saved part is measured at that load only, and saved again with it.
    monkeypatch.setattr(stack, "LOADS", (*stack.LOADS, 4.0))
    grown = stack.run(quick=True)
    for name, row in grown["workloads"].items():
        per_load = row["goodput_ratio_per_load"]
        assert list(per_load)[-1] == "4x"
        kept = {load: value for load, value in per_load.items() if load != "4x"}
        assert _same(kept, again["workloads"][name]["goodput_ratio_per_load"])
    monkeypatch.setattr(refresh, "overload_runs", _must_not_measure)  # measured at 4x and saved: read back
    assert _same(stack.run(quick=True)["workloads"], grown["workloads"])


def _tiny_quick_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stand_in: tuple[str, str]) -> None:
    monkeypatch.setattr(stack_setup, "STACK_POLICY", stand_in[0])
    monkeypatch.setattr(stack_setup, "STACK_JOB_POLICY", stand_in[1])
    monkeypatch.setattr(stack_setup, "STACK_SELF_TUNE", False)
    plan = BaselinePlan(token_budgets=(512,), caps=(64,), routers=("least-tokens",))
    monkeypatch.setattr(stack_setup, "baseline_plan", lambda quick: plan)
    monkeypatch.setattr(stack, "QUICK_SEEDS", (1,))
    monkeypatch.setattr(sizing, "WINDOW_FACTOR", 2.0)
    monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", "1")
    monkeypatch.setattr(stack_setup, "WORKLOADS", (replace(stack_setup.CODE, quick=Sizes(16, 4)),))
    monkeypatch.setenv(stack.REPORT_ENV, str(tmp_path / "page"))
    # The runs of one test repeat each other's simulations (a part saved, then read back, topped up or resumed);
    # one task cache per test hands them back as a resumed bench gets them, and the parts logic above it runs
    # whole. The cache key cannot see patched module globals, and within one test they are the same in every
    # run but the stand-in policy, which is in each task's candidate.
    monkeypatch.setenv(task_cache.CACHE_ENV, str(tmp_path / "tasks"))


def test_the_stack_measured_again_on_saved_baselines_gives_the_figures_of_a_fresh_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    other = ("least-tokens+static-priority", "stage-budget")
    _tiny_quick_bench(monkeypatch, tmp_path, other)
    monkeypatch.setenv(parts.PARTS_ENV, str(tmp_path / "fresh"))
    fresh = stack.run(quick=True)["workloads"]["code"]

    _tiny_quick_bench(monkeypatch, tmp_path, STAND_IN)  # a part saved with another stack ...
    monkeypatch.setenv(parts.PARTS_ENV, str(tmp_path / "parts"))
    saved = stack.run(quick=True)["workloads"]["code"]
    assert saved["capacity_rps"]["slosched"] != fresh["capacity_rps"]["slosched"]

    _tiny_quick_bench(monkeypatch, tmp_path, other)  # ... its stack rows measured again, baselines kept
    monkeypatch.setattr(stack, "score", _must_not_measure)
    monkeypatch.setenv(refresh.REMEASURE_ENV, "stack")
    again = stack.run(quick=True)
    assert again["loaded_parts"] == ["code"]
    row = again["workloads"]["code"]
    for field in ("capacity_rps", "strongest_baseline", "goodput_ratio_per_load", "ratio_vs_strongest"):
        assert _same(row[field], fresh[field]), field
    monkeypatch.delenv(refresh.REMEASURE_ENV)  # saved with the new rows: read back as they are
    monkeypatch.setattr(refresh, "overload_runs", _must_not_measure)
    assert _same(stack.run(quick=True)["workloads"]["code"]["capacity_rps"], fresh["capacity_rps"])


def test_a_saved_part_gains_the_baselines_the_plan_now_sweeps(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A part saved before the refinement step: the baselines it lacks are measured, and the figures are
    those of a fresh run with the refinement (the strongest baseline and every overload figure included)."""
    routers = ("least-tokens", "prism")
    before = BaselinePlan(token_budgets=(512, 2048), caps=(16, 64), routers=routers, refine_margin=-1.0)
    after = replace(before, refine_margin=1.0)  # every router refined: one new candidate at least
    _tiny_quick_bench(monkeypatch, tmp_path, STAND_IN)
    monkeypatch.setattr(stack, "QUICK_SEEDS", (1, 2))
    monkeypatch.setattr(stack_setup, "baseline_plan", lambda quick: after)
    monkeypatch.setenv(parts.PARTS_ENV, str(tmp_path / "fresh"))
    fresh = stack.run(quick=True)["workloads"]["code"]

    monkeypatch.setattr(stack_setup, "baseline_plan", lambda quick: before)
    monkeypatch.setenv(parts.PARTS_ENV, str(tmp_path / "parts"))
    saved = stack.run(quick=True)["workloads"]["code"]
    added = set(fresh["capacity_rps"]) - set(saved["capacity_rps"])
    assert added and all(label.startswith("prism+") for label in added)

    monkeypatch.setattr(stack_setup, "baseline_plan", lambda quick: after)
    monkeypatch.setattr(stack, "score", _must_not_measure)
    monkeypatch.setattr(refresh, "pilot", _must_not_measure)
    as_saved = stack.run(quick=True)  # not asked: read as saved, and the page says what it lacks
    assert not as_saved["workloads"]["code"]["baseline_rounds_complete"]
    assert "not topped up with them" in (tmp_path / "page" / "stack.md").read_text(encoding="utf-8")
    monkeypatch.undo()
    _tiny_quick_bench(monkeypatch, tmp_path, STAND_IN)
    monkeypatch.setattr(stack, "QUICK_SEEDS", (1, 2))
    monkeypatch.setattr(stack_setup, "baseline_plan", lambda quick: after)
    monkeypatch.setenv(parts.PARTS_ENV, str(tmp_path / "parts"))
    monkeypatch.setattr(stack, "score", _must_not_measure)
    monkeypatch.setenv(refresh.REMEASURE_ENV, "baselines")
    again = stack.run(quick=True)["workloads"]["code"]
    assert again["baseline_rounds_complete"] and fresh["baseline_rounds_complete"]
    for field in ("capacity_rps", "strongest_baseline", "goodput_ratio_per_load", "ratio_vs_strongest"):
        assert _same(again[field], fresh[field]), field
    monkeypatch.setattr(refresh, "overload_runs", _must_not_measure)  # saved with them: nothing to add
    monkeypatch.setattr(refresh, "pilot", _must_not_measure)
    assert _same(stack.run(quick=True)["workloads"]["code"]["capacity_rps"], fresh["capacity_rps"])


def test_an_unknown_remeasure_value_fails_naming_the_allowed_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(refresh.REMEASURE_ENV, "stack,everything")
    with pytest.raises(ConfigError, match="got everything; allowed: stack, baselines"):
        refresh.remeasure_asked()
    monkeypatch.setenv(refresh.REMEASURE_ENV, " ")
    assert not refresh.remeasure_asked()
    monkeypatch.setenv(refresh.REMEASURE_ENV, "baselines, stack")
    assert refresh.remeasure_asked() == {"stack", "baselines"}


def _same(left: object, right: object) -> bool:
    """Equal figures, NaN (a ratio with no baseline goodput) equal to NaN."""
    return json.dumps(json_safe(left), sort_keys=True) == json.dumps(json_safe(right), sort_keys=True)


def _must_not_measure(*args: object, **kwargs: object) -> WorkloadRun:
    raise AssertionError("a saved part was measured again")
