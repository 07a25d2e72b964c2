"""Simulate each replay of real traffic at the speed the engine's core ran during it.

On this virtual machine the host slows a core for seconds at a time, each core on its own
(``devtools.core_speed``: the slowest half-second runs at about half the fastest's speed). A 10-second replay
of real traffic therefore runs on a machine of its own speed, and one simulation at the average speed
misses it both ways. The vLLM plugin times a fixed CPU workload between steps (``perf.speed_probe``), so the
engine's core speed is known during every replay without reading anything the simulation predicts.

The probe is not the engine: a product of small matrices slows down more than an engine step (its time
swings about twice as far), so a fitted slope maps one onto the other. Over the calibration traffic (sweeps
and calibration mixes, never a compared replay) the steps are grouped in ``WINDOW_S`` windows; each window's
measured over predicted step time is regressed on its probes' time relative to the calibration's median
probe, in logs (``step time ~ (probe / reference) ** slope``; half the window's probes instrument the
other half, so the probe's own noise does not flatten the slope). The step costs are then fitted again to the
calibration steps brought to the reference speed (``at_reference_speed``), and a replay is simulated with
them scaled by its own factor (``replay_factor``: the mean, over its probes, of the local factor around each).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from slosched.core.views import StepObservation
from slosched.perf.profile_fit import MeasuredProfile, step_features

WINDOW_S = 2.0
MIN_WINDOW_STEPS = 10
MIN_WINDOW_PROBES = 4  # two per half (``fit_speed_model``)
SLOPE_RANGE = (0.0, 1.5)  # 0: the probe says nothing about the steps; above 1.5 only noise could put it
LOCAL_PROBES_S = 1.0  # a step's local speed: the probes within this many seconds of it

Probe = tuple[float, float]  # (done_s, probe_s), the plugin's clock
TimedStep = tuple[float, StepObservation]  # (done_s, the step)


@dataclass(slots=True, frozen=True)
class SpeedModel:
    """How an engine step's time follows the probe: ``(probe / reference_probe_s) ** slope``."""

    reference_probe_s: float
    slope: float
    windows: int
    correlation: float

    def factor(self, probes: Sequence[Probe]) -> float:
        """The step-time factor of a stretch whose probes are ``probes`` (1.0 when there are none)."""
        if not probes or self.reference_probe_s <= 0:
            return 1.0
        return (statistics.median(probe_s for _, probe_s in probes) / self.reference_probe_s) ** self.slope

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "reference_probe_ms": round(1e3 * self.reference_probe_s, 4),
            "slope": round(self.slope, 3),
            "windows": self.windows,
            "correlation": round(self.correlation, 3) if math.isfinite(self.correlation) else None,
        }


NO_CORRECTION = SpeedModel(reference_probe_s=0.0, slope=0.0, windows=0, correlation=math.nan)


def predicted_s(profile: MeasuredProfile, observation: StepObservation) -> float:
    """The profile's time for one step (its first duration's shape)."""
    features = step_features(
        observation.num_prefill_tokens,
        observation.prefill_context_tokens,
        observation.num_decode_seqs,
        observation.decode_context_tokens,
    )
    return sum(max(0.0, estimate) * feature for estimate, feature in zip(profile.estimates, features, strict=True))


def fit_speed_model(steps: Sequence[TimedStep], probes: Sequence[Probe], profile: MeasuredProfile) -> SpeedModel:
    """The slope of measured-over-predicted step time on the probe's relative time, over ``WINDOW_S`` windows
    of ``steps`` (the module docstring); ``NO_CORRECTION`` when fewer than three windows have enough of both.

    A window's probe median is itself noisy, and least squares on a noisy regressor flattens the slope
    toward 0 (regression dilution: one quick run fitted 0.62 at correlation 0.76, and the replays it then
    corrected ran 17% slower than simulated in the slow round). So the slope is an instrumental-variable
    estimate: the window's odd probes are the instrument for its even ones (two measures of one speed,
    with their own noise), averaged over both assignments."""
    if not probes:
        return NO_CORRECTION
    reference = statistics.median(probe_s for _, probe_s in probes)
    windows = _windows(steps, probes, profile)
    if len(windows) < 3:
        return replace(NO_CORRECTION, reference_probe_s=reference, windows=len(windows))
    log_ratio = np.log([measured / predicted for measured, predicted, _ in windows])
    even = np.log([statistics.median(seen[0::2]) / reference for _, _, seen in windows])
    odd = np.log([statistics.median(seen[1::2]) / reference for _, _, seen in windows])
    both = np.log([statistics.median(seen) / reference for _, _, seen in windows])
    slopes = [_iv_slope(log_ratio, regressor, instrument) for regressor, instrument in ((even, odd), (odd, even))]
    if any(slope is None for slope in slopes) or float(np.std(both)) == 0.0:
        return replace(NO_CORRECTION, reference_probe_s=reference, windows=len(windows))
    slope = float(np.mean([value for value in slopes if value is not None]))
    correlation = float(np.corrcoef(both, log_ratio)[0, 1])
    return SpeedModel(reference, min(max(slope, SLOPE_RANGE[0]), SLOPE_RANGE[1]), len(windows), correlation)


