"""``slosched bench libs`` runs: per part, the library's cost over the hand-written one's (median of interleaved
rounds, each timing both ways back to back, the order alternating) and each way's microseconds per
operation. A part whose library is not installed is reported as skipped (they are the ``bench-libs`` extra)."""

from __future__ import annotations

import importlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from slosched.bench.base import Figures
from slosched.bench.libs.setup import FULL_ROUNDS, QUICK_ROUNDS, Pair
from slosched.evaluation.formatting import print_figures

PARTS = ("sse", "limits", "breaker", "where")


def _time(fn: Callable[[], object], reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return time.perf_counter() - start


def measure(pair: Pair, rounds: int) -> dict[str, float]:
    """The median ratio library/hand-written over ``rounds``, and each way's median µs per operation."""
    pair.ours(), pair.theirs()  # warm caches and lazy imports outside the timings
    ratios, ours, theirs = [], [], []
    for index in range(rounds):
        if index % 2:
            b, a = _time(pair.theirs, pair.reps), _time(pair.ours, pair.reps)
        else:
            a, b = _time(pair.ours, pair.reps), _time(pair.theirs, pair.reps)
        ratios.append(b / a)
        ours.append(a / pair.reps / pair.ops * 1e6)
        theirs.append(b / pair.reps / pair.ops * 1e6)
    return {
        "ratio": round(statistics.median(ratios), 3),
        "ours_us": round(statistics.median(ours), 3),
        "library_us": round(statistics.median(theirs), 3),
    }


def run(quick: bool) -> Figures:
    rounds = QUICK_ROUNDS if quick else FULL_ROUNDS
    figures: dict[str, Any] = {"rounds": rounds}
    for part in PARTS:
        module = importlib.import_module(f"slosched.bench.libs.{part}")
        try:
            pairs: list[Pair] = module.pairs()
        except ImportError as error:
            figures[f"{part}_skipped"] = f"library not installed: {error.name} (pip install -e '.[bench-libs]')"
            continue
        for pair in pairs:
            for key, value in measure(pair, rounds).items():
                figures[f"{pair.part}_{key}"] = value
            figures[f"{pair.part}_library"] = pair.library
            figures[f"{pair.part}_unit"] = pair.unit
    figures.update({key: value for part in PARTS for key, value in _extras(part).items()})
    print_figures("hand-written vs library: library cost / hand-written cost (median ratio)", figures)
    return figures


def _extras(part: str) -> dict[str, Any]:
    """Figures a part measures outside the ratio loop (``where``: the import cost of its library)."""
    module = importlib.import_module(f"slosched.bench.libs.{part}")
    extras = getattr(module, "extras", None)
    try:
        return dict(extras()) if extras is not None else {}
    except ImportError:
        return {}
