"""The picker's Prometheus metrics, served on ``metrics_port`` (``/metrics``; GIE's pickers use 9090 too).

The per-endpoint queue gauges are the gateway's own (``QueueCollector`` over ``SlotSet.queue_rows``, read at
scrape time), and the counters the gateway also has keep its names (``slosched:routed``,
``slosched:admission_rejections``), so one dashboard reads either. What only the picker has: how long a
decision takes (``slosched:picker_decision_seconds``) and what the responses taught it
(``slosched:picker_responses_learned``, ``slosched:picker_learned_output_tokens``).

The exposition is prometheus-client's own HTTP server (a daemon thread): a scrape reads counters and the
queues' sizes, which the event loop only ever replaces whole, so no lock is needed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, start_http_server

from slosched.core.errors import ConfigError
from slosched.gateway.ops.prometheus import QueueCollector, QueueRow
from slosched.picker.pool import EndpointPool

# A decision is a parse and a router pass over the pool: tens of microseconds to a few milliseconds.
DECISION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)


class PickerMetrics:
    """Counters and histograms of one picker, in their own registry (several pickers in one process, as in
    tests); ``serve`` exposes them over HTTP until ``close``."""

    def __init__(self, pool: EndpointPool) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.routed = Counter("slosched:routed", "requests routed, by primary endpoint", ["backend"], registry=registry)
        self.rejections = Counter(
            "slosched:admission_rejections", "requests refused, by error code", ["reason"], registry=registry
        )
        self.decision = Histogram(
            "slosched:picker_decision_seconds",
            "time to parse a request and choose its endpoints",
            buckets=DECISION_BUCKETS,
            registry=registry,
        )
        self.learned = Counter(
            "slosched:picker_responses_learned", "responses whose token count the beliefs learned", registry=registry
        )
        self.learned_tokens = Counter(
            "slosched:picker_learned_output_tokens", "output tokens of the responses learned", registry=registry
        )
        registry.register(QueueCollector(lambda: _rows(pool)))
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def registry_text(self) -> str:
        """The exposition text a scrape of ``/metrics`` gets."""
        return generate_latest(self.registry).decode()

    def serve(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port`` (0: any free port); returns the port bound."""
        try:
            self._server, self._thread = start_http_server(port, host, self.registry)
        except OSError as error:
            raise ConfigError("metrics_port", f"cannot serve metrics on {host}:{port}: {error.strerror}") from None
        return int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def _rows(pool: EndpointPool) -> Iterable[QueueRow]:
    slots = pool.slots
    return [] if slots is None else slots.queue_rows()
