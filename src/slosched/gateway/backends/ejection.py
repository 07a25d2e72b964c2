"""Outlier ejection of one backend: a circuit breaker driven by the outcomes of real calls.

Why besides health checks: a server can answer ``/health`` while failing or hanging every generation
(a wedged engine, a broken model), and only the calls see it. Failures are 5xx answers, timeouts,
connection errors, invalid bodies (a 200 that is not JSON) and broken streams; any other answer, a 4xx
included (the client's fault), is a success.

States: *closed* (routable) -> after ``consecutive_failures`` failures in a row *open* (ejected, not
routable) for ``base_s`` doubled on every ejection of one streak, capped at ``max_s`` (a streak ends after
``max_s`` without an ejection) -> *half-open*: one probe call at a time; its success closes the circuit,
its failure opens it again for the next, longer period. A call cancelled by its client is no verdict. A
health check that sees a backend back after it was down closes the circuit at once (``recovered``).

Invariants: at most one probe in flight; only a probe's outcome changes an ejected backend's state (the
late outcomes of calls that were in flight when it was ejected are ignored).

Hand-written, not a library (issue 23): pybreaker (1.4, the best kept of pybreaker, aiobreaker,
circuitbreaker) costs x21.7-23.5 this class's per routed call while closed (``current_state`` + ``calling()``
vs ``available`` + ``begin`` + ``succeeded``; ``slosched bench libs``, row ``breaker``, two runs of 9
interleaved rounds each, 2-core machine: a lock and listener calls per call). Nor do the libraries keep these
semantics: their open period is fixed (no doubling per streak), they read the wall clock rather than the
caller's ``now_s``, and they have no ``recovered`` (the health check closing the circuit), no early probe
(``may_probe``) and no "late outcomes of an ejected backend's calls are ignored".
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from slosched.gateway.ops.config import EjectionConfig

log = logging.getLogger("slosched.gateway")


@dataclass(slots=True)
class Outlier:
    """Ejection state of one backend; times in seconds on any monotonic clock the caller passes."""

    config: EjectionConfig
    name: str = ""
    failures: int = 0  # consecutive, while closed
    ejected: bool = False
    ejected_until_s: float = -math.inf
    num_ejections: int = 0  # in the current streak: the next ejection lasts base_s * 2**num_ejections
    last_ejected_s: float = -math.inf
    probing: bool = False
    total_ejections: int = 0  # since start, for /metrics (slosched:backend_ejections_total)

    def available(self, now_s: float) -> bool:
        """Closed, or half-open with no probe in flight."""
        return not self.ejected or (now_s >= self.ejected_until_s and not self.probing)

    def may_probe(self) -> bool:
        """Ejected, and no probe in flight: routing may send one early when nothing else serves the model."""
        return self.ejected and not self.probing

    def begin(self) -> bool:
        """A call is sent to this backend; True when it is the probe (the backend is ejected)."""
        if not self.ejected:
            return False
        self.probing = True
        return True

    def succeeded(self, probe: bool) -> None:
        if self.ejected:
            if not probe:
                return
            log.info("backend %s rejoins after a successful probe", self.name)
            self.ejected = self.probing = False
        self.failures = 0

    def failed(self, now_s: float, probe: bool, reason: str) -> None:
        if self.ejected:
            if probe:
                self.probing = False
                self._eject(now_s, f"probe failed: {reason}")
            return
        self.failures += 1
        if self.failures >= self.config.consecutive_failures:
            self._eject(now_s, f"{self.failures} consecutive failures, last: {reason}")

    def recovered(self) -> None:
        """The backend's health check sees it back after it was down: the ejection (the outage's calls
        failing to connect) ends now rather than at its timer or a lucky probe, so calls flow at once. The
        streak is kept: a backend that answers ``/health`` but still fails its calls is ejected again,
        for longer, after ``consecutive_failures``."""
        if self.ejected:
            log.info("backend %s rejoins: its health check sees it back", self.name)
            self.ejected = self.probing = False
            self.failures = 0

    def released(self, probe: bool) -> None:
        """The call ended without a verdict (its client left): another probe may go."""
        if probe:
            self.probing = False

    def _eject(self, now_s: float, reason: str) -> None:
        config = self.config
        if now_s - self.last_ejected_s > config.max_s:
            self.num_ejections = 0  # a streak ends after a quiet max_s
        duration_s = min(config.base_s * 2.0 ** min(self.num_ejections, 62), config.max_s)
        self.num_ejections += 1
        self.total_ejections += 1
        self.ejected, self.failures = True, 0
        self.ejected_until_s = now_s + duration_s
        self.last_ejected_s = now_s
        log.warning("backend %s ejected for %.1f s: %s", self.name, duration_s, reason)
