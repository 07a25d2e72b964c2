"""``policies.cluster.pickers``: combining weighted score columns (sum, product, skipped scorers), the max
picker with ties and ``relax``, the seeded random and sampling pickers, and their builders' checks."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.pickers import (
    MaxPicker,
    RandomPicker,
    SamplePicker,
    combine,
    first_max,
)
from slosched.policies.cluster.pipeline import PICKERS, ScoreTable, min_max
from slosched.policies.registry import PolicyContext
from tests.conftest import make_instance


def table(columns: dict[str, list[float]], weights: dict[str, float] | None = None) -> ScoreTable:
    names = tuple(columns)
    weight = weights or {}
    size = len(next(iter(columns.values())))
    return ScoreTable(names, tuple(weight.get(n, 1.0) for n in names), [columns[n] for n in names], size)


def make_context(seed: int = 0) -> PolicyContext:
    return PolicyContext((make_instance(),), np.random.default_rng(seed), HistoryOutputPredictor())


def test_combine_sum_and_product_with_weights() -> None:
    scores = table({"load": [1.0, 0.5, 0.0], "kv": [0.25, 1.0, 1.0]}, {"load": 2.0, "kv": 0.5})
    assert combine(scores, "sum") == [2.125, 1.5, 0.5]
    assert combine(scores, "product") == pytest.approx([1.0 * 0.5, 0.25 * 1.0, 0.0])
    assert combine(scores, "sum", skip=["kv"]) == [2.0, 1.0, 0.0]
    assert combine(scores, "product", skip=["load", "kv"]) == [1.0, 1.0, 1.0]


def test_first_max_takes_the_lowest_position_on_ties() -> None:
    assert first_max([0.2, 0.9, 0.9, 0.1]) == 1
    assert first_max([0.0]) == 0


def test_max_picker_vetoes_with_a_product_and_relaxes() -> None:
    scores = table({"load": [0.9, 0.2], "kv": [0.0, 0.0]})
    assert MaxPicker("product").pick(scores) == 0  # every product is 0: the first
    assert MaxPicker("product", relax=["kv"]).pick(scores) == 0  # kv left out: the lighter one
    scores = table({"load": [0.2, 0.9], "kv": [0.0, 0.0]})
    assert MaxPicker("product").pick(scores) == 0
    assert MaxPicker("product", relax=["kv"]).pick(scores) == 1
    vetoed = table({"load": [0.9, 0.2], "kv": [0.0, 1.0]})
    assert MaxPicker("product", relax=["kv"]).pick(vetoed) == 1  # one fits: no relaxing
    assert MaxPicker("sum").takes_plain_max and not MaxPicker("sum", ["kv"]).takes_plain_max
    with pytest.raises(ConfigError, match=r"picker max\.combine"):
        MaxPicker("mean")


_COLUMN = st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=8)


@given(a=_COLUMN, b=_COLUMN, wa=st.floats(0.0, 4.0), wb=st.floats(0.0, 4.0), how=st.sampled_from(["sum", "product"]))
def test_max_picker_picks_a_best_combined_score(a: list[float], b: list[float], wa: float, wb: float, how: str) -> None:
    size = min(len(a), len(b))
    scores = table({"a": a[:size], "b": b[:size]}, {"a": wa, "b": wb})
    combined = combine(scores, how)
    chosen = MaxPicker(how).pick(scores)
    assert combined[chosen] == max(combined)
    assert all(combined[i] < combined[chosen] for i in range(chosen))  # ties go to the lowest position


def test_random_picker_is_seeded_and_in_range() -> None:
    scores = table({"x": [0.0] * 5})
    picks = [RandomPicker(np.random.default_rng(3)).pick(scores) for _ in range(2)]
    assert picks[0] == picks[1]
    picker = RandomPicker(np.random.default_rng(3))
    drawn = {picker.pick(scores) for _ in range(200)}
    assert drawn == set(range(5))


@given(seed=st.integers(0, 2**32), choices=st.integers(1, 6), size=st.integers(1, 6))
def test_sample_draws_distinct_positions(seed: int, choices: int, size: int) -> None:
    drawn = SamplePicker(seed, choices).draw(size)
    assert len(drawn) == min(choices, size) == len(set(drawn))
    assert all(0 <= position < size for position in drawn)


def test_sample_picker_takes_the_best_drawn() -> None:
    scores = table({"x": [0.1, 0.9, 0.5, 0.3]})
    for seed in range(20):
        picker, twin = SamplePicker(seed, 2), SamplePicker(seed, 2)
        drawn = twin.draw(4)
        assert picker.pick(scores) == max(drawn, key=lambda i: (scores.columns[0][i], -drawn.index(i)))
    assert SamplePicker(0, 4).pick(scores) == 1  # drawing everyone is the max
    assert SamplePicker(0, 1).pick(table({"x": [0.3]})) == 0
    ties = table({"x": [0.5, 0.5, 0.5]})
    for seed in range(10):
        assert SamplePicker(seed, 3).pick(ties) == SamplePicker(seed, 3).draw(3)[0]  # ties: the first drawn


@given(seed=st.integers(0, 2**32), size=st.integers(2, 9))
def test_sample_draw_of_two_is_the_general_draw(seed: int, size: int) -> None:
    left, rng = list(range(size)), random.Random(seed)
    general = [left.pop(rng.randrange(len(left))) for _ in range(2)]  # the loop choices != 2 still run
    assert SamplePicker(seed, 2).draw(size) == general


_KEYS = st.lists(st.one_of(st.integers(0, 5).map(float), st.floats(0, 1e6)), min_size=1, max_size=9)


@given(keys=_KEYS, seed=st.integers(0, 2**32), choices=st.integers(1, 4), how=st.sampled_from(["sum", "product"]))
def test_key_picks_choose_as_the_score_table(keys: list[float], seed: int, choices: int, how: str) -> None:
    """The profiles' fast path: one ranked scorer's raw keys give the table's choice (same draws)."""
    scores = table({"x": min_max(keys)})
    assert SamplePicker(seed, choices, how).key_pick()(keys) == SamplePicker(seed, choices, how).pick(scores)
    plain = MaxPicker(how).key_pick()
    assert plain is not None and plain(keys) == MaxPicker(how).pick(scores)
    assert MaxPicker(how, relax=["x"]).key_pick() is None  # relaxing needs the table
    blind, picker = RandomPicker(np.random.default_rng(seed)), RandomPicker(np.random.default_rng(seed))
    assert blind.pick_blind(len(keys)) == picker.pick(scores)


