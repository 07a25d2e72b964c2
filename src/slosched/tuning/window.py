"""When to retune alpha: record job latencies per window and test whether they got worse.

``WindowRecorder`` groups finished jobs by the window their arrival falls in (``window_s``, 100 s in the
paper), and gives each window its *backlog*: the remaining work of earlier jobs that were still queued or
running at the window's start (``remaining_work``), so a replay starts from the cluster's real state
rather than from idle. ``AlphaController`` starts at alpha = 0; after the first window it retunes on that
window; after each later window it runs a one-sided two-sample t-test (``scipy.stats.ttest_ind``, Welch,
``alternative="greater"``: the new window's latencies are larger than the previous window's) and retunes
on the latest window when ``p < p_threshold`` (0.01).

A backlog job is known only once it finished (its realized stages); one still running when the window is
tuned is missing from the backlog, which is why the gateway tunes a window one window after it closed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scipy import stats

from slosched.core.errors import ConfigError
from slosched.core.job import JobSpec
from slosched.tuning.alpha import AlphaTuner, TuneResult

MIN_REMAINING_SLO_S = 1e-3


@dataclass(slots=True)
class Window:
    """Jobs that arrived in ``[start_s, start_s + window_s)`` and finished, with their latencies, and the
    backlog at ``start_s`` (remaining work of earlier jobs, arriving at ``start_s``)."""

    start_s: float
    jobs: list[JobSpec] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    backlog: list[JobSpec] = field(default_factory=list)


def remaining_work(
    job: JobSpec, start_s: float, finish_s: float, stage_finish_s: Mapping[str, float] | None = None
) -> JobSpec | None:
    """What of ``job`` (arrived before ``start_s``, finished at ``finish_s``) was left at ``start_s``.

    With ``stage_finish_s`` (stage name -> when it finished) the stages finished by ``start_s`` are
    dropped; without it, the leading share of stages equal to the share of the job's latency elapsed
    (an estimate). Calls running at ``start_s`` are replayed whole. The result arrives at ``start_s``
    with the time left to its deadline as its SLO (a small positive value when already late); dependencies
    on dropped stages are removed. None when nothing was left.
    """
    if not job.arrival_s < start_s < finish_s:
        return None
    if stage_finish_s is not None:
        left = [s for s in job.stages if stage_finish_s.get(s.name, math.inf) > start_s]
    else:
        ordered = job.topological_stages()
        done = math.floor(len(ordered) * (start_s - job.arrival_s) / (finish_s - job.arrival_s))
        left = ordered[min(done, len(ordered) - 1) :]
    names = {stage.name for stage in left}
    deps = job.dependencies()
    stages = tuple(replace(s, after=tuple(p for p in deps[s.name] if p in names)) for s in left)
    slo = job.slo_s
    if slo is not None:
        slo = max(job.arrival_s + slo - start_s, MIN_REMAINING_SLO_S)
    return replace(job, arrival_s=start_s, stages=stages, slo_s=slo)


class WindowRecorder:
    def __init__(self, window_s: float = 100.0) -> None:
        if not window_s > 0:
            raise ConfigError("window_s", f"must be > 0, got {window_s}")
        self.window_s = window_s
        self._windows: dict[int, Window] = {}

    def _window(self, index: int) -> Window:
        return self._windows.setdefault(index, Window(index * self.window_s))

    def record(self, job: JobSpec, latency_s: float, stage_finish_s: Mapping[str, float] | None = None) -> None:
        """A finished job (its realized stages and lengths are known once it finished); it also joins the
        backlog of every later window that started while it was in the system."""
        index = math.floor(job.arrival_s / self.window_s)
        window = self._window(index)
        window.jobs.append(job)
        window.latencies_s.append(latency_s)
        finish_s = job.arrival_s + latency_s
        later = index + 1
        while later * self.window_s < finish_s:
            left = remaining_work(job, later * self.window_s, finish_s, stage_finish_s)
            if left is not None:
                self._window(later).backlog.append(left)
            later += 1

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
        result = self.tuner.retune(window.jobs, window.backlog, window.start_s)
        self.alpha = result.alpha
        return ControllerStep(self.alpha, p_value, result)