def _windows(
    steps: Sequence[TimedStep], probes: Sequence[Probe], profile: MeasuredProfile
) -> list[tuple[float, float, list[float]]]:
    """``(measured s, predicted s, probe times)`` of every ``WINDOW_S`` window with enough steps and probes."""
    sums: dict[int, list[float]] = {}
    for done_s, observation in steps:
        window = sums.setdefault(int(done_s // WINDOW_S), [0.0, 0.0, 0])
        window[0] += observation.durations_s[0]
        window[1] += predicted_s(profile, observation)
        window[2] += 1
    seen: dict[int, list[float]] = {}
    for done_s, probe_s in probes:
        seen.setdefault(int(done_s // WINDOW_S), []).append(probe_s)
    return [
        (measured, predicted, seen[key])
        for key, (measured, predicted, count) in sums.items()
        if count >= MIN_WINDOW_STEPS and len(seen.get(key, ())) >= MIN_WINDOW_PROBES and measured > 0 < predicted
    ]


def _iv_slope(response: np.ndarray, regressor: np.ndarray, instrument: np.ndarray) -> float | None:
    """``cov(instrument, response) / cov(instrument, regressor)``; None when the instrument does not move
    with the regressor (no common speed signal to measure against)."""
    spread = float(np.cov(instrument, regressor)[0, 1])
    if spread <= 0:
        return None
    return float(np.cov(instrument, response)[0, 1]) / spread


def local_factors(at_s: Sequence[float], probes: Sequence[Probe], model: SpeedModel) -> list[float]:
    """The factor at each time of ``at_s``: of the probes within ``LOCAL_PROBES_S`` of it (``probes`` in time
    order)."""
    ends = [done_s for done_s, _ in probes]
    return [
        model.factor(
            probes[bisect.bisect_left(ends, t - LOCAL_PROBES_S) : bisect.bisect_right(ends, t + LOCAL_PROBES_S)]
        )
        for t in at_s
    ]


def replay_factor(probes: Sequence[Probe], model: SpeedModel) -> float:
    """The step-time factor of a whole replay: the mean of the local factors at its probes (1.0 without).

    Not the factor of the replay's median probe: the core's speed moves between states that last seconds, so
    a 10-second replay spends some of its time in each, and the median probe sits in whichever state held
    longest. The engine's time adds up over the states; the probes come between steps at a fixed interval,
    so their mean weighs each state by the engine time spent in it. In a quick run, the median put each
    replay's engine time over the profile's charge at a log spread of 0.085 across the 36 replays (slower
    replays simulated too slow, faster ones too fast: an effective slope of 0.73 against the fitted 1.0);
    the mean of the local factors put it at 0.063."""
    if not probes:
        return 1.0
    return statistics.fmean(local_factors([done_s for done_s, _ in probes], probes, model))


def at_reference_speed(steps: Sequence[TimedStep], probes: Sequence[Probe], model: SpeedModel) -> list[StepObservation]:
    """Every step's time divided by its local factor (the probes within ``LOCAL_PROBES_S`` of it)."""
    factors = local_factors([done_s for done_s, _ in steps], probes, model)
    return [
        replace(observation, durations_s=tuple(d / factor for d in observation.durations_s))
        for (_, observation), factor in zip(steps, factors, strict=True)
    ]


def scaled(profile: MeasuredProfile, factor: float) -> MeasuredProfile:
    """The profile with every step cost times ``factor`` (the front end, on other cores, unchanged)."""
    return replace(
        profile,
        estimates=tuple(value * factor for value in profile.estimates),
        ci_low=tuple(value * factor for value in profile.ci_low),
        ci_high=tuple(value * factor for value in profile.ci_high),
        source={**profile.source, "speed_factor": round(factor, 4)},
    )


def step_model_ratio(steps: Sequence[TimedStep], profile: MeasuredProfile, factor: float) -> float:
    """The engine's measured busy time over the profile's prediction at ``factor``, over the steps a replay ran
    (nan without steps). Near 1 while the replay's own steps cost what the simulation charges: a case's
    latency error then comes from elsewhere (which steps formed, the front end); away from 1, from step
    costs the calibration traffic did not teach."""
    # An observation may hold several steps of one shape (one duration each).
    predicted = factor * sum(predicted_s(profile, step) * len(step.durations_s) for _, step in steps)
    if predicted <= 0:
        return math.nan
    return sum(sum(observation.durations_s) for _, observation in steps) / predicted