def test_sample_picker_checks() -> None:
    with pytest.raises(ConfigError, match=r"picker sample\.choices"):
        SamplePicker(0, 0)
    with pytest.raises(ConfigError, match=r"picker sample\.combine"):
        SamplePicker(0, 2, "mean")


def test_builders() -> None:
    picker = PICKERS.build("max", {"combine": "product", "relax": ["kv"]}, make_context())
    assert isinstance(picker, MaxPicker) and (picker.how, picker.relax) == ("product", ("kv",))
    assert isinstance(PICKERS.build("random", {}, make_context()), RandomPicker)
    sample = PICKERS.build("sample", {"choices": 3, "combine": "product"}, make_context())
    assert isinstance(sample, SamplePicker) and (sample.choices, sample.how) == (3, "product")
    # Seeded from the run's generator: one seed, one sequence of picks.
    scores = table({"x": [i / 10 for i in range(9)]})
    first = [PICKERS.build("sample", {}, make_context(7)).pick(scores) for _ in range(3)]
    assert len(set(first)) == 1
    assert set(PICKERS.names()) >= {"max", "random", "sample"}
    for name, params, match in (
        ("max", {"relax": "kv"}, "max.relax: expected list"),
        ("max", {"combine": "avg"}, "picker max.combine"),
        ("max", {"choices": 2}, "choices"),
        ("random", {"seed": 1}, "seed"),
        ("sample", {"combine": "avg"}, "picker sample.combine"),
    ):
        with pytest.raises(ConfigError, match=match):
            PICKERS.build(name, params, make_context())
