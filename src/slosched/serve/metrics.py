"""Prometheus metrics of one gateway (its own ``CollectorRegistry``, so several gateways can live in one
process, as in tests). Queue gauges are read from the live queues at scrape time, never duplicated."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class _QueueCollector(Collector):
    """Per-instance queue length, in-flight count, health and window, read at collection time."""

    def __init__(self, rows: Callable[[], Iterable[tuple[str, int, int, bool, int]]]) -> None:
        self._rows = rows

    def collect(self) -> Iterable[GaugeMetricFamily]:
        queued = GaugeMetricFamily("slosched_queue_length", "requests waiting at the gateway", labels=["backend"])
        running = GaugeMetricFamily("slosched_in_flight", "requests forwarded, not finished", labels=["backend"])
        healthy = GaugeMetricFamily("slosched_backend_up", "1 when the backend is healthy", labels=["backend"])
        window = GaugeMetricFamily("slosched_concurrency_window", "concurrency window", labels=["backend"])
        for name, num_waiting, num_running, up, size in self._rows():
            queued.add_metric([name], num_waiting)
            running.add_metric([name], num_running)
            healthy.add_metric([name], 1.0 if up else 0.0)
            window.add_metric([name], size)
        return [queued, running, healthy, window]


class GatewayMetrics:
    """All gateway counters and histograms; ``render()`` gives the exposition text for /metrics."""

    def __init__(self, rows: Callable[[], Iterable[tuple[str, int, int, bool, int]]]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.routed = Counter("slosched_routed", "requests routed", ["backend"], registry=registry)
        self.requests = Counter(
            "slosched_requests", "requests by terminal outcome", ["outcome", "reason"], registry=registry
        )
        self.accepted = Counter("slosched_requests_accepted", "requests accepted", registry=registry)
        self.rejections = Counter(
            "slosched_admission_rejections", "requests refused at the door", ["reason"], registry=registry
        )
        self.retries = Counter("slosched_retries", "attempts retried on another backend", registry=registry)
        self.slo = Counter("slosched_slo", "finished requests by SLO result", ["kind", "met"], registry=registry)
        self.job_slo = Counter("slosched_job_slo", "finished jobs by SLO result", ["met"], registry=registry)
        self.jobs = Counter("slosched_jobs", "jobs by terminal outcome", ["kind", "outcome"], registry=registry)
        self.request_latency = Histogram(
            "slosched_request_latency_seconds",
            "request latency",
            ["backend"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.ttft = Histogram(
            "slosched_ttft_seconds", "time to first token", ["backend"], buckets=_LATENCY_BUCKETS, registry=registry
        )
        self.queue_time = Histogram(
            "slosched_queue_seconds",
            "time waiting at the gateway",
            ["backend"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.job_latency = Histogram(
            "slosched_job_latency_seconds", "job latency", ["kind"], buckets=_LATENCY_BUCKETS, registry=registry
        )
        registry.register(_QueueCollector(rows))
        self._children: dict[tuple[MetricWrapperBase, tuple[str, ...]], Any] = {}

    def labelled(self, metric: MetricWrapperBase, *values: str) -> Any:
        """``metric.labels(*values)``, cached: prometheus-client's own lookup costs ~3 us (argument checks,
        a lock) and the hot path needs several per request. Children are never removed, so the cache
        stays valid."""
        key = (metric, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def render(self) -> bytes:
        return generate_latest(self.registry)


def counter_value(metrics: GatewayMetrics, name: str, labels: Sequence[tuple[str, str]] = ()) -> float:
    """Current value of one sample (tests and benches); 0 when absent."""
    wanted = dict(labels)
    value = metrics.registry.get_sample_value(name, wanted)
    return 0.0 if value is None else value
