"""``bench ablation``: its variants switch one setting of the stack each, the workload choice, the figures
(spread and ratio to the full stack), the page's readings, and one real capacity search per variant kind."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import slosched.bench.ablation.runs as ablation
import slosched.bench.ablation.setup as setup
from slosched.bench.ablation.report import write_page
from slosched.core.errors import ConfigError
from slosched.evaluation.workbench import SELF_TUNE
from slosched.policies.stacks.base import STACKS


def test_every_ablation_changes_one_setting_of_the_layer_it_names() -> None:
    assert setup.VARIANTS[0] is setup.FULL_STACK and setup.FULL_STACK.candidate().params.stack == {}
    labels = [item.label for item in setup.VARIANTS]
    assert len(set(labels)) == len(labels)
    stack = STACKS["slosched"]
    assert setup.FULL_STACK.candidate().extra(SELF_TUNE)
    for item in setup.ABLATIONS:
        candidate = item.candidate()
        if not item.self_tune:  # the stack's own settings, untuned: every knob at its hand-chosen default
            assert not candidate.extra(SELF_TUNE) and not item.settings and candidate.params.stack == {}
            continue
        assert candidate.extra(SELF_TUNE)
        assert candidate.params.stack == {"slosched": dict(item.settings)} and candidate.label == item.label
        router, engine, job = stack.split_params(dict(item.settings))  # an unknown key would raise
        assert len(item.settings) == 1 and {"router": router, "engine": engine, "job": job}[item.layer]


def test_the_workload_choice_defaults_by_mode_and_names_unknown_workloads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(setup.WORKLOADS_ENV, raising=False)
    assert setup.selected_workloads(quick=True) == ("chat",)
    assert setup.selected_workloads(quick=False) == ("text2sql", "relquery", "chat", "code", "mixed")
    monkeypatch.setenv(setup.WORKLOADS_ENV, " code, chat ")
    assert setup.selected_workloads(quick=False) == ("code", "chat")
    monkeypatch.setenv(setup.WORKLOADS_ENV, "chat,sql")
    with pytest.raises(ConfigError, match=r"SLOSCHED_ABLATION_WORKLOADS.*\['sql'\].*allowed"):
        setup.selected_workloads(quick=True)


def test_the_variant_choice_keeps_the_full_stack_and_names_unknown_labels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(setup.VARIANTS_ENV, raising=False)
    assert setup.selected_variants() == setup.VARIANTS
    monkeypatch.setenv(setup.VARIANTS_ENV, " -deadline-guard, -affinity-yields ")
    # The full stack first (every ratio's reference), then the named rows in the bench's order.
    assert [item.label for item in setup.selected_variants()] == ["slosched", "-affinity-yields", "-deadline-guard"]
    monkeypatch.setenv(setup.VARIANTS_ENV, "-triage,-magic")
    with pytest.raises(ConfigError, match=r"SLOSCHED_ABLATION_VARIANTS.*\['-magic'\].*allowed"):
        setup.selected_variants()
    monkeypatch.setenv(setup.VARIANTS_ENV, "slosched")  # nothing to compare the stack with
    with pytest.raises(ConfigError, match=r"SLOSCHED_ABLATION_VARIANTS.*names no ablation.*allowed"):
        setup.selected_variants()


def _row() -> dict[str, object]:
    capacities = {item.label: [10.0, 12.0, 11.0] for item in setup.VARIANTS}
    capacities["-tpot-residents"] = [8.0, 8.5, 7.5]  # far below the full stack: it needs the mechanism
    capacities["-triage"] = [11.2, 10.9, 11.1]  # within the spread
    capacities["-job-triage"] = [math.nan, 14.0, 13.0]  # a failed seed is left out of the median
    return ablation.ablation_row(capacities)


def test_the_ratio_is_the_variants_median_over_the_full_stacks() -> None:
    row = _row()
    assert row["capacity"]["slosched"]["median"] == 11.0
    assert row["ratio_to_stack"]["-tpot-residents"] == pytest.approx(8.0 / 11.0)
    assert row["ratio_to_stack"]["-job-triage"] == pytest.approx(13.5 / 11.0)
    assert math.isnan(ablation.spread([math.nan])["median"])


def test_the_page_reads_each_change_against_the_seeds_spread(tmp_path: Path) -> None:
    row = dict(_row(), truth=["vidur"], description="chat on four GPUs")
    variants = [
        {"label": v.label, "layer": v.layer, "switched_off": v.switched_off, "settings": dict(v.settings)}
        for v in setup.VARIANTS
    ]
    figures = {
        "mode": "full",
        "seeds": [1, 2, 3],
        "target": 0.9,
        "wall_s": 90.0,
        "variants": variants,
        "workloads": {"chat": row},
        "left_out": ["code"],
        "variants_left_out": ["-deadline-guard"],
    }
    text = write_page(tmp_path / "ablation.md", figures).read_text()
    assert "| `-tpot-residents` | 8.000 [7.500-8.500] | 0.73x | **the stack needs it** |" in text
    assert "| `-triage` | 11.100 [10.900-11.200] | 1.01x | within the seeds' spread |" in text
    assert "| `-job-triage` | 13.500 [13.000-14.000] | 1.23x | **better without it** |" in text
    assert "Not run this time (`SLOSCHED_ABLATION_WORKLOADS`): code." in text and "1.5 min wall" in text
    assert "Variants not run this time (`SLOSCHED_ABLATION_VARIANTS`): `-deadline-guard`." in text
    assert (tmp_path / "ablation" / "ratios.png").stat().st_size > 0
    # A run of some rows only: its page and plot read the rows it ran.
    figures["variants"] = [item for item in variants if item["label"] in ("slosched", "-triage")]
    some = ablation.ablation_row({"slosched": [10.0, 12.0, 11.0], "-triage": [11.2, 10.9, 11.1]})
    figures["workloads"] = {"chat": dict(some, truth=["vidur"], description="chat on four GPUs")}
    text = write_page(tmp_path / "some.md", figures).read_text()
    assert "| `-triage` |" in text and "-tpot-residents" not in text.split("| variant | capacity")[1]


def test_one_capacity_search_runs_the_variant_on_the_stack_workload() -> None:
    # The quick chat workbench: one seed of the full stack and of the residents ablation (seconds each).
    full = ablation._capacity(("chat", "slosched", 1, True))
    without = ablation._capacity(("chat", "-tpot-residents", 1, True))
    assert full > 0 and without > 0 and full != without
