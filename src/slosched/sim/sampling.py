"""Sampled time series of every instance (queues, KV use, busy time) for reports.

A periodic kernel event reads each instance (``SimInstance.sample``, read-only), so sampling never
changes a result. The cost stays bounded whatever the run's length: once a series holds
``MAX_SAMPLES`` points, every other point is dropped and the interval doubles.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from slosched.core.records import InstanceSeries
from slosched.sim.instance import SimInstance
from slosched.sim.kernel import EventKernel

TARGET_SAMPLES = 500
MAX_SAMPLES = 2 * TARGET_SAMPLES
_MIN_INTERVAL_S = 1e-3


def auto_interval_s(last_arrival_s: float) -> float:
    """About ``TARGET_SAMPLES`` samples over the arrival span (at least 1 ms; 0.1 s when all arrive at once)."""
    if last_arrival_s <= 0:
        return 0.1
    return max(last_arrival_s / TARGET_SAMPLES, _MIN_INTERVAL_S)


class Sampler:
    """Samples ``instances`` at 0, interval, 2 x interval, ... while ``active()`` holds."""

    __slots__ = ("_active", "_instances", "_kernel", "interval_s", "series")

    def __init__(
        self,
        instances: Sequence[SimInstance],
        kernel: EventKernel,
        interval_s: float,
        active: Callable[[], bool],
    ) -> None:
        if not interval_s > 0 or math.isinf(interval_s):
            raise ValueError(f"sample interval must be a positive finite number of seconds, got {interval_s}")
        self._instances = instances
        self._kernel = kernel
        self._active = active
        self.interval_s = interval_s
        self.series = [InstanceSeries(i.spec.name, i.kv.num_blocks, interval_s) for i in instances]

    def start(self) -> None:
        self._kernel.schedule(self._kernel.now_s, self._tick)

    def _tick(self, _: object) -> None:
        now = self._kernel.now_s
        for instance, series in zip(self._instances, self.series, strict=True):
            waiting, running, kv_used, busy = instance.sample(now)
            series.times_s.append(now)
            series.num_waiting.append(waiting)
            series.num_running.append(running)
            series.kv_used_blocks.append(kv_used)
            series.busy_s.append(busy)
        if len(self.series[0].times_s) >= MAX_SAMPLES:
            self._decimate()
        if self._active():
            # After a decimation the newest sample was dropped; the next one lands on the doubled grid.
            self._kernel.schedule(self.series[0].times_s[-1] + self.interval_s, self._tick)

    def _decimate(self) -> None:
        self.interval_s *= 2
        for series in self.series:
            series.interval_s = self.interval_s
            # Keep the points on the doubled grid (even indices), so spacing stays uniform.
            series.times_s = series.times_s[::2]
            series.num_waiting = series.num_waiting[::2]
            series.num_running = series.num_running[::2]
            series.kv_used_blocks = series.kv_used_blocks[::2]
            series.busy_s = series.busy_s[::2]
