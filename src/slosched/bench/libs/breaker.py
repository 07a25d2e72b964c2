"""``breaker``: one call's passage through a backend's circuit breaker while it is closed, the state on
every call the gateway routes: ``gateway/backends/ejection.py``'s ``Outlier`` (``available``, ``begin``,
``succeeded``) vs pybreaker's ``CircuitBreaker`` (``current_state`` for routing, ``calling()`` around the
call)."""

from __future__ import annotations

import time
from importlib.metadata import version

from slosched.bench.libs.setup import Pair
from slosched.gateway.backends.ejection import Outlier
from slosched.gateway.ops.config import EjectionConfig

_CALLS = 2000


def pairs() -> list[Pair]:
    import pybreaker

    outlier = Outlier(EjectionConfig(), "b0")
    breaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=10.0, name="b0")
    clock = time.monotonic

    def ours() -> None:
        for _ in range(_CALLS):
            if outlier.available(clock()):
                outlier.succeeded(outlier.begin())

    def theirs() -> None:
        for _ in range(_CALLS):
            if breaker.current_state != pybreaker.STATE_OPEN:
                with breaker.calling():
                    pass

    return [Pair("breaker", f"pybreaker {version('pybreaker')}", ours, theirs, _CALLS, "call")]
