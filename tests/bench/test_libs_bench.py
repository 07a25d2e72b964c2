"""``slosched bench libs``: each pair's two ways do the same work (checked, not timed), and a part whose
library is missing is reported as skipped rather than failing the run."""

from __future__ import annotations

import importlib
import sys

import pytest

from slosched.bench.libs.runs import PARTS, measure, run
from slosched.bench.libs.setup import Pair


@pytest.mark.parametrize("part", PARTS)
def test_each_pair_runs_both_ways(part: str) -> None:
    module = importlib.import_module(f"slosched.bench.libs.{part}")
    try:
        pairs = module.pairs()
    except ImportError as error:
        pytest.skip(f"{error.name} not installed (the bench-libs extra)")
    for pair in pairs:
        assert pair.part.startswith(part) and pair.ops > 0 and pair.unit
        pair.ours()
        pair.theirs()


def test_measure_gives_a_ratio_and_both_costs() -> None:
    pair = Pair("noop", "none", lambda: None, lambda: None, ops=1, unit="call", reps=1)
    figures = measure(pair, rounds=2)
    assert set(figures) == {"ratio", "ours_us", "library_us"} and figures["ratio"] > 0


def test_a_missing_library_is_a_skipped_part(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("cachetools", "pyrate_limiter", "pybreaker", "sqlglot"):
        monkeypatch.setitem(sys.modules, name, None)  # import of a None entry raises ImportError
    monkeypatch.setattr("slosched.bench.libs.runs.PARTS", ("limits", "breaker", "where"))
    figures = run(quick=True)
    assert {"limits_skipped", "breaker_skipped", "where_skipped"} <= set(figures)
    assert "bench-libs" in figures["breaker_skipped"]
