"""The event kernel: one heap keyed by (time, sequence number) so ties resolve in scheduling order.

>>> kernel = EventKernel()
>>> fired = []
>>> kernel.schedule(2.0, fired.append, "b")
>>> kernel.schedule(1.0, fired.append, "a")
>>> kernel.run()
>>> fired, kernel.now_s
(['a', 'b'], 2.0)
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

Handler = Callable[[Any], None]


class EventKernel:
    """Deterministic discrete-event loop. Time never goes back: scheduling in the past is an error."""

    __slots__ = ("_heap", "_seq", "now_s", "num_events")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Handler, Any]] = []
        self._seq = 0
        self.now_s = 0.0
        self.num_events = 0

    def schedule(self, time_s: float, handler: Handler, payload: Any = None) -> None:
        if time_s < self.now_s:
            raise ValueError(f"event at {time_s} is before now ({self.now_s})")
        self._seq += 1
        heapq.heappush(self._heap, (time_s, self._seq, handler, payload))

    def run(self, until_s: float = math.inf) -> None:
        heap = self._heap
        pop = heapq.heappop
        count = 0
        while heap and heap[0][0] <= until_s:
            time_s, _, handler, payload = pop(heap)
            self.now_s = time_s
            handler(payload)
            count += 1
        self.num_events += count

    @property
    def pending(self) -> int:
        return len(self._heap)
