"""``FairPlaces``: the places of one bounded queue, shared by weight between tenants, work-conserving.

A tenant may take every free place. When the queue is full, an arrival of a tenant still under its share
(``capacity x weight / sum of the weights of the tenants holding places, itself included``) displaces the
newest queued call of the tenant furthest over its share (most places per weight); that call is answered
with a clear refusal by the runtime (a 429 at the gateway), so nothing accepted is lost silently. An
arrival at or over its share is refused as before.

Why displacement and not reserved places per tenant: reservations leave places idle whenever their tenant is
quiet (not work-conserving), and the number of tenants would have to be known to size them. Pushing out the
longest queue is the buffer-sharing rule of per-flow queuing switches ("longest queue drop"): work-conserving,
and it bounds each backlogged flow to its share when the buffer is contended.

Counting is O(1) per call; choosing whom to displace is O(tenants holding places), only when the queue is full.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from slosched.policies.fairness.spec import FairShareSpec


def fair_room(spec: FairShareSpec, tenant: str, capacity: int, held: Mapping[str, int]) -> int:
    """Places ``tenant`` may still take of ``capacity`` shared by the tenants in ``held`` (places held per tenant)
    without going over its weighted share; idle tenants count for nothing (work-conserving)."""
    weight_of = spec.weight_of
    total = weight_of(tenant) + sum(weight_of(name) for name, count in held.items() if count > 0 and name != tenant)
    share = int(capacity * weight_of(tenant) / total)
    return max(share - held.get(tenant, 0), 0)


class FairPlaces:
    """Places held per tenant in one queue (``waiting``) and, for pacing, calls held per tenant in all
    (``held``: waiting or running there)."""

    __slots__ = ("held", "spec", "waiting")

    def __init__(self, spec: FairShareSpec) -> None:
        self.spec = spec
        self.waiting: dict[str, int] = {}
        self.held: dict[str, int] = {}

    @classmethod
    def counted(cls, spec: FairShareSpec, waiting: Iterable[str], running: Iterable[str]) -> FairPlaces:
        """Places of a queue that starts sharing while it holds calls: one tenant name per waiting and per
        running call."""
        places = cls(spec)
        for tenant in waiting:
            places.joined(tenant)
        for tenant in running:
            places.joined(tenant)
            places.started(tenant)
        return places

    def joined(self, tenant: str) -> None:
        self.waiting[tenant] = self.waiting.get(tenant, 0) + 1
        self.held[tenant] = self.held.get(tenant, 0) + 1

    def started(self, tenant: str) -> None:
        """A waiting call was admitted: it leaves its place and keeps its hold."""
        self.waiting[tenant] -= 1

    def left_waiting(self, tenant: str) -> None:
        self.waiting[tenant] -= 1
        self.held[tenant] -= 1

    def left_running(self, tenant: str) -> None:
        self.held[tenant] -= 1

    def victim(self, arriving: str, capacity: int) -> str | None:
        """The tenant whose newest queued call a full queue of ``capacity`` places gives up to ``arriving``,
        or None when ``arriving`` is at or over its share (or nobody is over theirs): then it is refused."""
        weight_of = self.spec.weight_of
        holders = [(tenant, count) for tenant, count in self.waiting.items() if count > 0 and tenant != arriving]
        total = weight_of(arriving) + sum(weight_of(tenant) for tenant, _ in holders)
        if self.waiting.get(arriving, 0) + 1 > capacity * weight_of(arriving) / total:
            return None
        chosen, most = None, 0.0
        for tenant, count in holders:
            weight = weight_of(tenant)
            if count > capacity * weight / total and count / weight > most:
                chosen, most = tenant, count / weight
        return chosen
