"""``slosched bench libs``: each hand-written part that issue 23 asked to replace with a well-kept library,
timed against that library on the part's measured path, as the library's cost over the hand-written one's
(a ratio in one process, interleaved rounds, median: this project's machines are noisy). The modules'
docstrings and docs/architecture.md ("Hand-written or library") quote the figures of a full run."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.libs.runs import run

BENCHMARK = Benchmark(
    name="libs",
    summary="hand-written parts vs the libraries that could replace them: cost ratios on the measured paths",
    run=run,
)
