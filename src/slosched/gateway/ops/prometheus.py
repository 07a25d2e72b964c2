"""Prometheus metrics of one gateway (its own ``CollectorRegistry``, so several gateways can live in one
process, as in tests). Queue gauges are read from the live queues at scrape time, never duplicated.

Names follow vLLM's where the quantity is the same, under a ``slosched:`` prefix, with the model label
``model_name`` (``vllm:time_to_first_token_seconds`` -> ``slosched:time_to_first_token_seconds``, ...; the
table and the deprecated names still exported are in ``ops/metric_names.py``), with vLLM's bucket sets
extended down to the gateway's faster cases. Request metrics carry ``model_name`` and ``tenant`` labels;
tenants are bounded (``TenantLabels``) so a client cannot blow up the series count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from slosched.core.request import Outcome
from slosched.gateway.calls.call import Call, per_sequence
from slosched.gateway.ops.buckets import E2E_BUCKETS, JOB_BUCKETS, QUEUE_BUCKETS, TPOT_BUCKETS, TTFT_BUCKETS
from slosched.gateway.ops.metric_names import MODEL_LABEL, DeprecatedAliases
from slosched.gateway.ops.status import RecentActivity

OTHER_TENANT = "other"
_REQUEST_LABELS = ["backend", MODEL_LABEL, "tenant"]

# (backend, waiting, in flight, up, concurrency window, ejected now, ejections so far)
QueueRow = tuple[str, int, int, bool, int, bool, int]


class QueueCollector(Collector):
    """Per-instance queue length, in-flight count, health, window and outlier ejections, read at collection
    time. ``up`` is 0 both when health checks fail and while ejected; ``slosched:backend_ejected`` tells
    the second apart, and ``slosched:backend_ejections_total`` counts ejections (a flapping backend)."""

    def __init__(self, rows: Callable[[], Iterable[QueueRow]]) -> None:
        self._rows = rows

    def collect(self) -> Iterable[Metric]:
        queued = GaugeMetricFamily(
            "slosched:num_requests_waiting", "requests waiting at the gateway", labels=["backend"]
        )
        running = GaugeMetricFamily(
            "slosched:num_requests_running", "requests forwarded, not finished", labels=["backend"]
        )
        healthy = GaugeMetricFamily("slosched:backend_up", "1 when the backend is healthy", labels=["backend"])
        window = GaugeMetricFamily("slosched:concurrency_window", "concurrency window", labels=["backend"])
        ejected = GaugeMetricFamily(
            "slosched:backend_ejected", "1 while outlier detection keeps the backend out", labels=["backend"]
        )
        ejections = CounterMetricFamily(
            "slosched:backend_ejections", "outlier ejections of the backend", labels=["backend"]
        )
        for name, num_waiting, num_running, up, size, is_ejected, num_ejections in self._rows():
            queued.add_metric([name], num_waiting)
            running.add_metric([name], num_running)
            healthy.add_metric([name], 1.0 if up else 0.0)
            window.add_metric([name], size)
            ejected.add_metric([name], 1.0 if is_ejected else 0.0)
            ejections.add_metric([name], num_ejections)
        return [queued, running, healthy, window, ejected, ejections]


class _TenantQueueCollector(Collector):
    """``slosched:tenant_num_requests_waiting{tenant}``: calls each tenant has queued at the gateway (fair sharing on).
    Tenants are labelled by ``TenantLabels``, so the series stay bounded (the rest sum into ``other``)."""

    def __init__(self, places: Callable[[], Mapping[str, int]], label: Callable[[str], str]) -> None:
        self._places = places
        self._label = label

    def collect(self) -> Iterable[Metric]:
        gauge = GaugeMetricFamily(
            "slosched:tenant_num_requests_waiting", "calls a tenant has queued at the gateway", labels=["tenant"]
        )
        totals: dict[str, int] = {}
        for tenant, count in self._places().items():
            label = self._label(tenant)
            totals[label] = totals.get(label, 0) + count
        for label, count in totals.items():
            gauge.add_metric([label], count)
        return [gauge]


class TenantLabels:
    """The ``tenant`` label of a tenant name: configured tenants (and ``default``) always keep their name;
    up to ``max_tenants`` others (header tenants) keep theirs in order of first appearance; the rest fold
    into ``other``. Only kept names are remembered, so memory stays bounded too."""

    def __init__(self, configured: Callable[[], Collection[str]], max_tenants: int) -> None:
        self._configured = configured
        self._max_tenants = max_tenants
        self._labels: dict[str, str] = {}
        self._num_unconfigured = 0

    def __call__(self, tenant: str) -> str:
        label = self._labels.get(tenant)
        if label is not None:
            return label
        if tenant == "default" or tenant in self._configured():
            self._labels[tenant] = tenant
            return tenant
        if self._num_unconfigured >= self._max_tenants:
            return OTHER_TENANT
        self._num_unconfigured += 1
        self._labels[tenant] = tenant
        return tenant


class GatewayMetrics:
    """All gateway counters and histograms; ``render()`` gives the exposition text for /metrics.
    ``activity`` keeps the recent routing decisions and SLO results for the status page."""

    def __init__(
        self,
        rows: Callable[[], Iterable[QueueRow]],
        tenants: Callable[[], Collection[str]] = frozenset,
        max_tenants: int = 32,
        tenant_places: Callable[[], Mapping[str, int]] = dict,
    ) -> None:
        # ``current`` holds the metrics under their names; ``registry`` (/metrics) adds the deprecated names,
        # copied from ``current`` at scrape time. Readers in the gateway read ``current``: half the samples.
        self.current = CollectorRegistry(auto_describe=True)
        registry = self.current
        self.tenant_label = TenantLabels(tenants, max_tenants)
        self.activity = RecentActivity()
        self._add_counters(registry)
        self._add_histograms(registry)
        registry.register(QueueCollector(rows))
        registry.register(_TenantQueueCollector(tenant_places, self.tenant_label))
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(registry)
        self.registry.register(DeprecatedAliases(registry.collect))
        self._children: dict[tuple[MetricWrapperBase, tuple[str, ...]], Any] = {}

    # Registered in this order, which is the order of /metrics.
    def _add_counters(self, registry: CollectorRegistry) -> None:
        self.routed = Counter("slosched:routed", "requests routed", ["backend"], registry=registry)
        self.requests = Counter(
            "slosched:requests", "requests by terminal outcome", ["outcome", "reason"], registry=registry
        )
        self.accepted = Counter("slosched:requests_accepted", "requests accepted", registry=registry)
        self.rejections = Counter(
            "slosched:admission_rejections", "requests refused at the door", ["reason"], registry=registry
        )
        self.retries = Counter("slosched:retries", "attempts retried on another backend", registry=registry)
        self.slo = Counter(
            "slosched:slo",
            "requests with an SLO by result (met: true/false)",
            ["kind", "met", "tenant"],
            registry=registry,
        )
        self.job_slo = Counter("slosched:job_slo", "finished jobs by SLO result", ["met"], registry=registry)
        self.jobs = Counter("slosched:jobs", "jobs by terminal outcome", ["kind", "outcome"], registry=registry)
        self.prompt_tokens = Counter(
            "slosched:prompt_tokens",
            "prompt tokens forwarded (the gateway's estimate for text prompts)",
            [MODEL_LABEL, "tenant"],
            registry=registry,
        )
        self.generation_tokens = Counter(
            "slosched:generation_tokens", "output tokens returned", [MODEL_LABEL, "tenant"], registry=registry
        )
        # vLLM's pair (``vllm:prefix_cache_queries`` / ``_hits``, tokens) as the gateway's prefix index expects it
        # when it routes: their ratio beside vLLM's says how far the approximation is from the engine's cache.
        self.prefix_queries = Counter(
            "slosched:prefix_index_queries", "prompt tokens routed, by backend", ["backend"], registry=registry
        )
        self.prefix_hits = Counter(
            "slosched:prefix_index_hits",
            "prompt tokens routed that the gateway's prefix index expected the backend to hold cached",
            ["backend"],
            registry=registry,
        )

    def _add_histograms(self, registry: CollectorRegistry) -> None:
        self.request_latency = Histogram(
            "slosched:e2e_request_latency_seconds",
            "end-to-end request latency at the gateway",
            _REQUEST_LABELS,
            buckets=E2E_BUCKETS,
            registry=registry,
        )
        self.ttft = Histogram(
            "slosched:time_to_first_token_seconds",
            "time to first token",
            _REQUEST_LABELS,
            buckets=TTFT_BUCKETS,
            registry=registry,
        )
        self.tpot = Histogram(
            "slosched:request_time_per_output_token_seconds",
            "time per output token after the first (streamed calls)",
            _REQUEST_LABELS,
            buckets=TPOT_BUCKETS,
            registry=registry,
        )
        self.queue_time = Histogram(
            "slosched:request_queue_time_seconds",
            "time waiting at the gateway",
            ["backend"],
            buckets=QUEUE_BUCKETS,
            registry=registry,
        )
        self.job_latency = Histogram(
            "slosched:job_latency_seconds", "job latency", ["kind"], buckets=JOB_BUCKETS, registry=registry
        )

    def labelled(self, metric: MetricWrapperBase, *values: str) -> Any:
        """``metric.labels(*values)``, cached: prometheus-client's own lookup costs ~3 us (argument checks,
        a lock) and the hot path needs several per request. Children are never removed, so the cache
        stays valid."""
        key = (metric, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def routed_to(self, now_s: float, request_id: str, backend: str, reason: str, waiting: int, running: int) -> None:
        """Count one routing decision and keep it for the status page."""
        self.labelled(self.routed, backend).inc()
        self.activity.decisions.append((now_s, request_id, backend, reason, waiting, running))

    def prefix_expected(self, backend: str, prompt_tokens: int, cached_tokens: int) -> None:
        self.labelled(self.prefix_queries, backend).inc(prompt_tokens)
        self.labelled(self.prefix_hits, backend).inc(cached_tokens)

    def slo_result(self, now_s: float, kind: str, met: bool, tenant: str, priority: float) -> None:
        """Count one SLO result (``tenant`` already a label) and keep it for the status page's window."""
        self.labelled(self.slo, kind, "true" if met else "false", tenant).inc()
        self.activity.slo.append((now_s, tenant, priority, kind, met))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def request_counts(self) -> dict[str, Any]:
        """Accepted calls and finished ones by outcome (the status page's request counts)."""
        outcomes: dict[str, float] = {}
        for family in self.requests.collect():
            for sample in family.samples:
                if sample.name == "slosched:requests_total":
                    key = sample.labels["outcome"]
                    outcomes[key] = outcomes.get(key, 0.0) + sample.value
        accepted = self.current.get_sample_value("slosched:requests_accepted_total") or 0.0
        return {"accepted": accepted, "outcomes": outcomes}

    def observe_completed(self, call: Call, backend: str, model: str, now: float) -> None:
        """Latencies of a completed call (TPOT of streams only, as vLLM) and its SLO results."""
        request = call.request
        labels = (backend, model, self.tenant_label(request.tenant))
        self.labelled(self.request_latency, *labels).observe(now - request.arrival_s)
        first_token_s = call.first_token_s
        if first_token_s is not None:
            self.labelled(self.ttft, *labels).observe(first_token_s - request.arrival_s)
            tokens = per_sequence(call.output_tokens, call.sequences)  # n choices decode side by side
            if call.stream and tokens >= 2:
                self.labelled(self.tpot, *labels).observe((now - first_token_s) / (tokens - 1))
        self.count_slo(call, now)

    def count_slo(self, call: Call, now: float) -> None:
        """One result per SLO the call declared (end-to-end deadline, TTFT, TPOT of a stream)."""
        request = call.request
        if not math.isfinite(request.deadline_s) and request.ttft_slo_s is None and request.tpot_slo_s is None:
            return  # the common case: no SLO
        tenant, priority = self.tenant_label(request.tenant), request.priority
        if math.isfinite(request.deadline_s):
            self.slo_result(now, "deadline", now <= request.deadline_s, tenant, priority)
        if request.ttft_slo_s is not None and call.first_token_s is not None:
            met = call.first_token_s - request.arrival_s <= request.ttft_slo_s
            self.slo_result(now, "ttft", met, tenant, priority)
        tokens = per_sequence(call.output_tokens, call.sequences)  # a sequence's time per token, as vLLM's
        if request.tpot_slo_s is not None and call.stream and call.first_token_s is not None and tokens >= 2:
            tpot = (now - call.first_token_s) / (tokens - 1)
            self.slo_result(now, "tpot", tpot <= request.tpot_slo_s, tenant, priority)

    def observe_finish(self, call: Call, outcome: Outcome, model: str | None, now: float) -> None:
        """What every finished call adds beyond its outcome: tokens of a forwarded call (``model`` is its
        backend's; a cancelled or failed one used the backend too), and a missed result for each SLO a
        rejected or failed call declared (a client that left is no verdict on the gateway). Completed calls
        count their SLOs in ``observe_completed``."""
        request = call.request
        if model is not None:
            labels = (model, self.tenant_label(request.tenant))
            self.labelled(self.prompt_tokens, *labels).inc(call.prefill_tokens)
            if call.output_tokens:
                self.labelled(self.generation_tokens, *labels).inc(call.output_tokens)
        if outcome is Outcome.REJECTED or outcome is Outcome.FAILED:
            tenant, priority = self.tenant_label(request.tenant), request.priority
            declared = {
                "deadline": math.isfinite(request.deadline_s),
                "ttft": request.ttft_slo_s is not None,
                "tpot": request.tpot_slo_s is not None and call.stream,
            }
            for kind, is_declared in declared.items():
                if is_declared:
                    self.slo_result(now, kind, False, tenant, priority)


def counter_value(metrics: GatewayMetrics, name: str, labels: Sequence[tuple[str, str]] = ()) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels`` (tests and benches): a label left
    out is summed over, so a reader stays right when a metric gains a label. 0 when absent."""
    wanted = dict(labels)
    total = 0.0
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(key) == value for key, value in wanted.items()):
                total += sample.value
    return total
