"""The gateway's per-backend queue (``gateway/dispatch/queues.py``): its concurrency window counts sequences (a
call's prompts times ``n``), a call wider than the free slots waits and nobody behind it overtakes, an idle
window takes a call wider than itself, and finishing frees a call's slots."""

from __future__ import annotations

import asyncio

import pytest

from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.core.views import EngineView, StepMode, StepPlan
from slosched.gateway.dispatch.queues import InstanceQueue, QueueFullError
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.engine.admission.always import AlwaysAdmit
from slosched.policies.engine.base import EnginePolicy
from slosched.policies.engine.ordering.fcfs import FcfsOrdering

SPEC = InstanceSpec(name="b0", gpu="A100-80G", model="Llama-3-8B", max_running=8)


class _Batching:
    time_invariant = True

    def plan(self, engine: EngineView) -> StepPlan:
        return StepPlan(StepMode.MIXED, 2048, 8, True)


def _queue(max_queue: int = 16) -> InstanceQueue:
    policy = EnginePolicy("fcfs", FcfsOrdering(), AlwaysAdmit(), _Batching())
    return InstanceQueue(0, SPEC, policy, LinearStepPredictor(), lambda: 0.0, max_queue)


def _request(name: str) -> Request:
    return Request(name, name, "s", "t", 10, 4, 0.0, 0.0)


def _running(queue: InstanceQueue) -> list[str]:
    return [seq.request.id for seq in queue.running_seqs]


def test_the_window_counts_sequences_and_a_wide_call_waits_in_order() -> None:
    async def scenario() -> None:
        queue = _queue()
        first = queue.enqueue(_request("a"), 10, sequences=6)
        queue.enqueue(_request("b"), 10, sequences=4)  # 6 + 4 > 8: waits
        queue.enqueue(_request("c"), 10, sequences=1)  # would fit, but does not overtake b
        assert _running(queue) == ["a"] and (queue.running_sequences, queue.free_window) == (6, 2)
        queue.withdraw(first)  # a finished: its six slots are free
        assert _running(queue) == ["b", "c"] and queue.running_sequences == 5

    asyncio.run(scenario())


def test_an_idle_window_takes_a_call_wider_than_itself_alone() -> None:
    async def scenario() -> None:
        queue = _queue()
        wide = queue.enqueue(_request("wide"), 10, sequences=16)
        queue.enqueue(_request("next"), 10)
        assert _running(queue) == ["wide"] and queue.free_window == 0
        queue.withdraw(wide)
        assert _running(queue) == ["next"] and queue.running_sequences == 1

    asyncio.run(scenario())


def test_a_full_queue_refuses_a_call_that_cannot_start() -> None:
    async def scenario() -> None:
        queue = _queue(max_queue=1)
        first = queue.enqueue(_request("a"), 10, sequences=6)
        queue.enqueue(_request("b"), 10, sequences=1)  # 2 slots free: b starts, the queue stays empty
        queue.enqueue(_request("c"), 10, sequences=2)  # 1 slot free: c waits, the queue is full
        with pytest.raises(QueueFullError):
            queue.enqueue(_request("d"), 10, sequences=1)  # a slot is free, but c waits for slots ahead of it
        queue.withdraw(first)
        assert _running(queue) == ["b", "c"]
        queue.enqueue(_request("e"), 10, sequences=1)  # room again: e starts beside them
        assert _running(queue) == ["b", "c", "e"]

    asyncio.run(scenario())
