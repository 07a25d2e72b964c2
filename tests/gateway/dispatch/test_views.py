"""Backend views: own accounting + scraped vLLM gauges, and the metrics parser."""

from __future__ import annotations

import asyncio
import time

from slosched.gateway.backends.backend import EngineMetrics, parse_vllm_metrics
from slosched.gateway.dispatch.views import BackendView
from tests.gateway.helpers import make_request, offline_dispatcher

_VLLM_TEXT = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 2.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="tiny"} 1234.0
"""


def test_parse_vllm_metrics_reads_the_gauges() -> None:
    metrics = parse_vllm_metrics(_VLLM_TEXT)
    assert (metrics.num_running, metrics.num_waiting, metrics.kv_usage) == (3.0, 2.0, 0.25)
    assert parse_vllm_metrics("") == EngineMetrics()


def test_parse_vllm_metrics_sums_engines_and_skips_other_families_fast() -> None:
    histogram = "\n".join(
        f'vllm:e2e_request_latency_seconds_bucket{{engine="{e}",le="{b}",model_name="tiny"}} {b}.0'
        for e in range(2)
        for b in range(2000)
    )
    second = '\nvllm:num_requests_running{engine="1",model_name="tiny"} 4.0\nvllm:num_requests_running_x 9\n'
    start = time.perf_counter()
    metrics = parse_vllm_metrics(_VLLM_TEXT + histogram + second)
    assert (metrics.num_running, metrics.num_waiting, metrics.kv_usage) == (7.0, 2.0, 0.25)
    assert time.perf_counter() - start < 0.2  # the whole exposition through the parser takes ~0.5 s


def test_view_combines_queue_accounting_with_scraped_gauges() -> None:
    async def scenario() -> None:
        dispatcher = offline_dispatcher()
        queue, backend = dispatcher.queues[0], dispatcher.backends[0]
        now = dispatcher.clock()
        seqs = [queue.enqueue(make_request(i, now), 100) for i in range(3)]  # window 2: two run, one waits
        seqs[0].num_output_tokens = 30  # streamed so far (predicted 32)
        view = BackendView(backend, queue, now)
        assert (view.num_running, view.num_waiting, view.waiting_prefill_tokens) == (2, 1, 100)
        assert view.outstanding_decode_tokens == (32 - 30) + 32 + 32
        assert [r.id for r in view.waiting_requests] == ["r2"]
        backend.metrics = EngineMetrics(num_running=5.0, num_waiting=1.0, kv_usage=0.5)
        queue.set_kv_usage(0.5)
        # vLLM also serves other clients: its gauges raise the view's load, own requests waiting inside
        # vLLM count as waiting, never twice.
        assert (view.num_running, view.num_waiting) == (5, 2)
        assert view.num_free_kv_blocks == view.num_kv_blocks // 2

    asyncio.run(scenario())


def test_every_sequence_of_a_call_counts_in_the_outstanding_decode_work() -> None:
    """A call of n=4 (``Call.sequences``) decodes four sequences of the predicted length: four times a single
    call's work, running or waiting; its progress is one sequence's."""

    async def scenario() -> None:
        dispatcher = offline_dispatcher()
        queue, backend = dispatcher.queues[0], dispatcher.backends[0]
        now = dispatcher.clock()
        running = queue.enqueue(make_request(0, now), 100, sequences=4)
        queue.enqueue(make_request(1, now), 100)
        queue.enqueue(make_request(2, now), 100, sequences=2)  # window 2: waits
        running.num_output_tokens = 30
        view = BackendView(backend, queue, now)
        assert view.outstanding_decode_tokens == 4 * (32 - 30) + 32 + 2 * 32

    asyncio.run(scenario())
