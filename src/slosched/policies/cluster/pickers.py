"""Pickers: combine a decision's score columns with their weights and choose one candidate.

* ``max``: the highest combined score, ties to the lowest position. ``combine``: ``sum`` (``sum_j w_j s_j``)
  or ``product`` (``prod_j s_j^w_j``, PRISM's form: one factor near 0 vetoes a candidate). ``relax``: scorer
  names left out (their terms neutral) when no candidate's combined score is above 0, so a request that
  fits nowhere on one criterion still goes to the best on the others (PRISM drops its KV factor so).
* ``random``: uniform over the candidates, ignoring scores (the run's seeded generator).
* ``sample``: draws ``choices`` distinct candidates with a seeded generator, the highest combined score
  among them wins, ties to the first drawn (power of two choices with ``choices: 2``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from slosched.core.errors import ConfigError
from slosched.policies.cluster.pipeline import PICKERS, Key, KeyPick, ScoreTable, first_min
from slosched.policies.registry import NoParams, PolicyContext, setting

COMBINES = ("sum", "product")


def combine(table: ScoreTable, how: str, skip: Sequence[str] = ()) -> list[float]:
    """Weighted sum or product per candidate, scorers in table order (left to right, so the rounding of a
    product is that of ``((s_1 * s_2) * s_3) ...``); scorers named in ``skip`` are left out."""
    weights = table.weights
    keep = [j for j, name in enumerate(table.names) if name not in skip]
    if how == "product":
        # x**1.0 == x exactly: weight-1 columns skip the pow, the common case.
        columns = [
            table.columns[j] if weights[j] == 1.0 else [value ** weights[j] for value in table.columns[j]] for j in keep
        ]
        if not columns:
            return [1.0] * table.size
        return list(map(math.prod, zip(*columns, strict=True)))
    totals = [0.0] * table.size
    for j in keep:
        weight = weights[j]
        for i, value in enumerate(table.columns[j]):
            totals[i] += weight * value
    return totals


def first_max(values: Sequence[float]) -> int:
    return max(range(len(values)), key=values.__getitem__)


class MaxPicker:
    """Highest combined score, ties to the lowest position; see the module docstring for ``relax``."""

    def __init__(self, how: str = "sum", relax: Sequence[str] = ()) -> None:
        if how not in COMBINES:
            raise ConfigError("picker max.combine", f"expected one of {COMBINES}, got {how!r}")
        self.how = how
        self.relax = tuple(relax)
        self.takes_plain_max = not self.relax

    def pick(self, table: ScoreTable) -> int:
        combined = combine(table, self.how)
        best = first_max(combined)
        if self.relax and not combined[best] > 0.0:
            return first_max(combine(table, self.how, self.relax))
        return best

    def key_pick(self) -> KeyPick | None:
        """The first smallest key (ties: the lowest position); None with ``relax``, which needs the table."""
        return first_min if self.takes_plain_max else None


class RandomPicker:
    """Uniform over the candidates with numpy's generator (the ``random`` router's stream)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng

    def pick(self, table: ScoreTable) -> int:
        return int(self._rng.integers(table.size))

    def pick_blind(self, size: int) -> int:
        """``pick`` without a table: only the number of candidates counts."""
        return int(self._rng.integers(size))


class SamplePicker:
    """``choices`` distinct candidates drawn without replacement, the best combined score among them wins
    (ties: the first drawn). One candidate is returned without a draw."""

    def __init__(self, seed: int, choices: int = 2, how: str = "sum") -> None:
        if choices < 1:
            raise ConfigError("picker sample.choices", f"must be >= 1, got {choices}")
        if how not in COMBINES:
            raise ConfigError("picker sample.combine", f"expected one of {COMBINES}, got {how!r}")
        # The stdlib generator: scalar draws cost far less than numpy's per-call overhead.
        self._rng = random.Random(seed)
        self.choices = choices
        self.how = how

    def draw(self, size: int) -> list[int]:
        """``min(choices, size)`` distinct positions; the j-th draw is uniform over the positions left."""
        if self.choices == 2 and size >= 2:
            # What the general loop draws, without building the list of positions left: popping position
            # ``second`` of the list without ``first`` gives ``second``, or ``second + 1`` past ``first``.
            first = self._rng.randrange(size)
            second = self._rng.randrange(size - 1)
            return [first, second + 1 if second >= first else second]
        left = list(range(size))
        return [left.pop(self._rng.randrange(len(left))) for _ in range(min(self.choices, size))]

    def pick(self, table: ScoreTable) -> int:
        if table.size == 1:
            return 0
        drawn = self.draw(table.size)
        combined = combine(table, self.how)
        best = drawn[0]
        for position in drawn[1:]:
            if combined[position] > combined[best]:
                best = position
        return best

    def key_pick(self) -> KeyPick:
        """The drawn candidate with the smallest key (ties: the first drawn); the same draws as ``pick``."""
        return self._pick_keys

    def _pick_keys(self, keys: list[Key]) -> int:
        if len(keys) == 1:
            return 0
        drawn = self.draw(len(keys))
        best = drawn[0]
        for position in drawn[1:]:
            if keys[position] < keys[best]:
                best = position
        return best


@dataclass(frozen=True, slots=True)
class MaxParams:
    combine: str = setting("sum", f"how scores combine: one of {', '.join(COMBINES)}")
    relax: tuple[str, ...] = setting((), "scorers dropped (in order) when no candidate scores above zero")

    def __post_init__(self) -> None:
        check_combine(self.combine, "max")


@dataclass(frozen=True, slots=True)
class SampleParams:
    choices: int = setting(2, "candidates drawn per decision")
    combine: str = setting("sum", f"how scores combine: one of {', '.join(COMBINES)}")

    def __post_init__(self) -> None:
        check_combine(self.combine, "sample")


def check_combine(how: str, picker: str) -> None:
    if how not in COMBINES:
        raise ConfigError(f"picker {picker}.combine", f"expected one of {COMBINES}, got {how!r}")


@PICKERS.register("max", params=MaxParams)
def build_max(params: MaxParams, context: PolicyContext) -> MaxPicker:
    return MaxPicker(params.combine, list(params.relax))


@PICKERS.register("random", params=NoParams)
def build_random(params: NoParams, context: PolicyContext) -> RandomPicker:
    return RandomPicker(np.random.default_rng(context.rng.integers(2**63)))


@PICKERS.register("sample", params=SampleParams)
def build_sample(params: SampleParams, context: PolicyContext) -> SamplePicker:
    return SamplePicker(int(context.rng.integers(2**63)), params.choices, params.combine)
