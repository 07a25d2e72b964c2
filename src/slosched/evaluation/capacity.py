"""SLO capacity: the highest arrival rate at which a target share of jobs meets its SLO (DESIGN section 9).

The search is a bisection on the logarithm of the rate, to a relative precision (2% by default), after a
bracket is found by doubling or halving from a guess. Every run it makes is kept in a cache of
``rate -> attainment`` so the 95% capacity reuses the points of the 90% search. Attainment is assumed to
fall with the rate, which holds when every rate replays the *same* jobs with arrivals rescaled (common
random numbers, as ``Workbench`` does); where noise makes it non-monotone, the answer is the highest
passing rate below the lowest failing rate above it, so it is still a rate that was measured to pass.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass

MIN_RATE = 1e-4
MAX_RATE = 1e5


@dataclass(slots=True, frozen=True)
class Spread:
    """A figure over seeds: its median and its min-max spread."""

    median: float
    low: float
    high: float
    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            return cls(math.nan, math.nan, math.nan, ())
        return cls(float(statistics.median(values)), float(min(values)), float(max(values)), tuple(values))

    def as_json(self) -> dict[str, float | list[float]]:
        return {"median": self.median, "min": self.low, "max": self.high, "values": list(self.values)}

    def text(self, digits: int = 3) -> str:
        """``median [min-max]``."""
        return f"{self.median:.{digits}g} [{self.low:.{digits}g}-{self.high:.{digits}g}]"


def find_capacity(
    attainment: Callable[[float], float],
    target: float,
    guess: float,
    precision: float = 0.02,
    cache: MutableMapping[float, float] | None = None,
    growth: float = 2.0,
    widen: bool = False,
) -> float:
    """The highest rate whose attainment is >= ``target``, to ``precision`` (relative); 0.0 when even
    ``MIN_RATE`` fails and ``MAX_RATE`` when nothing up to it fails. ``attainment`` is called only for
    rates not in ``cache``, and every result is added to it. ``growth``: the factor the bracket search
    steps by from ``guess`` (a guess known to be close brackets faster with a smaller one). ``widen``: each
    step that does not bracket the answer squares the factor (a narrow first bracket that does not hold
    reaches a far answer in a few probes instead of many small steps)."""
    if not growth > 1:
        raise ValueError(f"growth must be > 1, got {growth}")
    if not 0 < target <= 1:
        raise ValueError(f"target must be in (0, 1], got {target}")
    if not guess > 0:
        raise ValueError(f"guess must be > 0, got {guess}")
    points: MutableMapping[float, float] = {} if cache is None else cache

    def passes(rate: float) -> bool:
        if rate not in points:
            points[rate] = attainment(rate)
        return points[rate] >= target

    low, high = _bracket_from(points, target)
    if low is None and high is None:
        if passes(guess):
            low = guess
        else:
            high = guess
    bracket = _step_out(passes, low, high, growth, widen)
    if not isinstance(bracket, tuple):
        return bracket
    low, high = bracket
    while high / low > 1 + precision:
        middle = math.sqrt(low * high)
        if passes(middle):
            low = middle
        else:
            high = middle
    return low


def _step_out(
    passes: Callable[[float], bool], low: float | None, high: float | None, growth: float, widen: bool
) -> tuple[float, float] | float:
    """From the one known end (a passing ``low`` or a failing ``high``), step by ``growth`` (squared after
    each step that does not bracket, with ``widen``) until the other end is found: the bracket (low, high),
    or the answer itself at a rate bound (0.0 below ``MIN_RATE``, the last passing rate above ``MAX_RATE``)."""
    step = growth
    while low is None:
        assert high is not None
        rate = high / step
        if rate < MIN_RATE:
            if not (widen and high > MIN_RATE):
                return 0.0
            rate = MIN_RATE  # a widened step probes the bound itself rather than jumping past it
        if passes(rate):
            low = rate
        else:
            high, step = rate, step * step if widen else step
    while high is None:
        rate = low * step
        if rate > MAX_RATE:
            if not (widen and low < MAX_RATE):
                return low
            rate = MAX_RATE
        if passes(rate):
            low, step = rate, step * step if widen else step
        else:
            high = rate
    return low, high


def _bracket_from(points: MutableMapping[float, float], target: float) -> tuple[float | None, float | None]:
    """The tightest bracket the cached points give: the highest passing rate, and the lowest failing rate
    above it (either may be missing)."""
    passing = [rate for rate, value in points.items() if value >= target]
    low = max(passing) if passing else None
    failing = [rate for rate, value in points.items() if value < target and (low is None or rate > low)]
    high = min(failing) if failing else None
    return low, high
