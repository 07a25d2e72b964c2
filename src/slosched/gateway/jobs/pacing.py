"""Workflow stage calls enter the queues within their tenant's fair share, as relQuery rows do (``rows.py``).

A stage's calls run in parallel. Without pacing, a tenant firing many of them (one wide stage, or many
workflows at once) takes every free queue place, and the other tenants' calls then displace its newest ones
or find the queues full. With fair sharing on, each stage call waits here, outside the queues, while its
tenant holds its weighted share of the capacity (``policies/fairness/places.fair_room``) and another tenant
holds calls too; it enters as the tenant's calls finish or the others leave. A tenant alone is not held
back: the queues' own limits decide, exactly as without fair sharing.

The check and the call's enqueueing happen in one event-loop step (``Dispatcher.complete`` routes before it
first awaits), so parallel calls of one tenant never pass the check on the same free place.
"""

from __future__ import annotations

import asyncio
import time

from slosched.gateway.calls.call import HttpError
from slosched.gateway.dispatch.dispatcher import Dispatcher

POLL_S = 0.02  # a waiting call looks at its tenant's room again after this


async def within_share(dispatcher: Dispatcher, tenant: str, timeout_s: float) -> None:
    """Return once ``tenant`` may add one call within its fair share (at once without fair sharing or while no
    other tenant holds calls). Past ``timeout_s`` raises the 503 ``queue_timeout`` a call waiting that long in
    a queue gets."""
    deadline = time.monotonic() + timeout_s
    while True:
        room = dispatcher.tenant_room(tenant, contended=True)
        if room is None or room > 0:
            return
        if time.monotonic() >= deadline:
            message = f"tenant {tenant[:64]!r} held its fair share of the queues for {timeout_s:g} s"
            raise HttpError(503, "queue_timeout", message, 1.0)
        await asyncio.sleep(POLL_S)
