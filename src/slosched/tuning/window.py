"""When to retune alpha: record job latencies per window and test whether they got worse.

``WindowRecorder`` groups finished jobs by the window their arrival falls in (``window_s``, 100 s in the
paper). ``AlphaController`` starts at alpha = 0; after the first window it retunes on that window; after
each later window it runs a one-sided two-sample t-test (``scipy.stats.ttest_ind``, Welch,
``alternative="greater"``: the new window's latencies are larger than the previous window's) and
retunes on the latest window when ``p < p_threshold`` (0.01).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from scipy import stats

from slosched.core.errors import ConfigError
from slosched.core.job import JobSpec
from slosched.tuning.alpha import AlphaTuner, TuneResult


@dataclass(slots=True)
class Window:
    """Jobs that arrived in ``[start_s, start_s + window_s)`` and finished, with their latencies."""

    start_s: float
    jobs: list[JobSpec] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)


class WindowRecorder:
    def __init__(self, window_s: float = 100.0) -> None:
        if not window_s > 0:
            raise ConfigError("window_s", f"must be > 0, got {window_s}")
        self.window_s = window_s
        self._windows: dict[int, Window] = {}

    def record(self, job: JobSpec, latency_s: float) -> None:
        """A finished job (its realized stages and lengths are known once it finished)."""
        index = math.floor(job.arrival_s / self.window_s)
        window = self._windows.setdefault(index, Window(index * self.window_s))
        window.jobs.append(job)
        window.latencies_s.append(latency_s)

    def windows(self) -> list[Window]:
        return [self._windows[index] for index in sorted(self._windows)]


def latency_increase_p_value(current: Sequence[float], previous: Sequence[float]) -> float:
    """p of "current latencies are greater than previous" (1.0 when either has < 2 samples)."""
    if len(current) < 2 or len(previous) < 2:
        return 1.0
    result = stats.ttest_ind(current, previous, equal_var=False, alternative="greater")
    p = float(result.pvalue)
    return p if math.isfinite(p) else 1.0


@dataclass(slots=True)
class ControllerStep:
    alpha: float
    p_value: float | None
    retuned: TuneResult | None


class AlphaController:
    """Feeds closed windows in order; holds the alpha the router should use now."""

    def __init__(self, tuner: AlphaTuner, p_threshold: float = 0.01) -> None:
        if not 0.0 < p_threshold < 1.0:
            raise ConfigError("p_threshold", f"must be in (0, 1), got {p_threshold}")
        self.tuner = tuner
        self.p_threshold = p_threshold
        self.alpha = 0.0
        self._previous: Window | None = None

    def on_window_closed(self, window: Window) -> ControllerStep:
        previous, self._previous = self._previous, window
        if previous is None:
            return self._retune(window, None)
        p_value = latency_increase_p_value(window.latencies_s, previous.latencies_s)
        if p_value < self.p_threshold:
            return self._retune(window, p_value)
        return ControllerStep(self.alpha, p_value, None)

    def _retune(self, window: Window, p_value: float | None) -> ControllerStep:
        if not window.jobs:
            return ControllerStep(self.alpha, p_value, None)
        result = self.tuner.retune(window.jobs)
        self.alpha = result.alpha
        return ControllerStep(self.alpha, p_value, result)
