"""``FairShare``: which waiting call the next engine slot goes to, across tenants and bands.

Three rules, in this order (the shape of llm-d's flow control: priority bands, fairness between flows within a
band; and of weighted fair queuing / the Virtual Token Counter of "Fairness in Serving Large Language Models",
OSDI 2024):

1. **Aging.** A call that has waited ``max_wait_s`` or longer goes before every call that has not, oldest
   first. This is the starvation bound: a lower band is never held back longer than that by a higher one.
2. **Bands.** Otherwise the lowest band (the tenant's class) with waiting calls is served first.
3. **Weighted fairness within a band.** Each tenant has a counter of the service it received divided by its
   weight (a call costs its prompt tokens plus its *predicted* output tokens: belief, never the truth). The
   tenant with the lowest counter goes next; its calls keep the engine ordering's order among themselves.
   A tenant that starts waiting is lifted to the lowest counter of the tenants already waiting, so an idle
   tenant does not bank credit (VTC's rule): over any span two tenants both wait, their counters differ by at
   most one call's cost over its weight, i.e. each gets its weight's share of the service.

``picks`` is lazy: one O(n) grouping of the waiting list, then O(log tenants) per call taken, and the
admission pass stops taking after its free slots. ``charge`` is called for every admitted call.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterator, Sequence
from typing import TypeVar

from slosched.core.views import SeqView
from slosched.policies.fairness.spec import FairShareSpec

S = TypeVar("S", bound=SeqView)


def sequences_of(seq: SeqView) -> int:
    """Sequences a call makes the engine run: the gateway's calls carry their prompts times ``n``
    (``LiveSeq.sequences``); a request of the other runtimes is one."""
    return getattr(seq, "sequences", 1)


def call_cost(seq: SeqView) -> float:
    """The service one call takes, in tokens: prompt (every prompt of it) plus predicted output, one per
    sequence (at least 1)."""
    return max(seq.num_prompt_tokens + sequences_of(seq) * seq.request.predicted_output_tokens, 1.0)


def _enqueued(seq: SeqView) -> float:
    return seq.enqueue_s


class FairShare:
    """Fair selection state of one instance's queue (see the module rules). Not thread-safe; one per queue."""

    __slots__ = ("_backlogged", "_floor", "counters", "spec")

    def __init__(self, spec: FairShareSpec) -> None:
        self.spec = spec
        self.counters: dict[str, float] = {}  # tenant -> service received / weight (tokens)
        self._backlogged: frozenset[str] = frozenset()  # tenants waiting at the last pass
        self._floor = 0.0  # lowest counter of the waiting tenants, never decreasing

    def charge(self, seq: SeqView) -> None:
        """``seq`` was admitted: its tenant's counter grows by its cost over the tenant's weight."""
        tenant = seq.request.tenant
        self.counters[tenant] = self.counters.get(tenant, self._floor) + call_cost(seq) / self.spec.weight_of(tenant)

    def picks(self, waiting: Sequence[S], now_s: float, running: Sequence[SeqView] = (), slots: int = 0) -> Iterator[S]:
        """``waiting`` (in the engine ordering's order) in the order slots should go to them."""
        by_tenant: dict[str, list[S]] = {}  # in ordering order; dicts keep first appearance
        for seq in waiting:
            tenant = seq.request.tenant
            lane = by_tenant.get(tenant)
            if lane is None:
                by_tenant[tenant] = [seq]
            else:
                lane.append(seq)
        self._lift(by_tenant.keys())
        if slots:
            self._cap(by_tenant, running, slots)
        band_of = self.spec.band_of
        bands = {tenant: band_of(tenant) for tenant, calls in by_tenant.items() if calls}
        if not bands:
            return
        top = min(bands.values())
        horizon = now_s - self.spec.max_wait_s
        lanes: dict[float, dict[str, list[S]]] = {}
        for tenant, band in bands.items():
            calls = by_tenant[tenant]
            if band != top:  # the starvation bound: calls waiting max_wait_s or longer join the top band
                promoted = [seq for seq in calls if seq.enqueue_s <= horizon]
                if promoted:
                    lanes.setdefault(top, {})[tenant] = promoted
                    calls = [seq for seq in calls if seq.enqueue_s > horizon]
            if calls:
                lanes.setdefault(band, {})[tenant] = calls
        for band in sorted(lanes):
            yield from self._merge(lanes[band])

    def _cap(self, by_tenant: dict[str, list[S]], running: Sequence[SeqView], slots: int) -> None:
        """While several tenants are active here (running or waiting), each takes slots up to its weighted
        share of ``slots`` only (at least one); a tenant alone may take them all (idle tenants' shares are
        redistributed: weights are normalised over the active tenants). A share is taken against the active
        tenants of the tenant's own band and the higher ones only: a lower band's share flows up, so a higher
        band is never capped by a lower one (it may need more than its weight's share at a peak), while a
        lower band keeps at most its weighted share beside a busy higher band. Slots are sequences (a call of
        the gateway's holds its prompts times ``n``); a tenant holding none may start one call however wide."""
        held: dict[str, int] = dict.fromkeys(by_tenant, 0)
        for seq in running:
            tenant = seq.request.tenant
            held[tenant] = held.get(tenant, 0) + sequences_of(seq)
        if len(held) < 2:
            return
        weight_of, band_of = self.spec.weight_of, self.spec.band_of
        for tenant, calls in by_tenant.items():
            band = band_of(tenant)
            total = sum(weight_of(other) for other in held if band_of(other) <= band)
            room = max(int(slots * weight_of(tenant) / total), 1) - held[tenant]
            del calls[_within(calls, room, first_free=held[tenant] == 0) :]

    def _lift(self, backlogged: Collection[str]) -> None:
        """Tenants that start waiting join at the lowest counter of those already waiting (no banked credit)."""
        counters = self.counters
        before = [counters.get(tenant, 0.0) for tenant in backlogged if tenant in self._backlogged]
        if before:
            self._floor = max(self._floor, min(before))
        for tenant in backlogged:
            if tenant not in self._backlogged:
                counters[tenant] = max(counters.get(tenant, 0.0), self._floor)
        self._backlogged = frozenset(backlogged)

    def _merge(self, lanes: dict[str, list[S]]) -> Iterator[S]:
        """Tenants' lanes merged by projected counter (lowest first; ties: first in ordering order)."""
        counters, weight_of = self.counters, self.spec.weight_of
        tenants = list(lanes)
        heap = [(counters.get(tenant, self._floor), rank, 0) for rank, tenant in enumerate(tenants)]
        heapq.heapify(heap)
        while heap:
            counter, rank, position = heap[0]
            tenant = tenants[rank]
            lane = lanes[tenant]
            seq = lane[position]
            yield seq
            if position + 1 < len(lane):
                heapq.heapreplace(heap, (counter + call_cost(seq) / weight_of(tenant), rank, position + 1))
            else:
                heapq.heappop(heap)


def _within(calls: Sequence[SeqView], room: int, first_free: bool) -> int:
    """How many of ``calls`` (in order) fit ``room`` sequence slots; with ``first_free`` the first one always does."""
    taken = 0
    for count, seq in enumerate(calls):
        taken += sequences_of(seq)
        if taken > room and not (first_free and count == 0):
            return count
    return len(calls)
