"""The live dispatcher: route with a registry router, queue per instance, forward with retries.

Path of one call: ``accept`` (counted) -> ``open`` [route over healthy, feasible ``BackendView``s ->
enqueue at that backend's ``InstanceQueue`` -> wait for admission (bounded by ``timeouts.queue_s``) ->
forward to vLLM -> read the first chunk (the whole body when not streaming)] -> the caller relays the rest
(``relay``) or takes the body -> ``finish``. Failures before the first byte reaches the client (connect
error, 5xx, broken or timed-out first read) are retried on another backend, at most ``max_attempts`` in
all; after that byte, a failure ends the call as ``failed`` (the stream gets an SSE error event).

Invariant: every accepted call ends in exactly one terminal outcome (``finish`` is idempotent and is
reached from every path, including cancellation), and its queue slot is released in the same place.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from slosched.contract import HEADER_REQUEST_ID
from slosched.core.request import Outcome, Request
from slosched.core.views import StepObservation
from slosched.perf.linear import LinearStepPredictor
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.base import CompletionObserver
from slosched.policies.engine.queue import fits_model_len
from slosched.policies.registry import PolicyContext
from slosched.policies.spec import PolicyParams
from slosched.serve.backends import Backend, periodic
from slosched.serve.calls import Call, HttpError
from slosched.serve.config import GatewayConfig
from slosched.serve.forwarding import (
    StreamTokens,
    adds_usage,
    backend_body,
    close_response,
    is_broken,
    json_bytes,
    usage_tokens,
)
from slosched.serve.metrics import GatewayMetrics
from slosched.serve.queues import InstanceQueue, LiveSeq, QueueFullError
from slosched.serve.tuning import LiveAlphaTuner
from slosched.serve.upstream import UpstreamError, UpstreamResponse
from slosched.serve.views import BackendView

log = logging.getLogger("slosched.serve")


@dataclass(slots=True)
class Attempt:
    """A forwarded call whose backend response is open; ``first_chunk`` already read."""

    backend: Backend
    queue: InstanceQueue
    seq: LiveSeq
    response: UpstreamResponse
    first_chunk: bytes
    sent_s: float


class _Retry(Exception):
    """This attempt failed before any byte reached the client; try another backend."""


class Dispatcher:
    """Owns backends, queues, policies and background loops of one gateway."""

    def __init__(self, config: GatewayConfig, clock: Callable[[], float] | None = None) -> None:
        self.config = config
        origin = time.monotonic()
        # asyncio's default loop clock is time.monotonic: now_s is the event-loop clock, shifted to 0.
        self.clock = clock or (lambda: time.monotonic() - origin)
        self.backends = [Backend(index, backend, config) for index, backend in enumerate(config.backends)]
        # Refit rarely: a refit is an NNLS over the window (milliseconds), and live traffic observes a step
        # per finished request, far more often than the simulator's refit ticks.
        self.predictors = [LinearStepPredictor(refit_every=256) for _ in self.backends]
        policies = config.policies
        self.context = PolicyContext(
            instances=tuple(backend.spec() for backend in config.backends),
            rng=np.random.default_rng(policies.seed),
            output_predictor=HistoryOutputPredictor(default_tokens=config.default_max_tokens // 2),
            extras={"step_predictors": self.predictors},
        )
        # The shared builder (policies/spec.py): the same names build the same objects as in the simulator.
        built = policies.spec().build(self.context)
        self.router, self.job_policy = built.cluster_layer()
        # Checked once: a runtime protocol isinstance costs ~10 us, too much for every request.
        self._observer = self.router if isinstance(self.router, CompletionObserver) else None
        self.queues = [
            InstanceQueue(
                index,
                self.context.instances[index],
                built.new_engine(),
                self.predictors[index],
                self.clock,
                backend.max_queue,
                min_wake_s=config.tick_s,  # time-dependent policies re-pump at most this often
            )
            for index, backend in enumerate(config.backends)
        ]
        self.alpha_tuner: LiveAlphaTuner | None = None
        if config.alpha_tuning.enabled:
            params = PolicyParams(engine={policies.engine: policies.engine_params},
                                  job={policies.job: policies.job_params})  # fmt: skip
            self.alpha_tuner = LiveAlphaTuner.build(self.router, policies.router, self.context.instances,
                                                    policies.engine, policies.job, params, config.alpha_tuning,
                                                    self.clock)  # fmt: skip
        self.metrics = GatewayMetrics(self._queue_rows)
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def _queue_rows(self) -> list[tuple[str, int, int, bool, int]]:
        return [
            (b.name, len(q.waiting), q.num_running, b.healthy, q.window)
            for b, q in zip(self.backends, self.queues, strict=True)
        ]

    # --- lifecycle --------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._stop.clear()
        self._tasks = [
            asyncio.create_task(periodic(self.config.scrape_interval_s, self.scrape_all, self._stop)),
            asyncio.create_task(periodic(self.config.health_interval_s, self.check_all, self._stop)),
        ]
        if self.alpha_tuner is not None:
            interval = min(self.config.alpha_tuning.window_s / 4, 5.0)
            self._tasks.append(asyncio.create_task(periodic(interval, self.alpha_tuner.tick, self._stop)))

    async def stop(self) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for backend in self.backends:
            await backend.close()

    async def scrape_all(self) -> None:
        now = self.clock()
        await asyncio.gather(*(backend.scrape(now) for backend in self.backends))
        for backend, queue in zip(self.backends, self.queues, strict=True):
            queue.set_kv_usage(backend.metrics.kv_usage)
            queue.pump()

    async def check_all(self) -> None:
        await asyncio.gather(*(backend.check_health() for backend in self.backends))

    # --- routing -----------------------------------------------------------------------------------------
    def choose(self, request: Request, excluded: set[int]) -> InstanceQueue:
        """Route over healthy, feasible, not-yet-tried backends; raises 503/400/429 HttpErrors."""
        now = self.clock()
        views = [
            BackendView(backend, self.queues[backend.index], now)
            for backend in self.backends
            if backend.index not in excluded and backend.routable()
        ]
        if not views:
            raise HttpError(503, "no_backend", "no healthy backend", self.config.retry_down_after_s)
        # The gateway's prompt count is an estimate and its max_tokens may be its own default, so it checks
        # the prompt part of vLLM's rule only (room for one output token); vLLM applies the whole rule.
        feasible = [view for view in views if fits_model_len(request.prompt_tokens, None, view.spec.max_model_len)]
        if not feasible:
            raise HttpError(400, "context_length", f"prompt of ~{request.prompt_tokens} tokens is too long")
        while feasible:
            position = self.router.route(request, feasible, now)
            queue = self.queues[feasible[position].index]
            if len(queue.waiting) < queue.max_queue or queue.num_running < queue.window:
                return queue
            feasible.pop(position)  # the router's pick is full: let it choose among the others
        raise HttpError(429, "queue_full", "every backend queue is full", 1.0)

    # --- one call ----------------------------------------------------------------------------------------
    def accept(self, call: Call) -> None:
        """Count the call as accepted and give it its output-length belief (never the truth)."""
        call.request.predicted_output_tokens = min(
            self.context.output_predictor.predict(call.request), float(call.request.max_output_tokens)
        )
        self.metrics.accepted.inc()

    async def open(self, call: Call) -> Attempt:
        """Admit and forward ``call``, retrying on another backend until a first chunk arrives."""
        excluded: set[int] = set()
        deadline = time.monotonic() + self.config.timeouts.queue_s
        last_error = "no attempt"
        while call.attempts < self.config.max_attempts:
            queue = self.choose(call.request, excluded)
            call.attempts += 1
            try:
                return await self._attempt(call, queue, deadline)
            except _Retry as retry:
                last_error = str(retry)
                excluded.add(queue.index)
                self.metrics.retries.inc()
                if len(excluded) >= len(self.backends):
                    excluded.clear()  # every backend failed once: allow another round, bounded by attempts
        raise HttpError(502, "backend_failed", f"all {call.attempts} attempts failed; last: {last_error}", 1.0)

    async def _attempt(self, call: Call, queue: InstanceQueue, deadline: float) -> Attempt:
        backend = self.backends[queue.index]
        try:
            seq = queue.enqueue(call.request, call.request.prompt_tokens)
        except QueueFullError as error:
            raise HttpError(429, "queue_full", f"queue of {error} is full", 1.0) from error
        metrics = self.metrics
        metrics.labelled(metrics.routed, backend.name).inc()
        try:
            if not seq.admitted.done():  # admitted on enqueue (the common case): no timer needed
                await asyncio.wait_for(seq.admitted, timeout=max(deadline - time.monotonic(), 0.0))
        except TimeoutError as error:
            queue.withdraw(seq)
            raise HttpError(503, "queue_timeout", "timed out waiting for a backend slot", 1.0) from error
        except BaseException:
            queue.withdraw(seq)
            raise
        metrics.labelled(metrics.queue_time, backend.name).observe(self.clock() - seq.enqueue_s)
        try:
            return await self._forward(call, backend, queue, seq)
        except BaseException:
            queue.withdraw(seq)
            raise

    async def _forward(self, call: Call, backend: Backend, queue: InstanceQueue, seq: LiveSeq) -> Attempt:
        payload = json_bytes(backend_body(call, backend.config, self.config, self.clock()))
        sent_s = self.clock()
        timeout_s = self.config.timeouts.first_byte_s
        try:
            response = await backend.pool.request(
                "POST", call.path, payload, {HEADER_REQUEST_ID: call.request.id}, timeout_s
            )
        except UpstreamError as error:
            if is_broken(error):
                backend.mark_down(f"{type(error).__name__}: {error}")
            raise _Retry(f"{backend.name}: {type(error).__name__}") from error
        try:
            first = await (response.next_chunk(timeout_s) if call.stream else response.read(timeout_s))
        except UpstreamError as error:
            response.close()
            if is_broken(error):
                backend.mark_down(f"{type(error).__name__} before first byte")
            raise _Retry(f"{backend.name}: {type(error).__name__} before first byte") from error
        except BaseException:
            response.close()
            raise
        if response.status >= 500:
            close_response(response, response.complete)
            raise _Retry(f"{backend.name}: HTTP {response.status}")
        call.backend = backend.name
        return Attempt(backend, queue, seq, response, first, sent_s)

    async def relay(self, call: Call, attempt: Attempt, write: Callable[[bytes, bool], Awaitable[None]]) -> None:
        """Stream the backend's bytes to the client through ``write(data, last)``, counting tokens; the
        last write (``last=True``, possibly empty) ends the client's body. Always finishes the call
        (cancellation included: the client left)."""
        outcome, reason = Outcome.CANCELLED, "client_disconnected"
        tokens = StreamTokens(attempt.seq, self.clock, strip_usage=adds_usage(call.body))
        response, read_s = attempt.response, self.config.timeouts.read_s
        try:
            chunk = attempt.first_chunk
            while not response.complete:  # complete: the body ended and every byte was taken
                out = tokens.feed(chunk)
                if out:
                    await write(out, False)
                chunk = await response.next_chunk(read_s)
            # The end of the body goes out with the last bytes (one write less per stream).
            await write(tokens.feed(chunk) + tokens.flush(), True)
            ok = response.status < 400
            outcome, reason = (Outcome.COMPLETED, "ok") if ok else (Outcome.FAILED, "backend_4xx")
        except UpstreamError as error:
            if is_broken(error):
                attempt.backend.mark_down(f"{type(error).__name__} mid-stream")
            outcome, reason = Outcome.FAILED, "backend_stream_broken"
            message = {"error": {"message": f"backend failed mid-stream: {type(error).__name__}", "code": 502}}
            await write(f"data: {json.dumps(message)}\n\n".encode(), True)
        finally:
            close_response(response, outcome is Outcome.COMPLETED)
            call.output_tokens = attempt.seq.num_output_tokens
            self.finish(call, outcome, reason, attempt)

    async def abandon(self, call: Call, attempt: Attempt) -> None:
        """The response ended without ``relay`` finishing (client gone before the first chunk was sent)."""
        if call.outcome is None:
            attempt.response.close()
            self.finish(call, Outcome.CANCELLED, "client_disconnected", attempt)

    async def complete(self, call: Call) -> tuple[int, bytes]:
        """Non-streaming call: status and body (the whole body is read inside ``open``'s retry loop)."""
        attempt = await self.open(call)
        try:
            status = attempt.response.status
            call.output_tokens = usage_tokens(attempt.first_chunk)
            attempt.seq.num_output_tokens = call.output_tokens
            attempt.seq.first_token_s = self.clock()  # the client sees every token when the body arrives
            outcome = Outcome.COMPLETED if status < 400 else Outcome.FAILED
            self.finish(call, outcome, "ok" if status < 400 else "backend_4xx", attempt)
            return status, attempt.first_chunk
        finally:
            close_response(attempt.response, True)
            self.finish(call, Outcome.CANCELLED, "cancelled", attempt)

    def finish(self, call: Call, outcome: Outcome, reason: str, attempt: Attempt | None = None) -> None:
        """Record the call's single terminal outcome; later calls are no-ops. Releases its queue slot."""
        if call.outcome is not None:
            return
        call.outcome, call.reason = outcome.value, reason
        now = self.clock()
        call.finish_s = now
        metrics = self.metrics
        metrics.labelled(metrics.requests, outcome.value, reason).inc()
        if attempt is None:
            if outcome is Outcome.REJECTED:
                metrics.labelled(metrics.rejections, reason).inc()
            return
        seq = attempt.seq
        call.first_token_s = seq.first_token_s
        if outcome is Outcome.COMPLETED and reason == "ok":
            self._learn(call, attempt, now)
        attempt.queue.withdraw(seq)

    def _learn(self, call: Call, attempt: Attempt, now: float) -> None:
        request, seq, name = call.request, attempt.seq, attempt.backend.name
        latency = now - request.arrival_s
        metrics = self.metrics
        metrics.labelled(metrics.request_latency, name).observe(latency)
        if seq.first_token_s is not None:
            metrics.labelled(metrics.ttft, name).observe(seq.first_token_s - request.arrival_s)
        if call.output_tokens > 0:
            self.context.output_predictor.observe(request, call.output_tokens)
        if self._observer is not None:
            self._observer.on_request_finished(attempt.queue.index, request, latency, now)
        if call.output_tokens >= 2:
            if call.stream and seq.first_token_s is not None:
                decode_s = (now - seq.first_token_s) / (call.output_tokens - 1)
            else:  # one body at the end: the per-token time includes prefill, so it errs slow
                decode_s = (now - attempt.sent_s) / call.output_tokens
            batch = max(attempt.queue.num_running, 1)
            context = batch * (request.prompt_tokens + call.output_tokens // 2)
            self.predictors[attempt.queue.index].observe(StepObservation(0, 0, batch, context, (decode_s,)))
        self._count_slo(call, now)

    def _count_slo(self, call: Call, now: float) -> None:
        request, metrics = call.request, self.metrics
        if math.isfinite(request.deadline_s):
            metrics.labelled(metrics.slo, "deadline", "true" if now <= request.deadline_s else "false").inc()
        if request.ttft_slo_s is not None and call.first_token_s is not None:
            met = call.first_token_s - request.arrival_s <= request.ttft_slo_s
            metrics.labelled(metrics.slo, "ttft", "true" if met else "false").inc()
        if (
            request.tpot_slo_s is not None
            and call.stream
            and call.first_token_s is not None
            and call.output_tokens >= 2
        ):
            tpot = (now - call.first_token_s) / (call.output_tokens - 1)
            metrics.labelled(metrics.slo, "tpot", "true" if tpot <= request.tpot_slo_s else "false").inc()
