import heapq
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.sim.kernel import EventKernel


def test_events_fire_in_time_then_schedule_order() -> None:
    kernel = EventKernel()
    fired: list[str] = []
    kernel.schedule(1.0, fired.append, "late-tie")
    kernel.schedule(0.5, fired.append, "first")
    kernel.schedule(1.0, fired.append, "later-tie")
    kernel.run()
    assert fired == ["first", "late-tie", "later-tie"]
    assert kernel.num_events == 3


def test_scheduling_in_the_past_is_an_error() -> None:
    kernel = EventKernel()
    kernel.schedule(2.0, lambda _: None)
    kernel.run()
    with pytest.raises(ValueError, match="before now"):
        kernel.schedule(1.0, lambda _: None)


def test_run_until_leaves_later_events() -> None:
    kernel = EventKernel()
    fired: list[int] = []
    for time_s in (1.0, 2.0, 3.0):
        kernel.schedule(time_s, fired.append, int(time_s))
    kernel.run(until_s=2.0)
    assert fired == [1, 2]
    assert kernel.pending == 1


class _Reference:
    """The plain one-heap kernel the sorted-stream fast path must equal (order, clock, counts)."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, Any, Any]] = []
        self.seq = 0
        self.now_s = 0.0
        self.num_events = 0

    def schedule(self, time_s: float, handler: Any, payload: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time_s, self.seq, handler, payload))

    def schedule_all(self, times_s: list[float], handler: Any, payloads: list[Any]) -> None:
        for time_s, payload in zip(times_s, payloads, strict=True):
            self.schedule(time_s, handler, payload)

    def run(self, until_s: float = math.inf) -> None:
        while self.heap and self.heap[0][0] <= until_s:
            time_s, _, handler, payload = heapq.heappop(self.heap)
            self.now_s = time_s
            handler(payload)
            self.num_events += 1

    @property
    def pending(self) -> int:
        return len(self.heap)


def _script(kernel: Any, batch: list[float], sort: bool, early: list[float], until_s: float) -> list[Any]:
    """Events before and after a batch, ties on purpose (times on a 0.5 grid), handlers that schedule
    more (also at the current instant) and call ``schedule_all`` mid-run; a partial run, then the rest."""
    fired: list[Any] = []

    def chain(payload: tuple[str, int]) -> None:
        fired.append((kernel.now_s, payload))
        name, depth = payload
        if depth < 2:
            kernel.schedule(kernel.now_s + 0.5 * (depth % 2), chain, (name, depth + 1))
        if name == "b0" and depth == 0:
            kernel.schedule_all([kernel.now_s, kernel.now_s + 1.0], fired.append, ["mid-a", "mid-b"])

    for k, time_s in enumerate(early):
        kernel.schedule(time_s, chain, (f"e{k}", 0))
    times = sorted(batch) if sort else batch
    kernel.schedule_all(times, chain, [(f"b{k}", 0) for k in range(len(times))])
    for k, time_s in enumerate(early):
        kernel.schedule(time_s, chain, (f"l{k}", 1))
    kernel.run(until_s)
    fired.append(("pending", kernel.pending, kernel.now_s))
    kernel.run()
    fired.append(("end", kernel.num_events, kernel.now_s))
    return fired


grid = st.integers(0, 12).map(lambda k: 0.5 * k)


@settings(max_examples=150, deadline=None)
@given(st.lists(grid, max_size=12), st.booleans(), st.lists(grid, max_size=5), grid)
def test_a_sorted_batch_fires_exactly_like_the_plain_heap(
    batch: list[float], sort: bool, early: list[float], until_s: float
) -> None:
    assert _script(EventKernel(), batch, sort, early, until_s) == _script(_Reference(), batch, sort, early, until_s)
