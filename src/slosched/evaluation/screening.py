"""Baseline screening: which registered baselines go on from the first seed to the others.

The strongest baseline is chosen after the fact from every registered baseline (DESIGN section 9), but most of
them are nowhere near it: on the full scoreboard 19 baselines x 5 seeds of steady-state searches (and their runs
at every overload load) were most of a bench's time. So every baseline is searched
(or run at a load) on the first seed, and only those that could still be the strongest go on to the others:

- the ``SCREEN_KEEP`` best of the step, whatever their figures (with any tied with the last of them, unless
  that figure is 0: where the first seed met nothing under most baselines, only the first ``SCREEN_KEEP`` go
  on; since 2026-12-07), and
- every one whose first-seed figure is positive and at least ``1 - SCREEN_MARGIN`` of the best first-seed
  figure of the step (and of the steps before it: ``bar``).

Seeds share their jobs across candidates (common random numbers), so a seed that is hard for one baseline is
hard for the others and the ranking on one seed is close to the ranking by median. Checked on the per-seed
capacities of the last full ``bench stack`` (commit 59b0086, before the current-engine truth and the
steady-state runs; 5 workloads x 19 baselines x 5 seeds;
``tests/evaluation/test_screening.py``): screened on any one of the five seeds, the strongest baseline by
median was kept every time, with 2-17 of the 19 kept (17 on code, where the baselines lie within 15% of each
other). Screened-out baselines keep their one-seed figure, listed in the JSON (``screened_out``) and the
reports; paper policies, the stack and their oracles are never screened.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

SCREEN_MARGIN = 0.15
SCREEN_KEEP = 2


def contenders(
    first_seed: Mapping[str, float], bar: float = 0.0, keep: int = SCREEN_KEEP, margin: float = SCREEN_MARGIN
) -> list[str]:
    """The labels of ``first_seed`` (in its order) that go on to the other seeds: the ``keep`` highest (and any
    tied with the last of them while that figure is positive), and every one with a positive figure within
    ``margin`` of the best of them and ``bar``. A figure that is not finite counts as 0."""

    def finite(value: float) -> float:
        return value if math.isfinite(value) else 0.0

    figures = {label: finite(value) for label, value in first_seed.items()}
    ranked = sorted(figures, key=figures.__getitem__, reverse=True)  # stable: equal figures keep their order
    best = max([finite(bar), *figures.values()])
    kth = figures[ranked[min(keep, len(ranked)) - 1]] if ranked and keep > 0 else math.inf
    # Equal first-seed figures cannot be told apart, so ties with the ``keep``-th go on too; but a 0 (nothing
    # met) ties with every baseline that collapsed and tells nothing: on code at 2x-3x every baseline, the
    # strongest too, met no deadline on the first seed, and all 63 went on to 20 more runs each (hours of a
    # ``bench stack`` part). Then the first ``keep`` in order go on, as for any ``keep``.
    top = set(ranked[:keep]) if kth <= 0 else {label for label in ranked if figures[label] >= kth}
    near = {label for label in ranked if figures[label] > 0 and figures[label] >= (1 - margin) * best}
    return [label for label in first_seed if label in top or label in near]
