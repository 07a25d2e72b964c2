"""Baseline screening: which baselines go on from the first seed, and that it keeps the strongest on real data."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.evaluation.screening import SCREEN_KEEP, SCREEN_MARGIN, contenders

DATA = json.loads((Path(__file__).parent / "data" / "stack_baseline_capacities.json").read_text())


def test_the_best_two_and_those_within_the_margin_go_on_in_their_order() -> None:
    figures = {"a": 0.5, "b": 1.0, "c": 0.87, "d": 0.86, "e": 0.84}
    assert contenders(figures) == ["b", "c", "d"]  # b best, c second, d within 15%, e just outside
    assert contenders({"a": 0.5, "b": 1.0, "e": 0.2}) == ["a", "b"]  # the second best goes on whatever it is
    assert contenders(figures, bar=2.0) == ["b", "c"]  # an earlier step's best raises the bar
    assert contenders({"a": 3.8, "b": 3.09, "c": 3.09, "d": 3.09, "e": 1.0}) == ["a", "b", "c", "d"]  # ties
    assert contenders({"a": math.nan, "b": 0.0}) == ["a", "b"]
    assert contenders({}) == []


def test_a_load_where_every_baseline_met_nothing_sends_on_only_the_first_two() -> None:
    collapsed = {label: 0.0 for label in "abcdef"}
    assert contenders(collapsed) == ["a", "b"]  # zeros tell nothing apart: the first ``keep`` in order
    assert contenders(collapsed, bar=5.0) == ["a", "b"]
    assert contenders({**collapsed, "e": 0.4}) == ["a", "e"]  # the one that met something, then the first zero
    assert contenders({**collapsed, "e": 0.4, "f": 0.35}) == ["e", "f"]  # a positive second best: no zeros


@given(st.dictionaries(st.text(min_size=1, max_size=4), st.floats(0.0, 100.0), max_size=30), st.floats(0.0, 100.0))
def test_the_best_is_always_kept_and_nothing_far_below_is(figures: dict[str, float], bar: float) -> None:
    kept = contenders(figures, bar)
    assert len(kept) >= min(SCREEN_KEEP, len(figures)) and set(kept) <= set(figures)
    if figures:
        assert max(figures, key=lambda label: figures[label]) in kept
    ranked = sorted(figures.values(), reverse=True)
    floor = (1 - SCREEN_MARGIN) * max([bar, *figures.values()])
    kth = ranked[min(SCREEN_KEEP, len(ranked)) - 1] if ranked else 0.0
    for label in set(figures) - set(kept):
        # Left behind: below the margin and below the ``keep``-th figure, or a 0 where that figure is 0 too.
        assert figures[label] < floor or figures[label] == 0
        assert figures[label] < kth or kth == 0
    if kth == 0:
        assert len([label for label in kept if figures[label] == 0]) <= SCREEN_KEEP


@pytest.mark.parametrize("workload", sorted(DATA["workloads"]))
def test_screened_on_any_seed_the_last_full_run_keeps_its_strongest_baseline(workload: str) -> None:
    """The last full ``bench stack``'s per-seed capacities: whichever seed screens, the baseline strongest by
    median over the five goes on; the others mostly do not."""
    per_seed = DATA["workloads"][workload]
    strongest = max(per_seed, key=lambda label: statistics.median(per_seed[label]))
    seeds = len(next(iter(per_seed.values())))
    kept_counts = []
    for seed in range(seeds):
        kept = contenders({label: values[seed] for label, values in per_seed.items()})
        assert strongest in kept, (workload, seed)
        kept_counts.append(len(kept))
    assert min(kept_counts) < len(per_seed)
