"""The live dispatcher: route with a registry router over its slot set (``slots.py``), queue per backend slot,
forward with retries.

Path of one call: ``accept`` (counted) -> ``open`` [route over the healthy, not ejected, feasible
``BackendView``s of the call's model -> enqueue at that backend's ``InstanceQueue`` -> wait for admission
(bounded by ``timeouts.queue_s``) -> forward to vLLM -> read the first chunk (the whole body when not
streaming) within a timeout derived from the predicted latency (``attempts.py``)] -> the caller relays the
rest (``relay``) or takes the body -> ``finish``. Failures before the first byte reaches the client (connect
error, 5xx, broken or timed-out first read, a body that is not JSON) are retried on another backend, at most
``max_attempts`` in all, and counted towards ejecting the backend (``backends/ejection.py``); after that byte, a
failure ends the call as ``failed`` (the stream gets an SSE error event).

Invariant: every accepted call ends in exactly one terminal outcome (``finish`` is idempotent and is
reached from every path, including cancellation), and its queue slot is released in the same place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from slosched.contract import HEADER_REQUEST_ID, UnixAnchor
from slosched.core.request import Outcome, Request
from slosched.core.views import JobView, StageDecision
from slosched.gateway.backends.backend import Backend, periodic
from slosched.gateway.backends.forwarding import (
    backend_body,
    body_tokens,
    call_stream_tokens,
    close_response,
    is_broken,
    json_bytes,
)
from slosched.gateway.backends.upstream import UpstreamError
from slosched.gateway.calls.call import Call, HttpError, per_sequence
from slosched.gateway.calls.other_routes import GENERATION_PATHS
from slosched.gateway.dispatch.alpha import LiveAlphaTuner
from slosched.gateway.dispatch.attempts import (
    Attempt,
    RetryElsewhere,
    failed_attempt,
    first_byte_timeout_s,
    is_event_stream,
    is_json,
    stream_error,
)
from slosched.gateway.dispatch.queues import DisplacedError, InstanceQueue, LiveSeq, QueueFullError, wait_admitted
from slosched.gateway.dispatch.slots import SlotSet
from slosched.gateway.dispatch.snapshot import status_snapshot
from slosched.gateway.ops.access_log import log_finished
from slosched.gateway.ops.config import GatewayConfig
from slosched.gateway.ops.prometheus import GatewayMetrics, QueueRow
from slosched.gateway.ops.status import SLO_WINDOW_S
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.cluster.base import Router
from slosched.policies.registry import PolicyContext
from slosched.policies.spec import PolicyParams

DRAIN_POLL_S = 0.2  # how often a reload's retired backends are looked at while they drain

log = logging.getLogger("slosched.gateway")
DOWN_CHECK_S = 0.5


class Dispatcher:
    """Owns the slot set (backends, queues, step predictors and the policies over them), the metrics and
    the background loops of one gateway. The slot set is replaced whole, never edited (``reconfigure``)."""

    def __init__(self, config: GatewayConfig, clock: Callable[[], float] | None = None) -> None:
        origin = time.monotonic()
        # asyncio's default loop clock is time.monotonic: now_s is the event-loop clock, shifted to 0.
        self.clock = clock or (lambda: time.monotonic() - origin)
        self.unix_anchor = UnixAnchor()  # one Unix deadline per job on every forwarded call
        self._slots = SlotSet.first(config, self.clock)
        policies = config.policies
        self.alpha_tuner: LiveAlphaTuner | None = None
        if config.alpha_tuning.enabled:
            params = PolicyParams(
                engine={policies.engine: policies.engine_params}, job={policies.job: policies.job_params}
            )
            self.alpha_tuner = LiveAlphaTuner.build(
                self.router,
                policies.router,
                self.context.instances,
                policies.engine,
                policies.job,
                params,
                config.alpha_tuning,
                self.clock,
            )
        rows = self._queue_rows
        self.metrics = GatewayMetrics(
            rows, lambda: self.config.tenants, config.metrics_max_tenants, lambda: self._slots.tenant_places()
        )
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # --- the slot set, read-only from outside --------------------------------------------------------------
    @property
    def config(self) -> GatewayConfig:
        return self._slots.config

    @property
    def backends(self) -> tuple[Backend, ...]:
        return self._slots.backends

    @property
    def queues(self) -> tuple[InstanceQueue, ...]:
        return self._slots.queues

    @property
    def predictors(self) -> list[LinearStepPredictor]:
        return self._slots.predictors

    @property
    def router(self) -> Router:
        return self._slots.router

    def decide_stage(self, job: JobView, requests: Sequence[Request], now: float) -> StageDecision:
        """The job policy's decision for a released stage, not yet applied (``SlotSet.decide_stage``)."""
        return self._slots.decide_stage(job, requests, now)

    @property
    def context(self) -> PolicyContext:
        return self._slots.context

    @property
    def models(self) -> dict[str, int]:
        """Served model -> the largest ``max_model_len`` among its backends (follows config reloads)."""
        return self._slots.models

    def _queue_rows(self) -> list[QueueRow]:
        return self._slots.queue_rows()

    def free_room(self) -> int:
        """Calls the routable backends take now without refusing one (relQuery rows are paced by it)."""
        return self._slots.free_room()

    def capacity(self) -> int:
        return self._slots.capacity()

    def tenant_room(self, tenant: str, contended: bool = False) -> int | None:
        """Calls ``tenant`` may still add within its fair share of ``capacity`` (``SlotSet.tenant_room``)."""
        return self._slots.tenant_room(tenant, contended)

    # --- lifecycle --------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._stop.clear()
        self._tasks = [
            asyncio.create_task(periodic(self.config.scrape_interval_s, self.scrape_all, self._stop)),
            asyncio.create_task(periodic(self.config.health_interval_s, self.check_all, self._stop)),
            # A down backend is checked more often: it rejoins within ~DOWN_CHECK_S of coming back.
            asyncio.create_task(
                periodic(min(self.config.health_interval_s, DOWN_CHECK_S), self.check_down, self._stop)
            ),
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
        await self._slots.scrape(self.clock())

    async def check_all(self) -> None:
        await self._slots.check_health(only_down=False)

    async def check_down(self) -> None:
        await self._slots.check_health(only_down=True)

    # --- routing -----------------------------------------------------------------------------------------
    def choose(self, request: Request, excluded: set[int], model: str | None = None) -> InstanceQueue:
        """Route over the healthy, unejected, feasible, untried backends of ``model``; 404/503/400/429."""
        return self._slots.choose(request, excluded, model, self.clock())

    # --- one call ----------------------------------------------------------------------------------------
    def accept(self, call: Call) -> None:
        """Count the call as accepted and give it its output-length belief (``SlotSet.believe``)."""
        self._slots.believe(call)
        self.metrics.accepted.inc()

    async def open(self, call: Call) -> Attempt:
        """Admit and forward ``call``, retrying on another backend until a first chunk arrives."""
        excluded = self._slots.others_than(call.pinned)  # a follow-up goes where its stored response lives
        deadline = time.monotonic() + self.config.timeouts.queue_s
        last_error, last_code = "no attempt", "backend_failed"
        while call.attempts < self.config.max_attempts:
            queue = self.choose(call.request, excluded, call.model)
            call.attempts += 1
            try:
                return await self._attempt(call, queue, deadline)
            except RetryElsewhere as retry:
                last_error, last_code = str(retry), retry.code
                log.info("request %s: attempt %d failed (%s), retrying", call.request_id, call.attempts, retry)
                excluded.add(queue.index)
                self.metrics.retries.inc()
                if len(excluded) >= sum(call.model in (None, b.config.model) for b in self.backends):
                    excluded = self._slots.others_than(call.pinned)  # another round, bounded by attempts
        raise HttpError(502, last_code, f"all {call.attempts} attempts failed; last: {last_error}", 1.0)

    async def _attempt(self, call: Call, queue: InstanceQueue, deadline: float) -> Attempt:
        backend = self.backends[queue.index]
        expected_cached = queue.cached_prefix_tokens(call.request)  # the index's credit as the call is routed
        try:
            seq = queue.enqueue(call.request, call.prefill_tokens, call.sequences)
        except QueueFullError as error:
            raise HttpError(429, "queue_full", f"queue of {error} is full", 1.0) from error
        probe = backend.outlier.begin()
        reason = "probe" if probe else self.config.policies.router if call.attempts == 1 else f"retry {call.attempts}"
        metrics = self.metrics
        metrics.routed_to(self.clock(), call.request_id, backend.name, reason, len(queue.waiting), queue.num_running)
        metrics.prefix_expected(backend.name, call.request.prompt_tokens, expected_cached)
        try:
            try:
                call.withdraw = partial(queue.leave, seq)  # the client leaving takes it out before admission
                await wait_admitted(seq, max(deadline - time.monotonic(), 0.0))
            except TimeoutError as error:
                raise HttpError(503, "queue_timeout", "timed out waiting for a backend slot", 1.0) from error
            except DisplacedError as error:  # fair sharing gave its place to a tenant under its share
                raise HttpError(429, "displaced", str(error), 1.0) from error
            metrics.labelled(metrics.queue_time, backend.name).observe(self.clock() - seq.enqueue_s)
            return await self._forward(call, backend, queue, seq, probe)
        except RetryElsewhere:
            queue.withdraw(seq)  # the failure is recorded where it happened
            raise
        except BaseException:
            queue.withdraw(seq)
            backend.outlier.released(probe)  # still waiting, or the client left: no verdict on the backend
            raise

    async def _forward(self, call: Call, backend: Backend, queue: InstanceQueue, seq: LiveSeq, probe: bool) -> Attempt:
        config = self.config
        key = config.xargs_key.encode() if config.xargs_key is not None else None
        sent_s = self.clock()
        payload = json_bytes(backend_body(call, backend.config, config, sent_s, key, self.unix_anchor.unix_s(sent_s)))
        last = call.attempts >= self.config.max_attempts
        predictor = self.predictors[queue.index]
        timeout_s = first_byte_timeout_s(call, queue.num_running, predictor, self.config.timeouts, last)
        try:
            headers = {HEADER_REQUEST_ID: call.request_id}
            response = await backend.pool.request("POST", call.path, payload, headers, timeout_s)
        except UpstreamError as error:
            raise failed_attempt(backend, probe, type(error).__name__, error) from error
        try:
            first = await (response.next_chunk(timeout_s) if call.stream else response.read(timeout_s))
        except UpstreamError as error:
            response.close()
            raise failed_attempt(backend, probe, f"{type(error).__name__} before first byte", error) from error
        except BaseException:
            response.close()
            raise
        if response.status >= 500:
            close_response(response, response.complete)
            raise failed_attempt(backend, probe, f"HTTP {response.status}")
        if not call.stream:
            if response.status < 300 and not is_json(first):
                close_response(response, True)
                raise failed_attempt(backend, probe, "a body that is not JSON", code="bad_backend_response")
            backend.outlier.succeeded(probe)  # a streamed call is judged when its stream ends (relay)
        elif response.status < 300 and not is_event_stream(response.header(b"content-type")):
            close_response(response, False)
            raise failed_attempt(backend, probe, "a stream that is not text/event-stream", code="bad_backend_response")
        call.backend = backend.name
        return Attempt(backend, queue, seq, response, first, sent_s, probe)

    async def relay(self, call: Call, attempt: Attempt, write: Callable[[bytes, bool], Awaitable[None]]) -> None:
        """Stream the backend's bytes to the client through ``write(data, last)``, counting tokens; the
        last write (``last=True``, possibly empty) ends the client's body. Always finishes the call
        (cancellation included: the client left)."""
        outcome, reason = Outcome.CANCELLED, "client_disconnected"
        tokens = call_stream_tokens(call, attempt.seq, self.clock)
        response, read_s = attempt.response, self.config.timeouts.read_s
        try:
            chunk = attempt.first_chunk
            while not response.complete:  # complete: the body ended and every byte was taken
                out = tokens.feed(chunk)
                if out:
                    await write(out, False)
                chunk = await response.next_chunk(read_s)
            # The end of the body goes out with the last bytes (one write less per stream).
            tail = tokens.feed(chunk) + tokens.flush()
            ok = response.status < 400
            outcome, reason = (Outcome.COMPLETED, "ok") if ok else (Outcome.FAILED, "backend_4xx")
            if ok and not tokens.done:  # a stream must end with [DONE]; a client must not take a cut one whole
                outcome, reason = Outcome.FAILED, "bad_backend_response"
                attempt.backend.outlier.failed(time.monotonic(), attempt.probe, "a stream without [DONE]")
                tail += stream_error("backend stream ended without [DONE]")
            await write(tail, True)
        except UpstreamError as error:
            if is_broken(error):
                attempt.backend.mark_down(f"{type(error).__name__} mid-stream")
            outcome, reason = Outcome.FAILED, "backend_stream_broken"
            await write(stream_error(f"backend failed mid-stream: {type(error).__name__}"), True)
        finally:
            close_response(response, outcome is Outcome.COMPLETED)
            attempt.judge_stream(outcome, reason)
            call.output_tokens = tokens.total
            self.finish(call, outcome, reason, attempt)

    async def abandon(self, call: Call, attempt: Attempt) -> None:
        """The response ended without ``relay`` finishing (client gone before the first chunk was sent)."""
        if call.outcome is None:
            attempt.response.close()
            if call.stream:
                attempt.backend.outlier.released(attempt.probe)
            self.finish(call, Outcome.CANCELLED, "client_disconnected", attempt)

    async def complete(self, call: Call) -> tuple[int, bytes]:
        """Non-streaming call: status and body (the whole body is read inside ``open``'s retry loop)."""
        attempt = await self.open(call)
        try:
            status = attempt.response.status
            call.output_tokens = body_tokens(call, attempt.first_chunk)
            attempt.seq.num_output_tokens = per_sequence(call.output_tokens, call.sequences)
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
        if outcome is Outcome.FAILED:  # logged under the id the client was answered with
            log.warning("request %s failed: %s", call.request_id, reason)
        now = self.clock()
        call.finish_s = now
        call.first_token_s = None if attempt is None else attempt.seq.first_token_s
        metrics = self.metrics
        metrics.labelled(metrics.requests, outcome.value, reason).inc()
        model = None if attempt is None else attempt.backend.config.model
        metrics.observe_finish(call, outcome, model, now)  # tokens, SLOs missed by failed calls
        log_finished(call, outcome, model, now)  # the access log's one line for the call
        if attempt is None:
            if outcome is Outcome.REJECTED:
                metrics.labelled(metrics.rejections, reason).inc()
            return
        if outcome is Outcome.COMPLETED and reason == "ok":
            if call.path in GENERATION_PATHS:  # an embedding's latency says nothing of a generation's
                self._slots.learn(call, attempt, now)
            metrics.observe_completed(call, attempt.backend.name, attempt.backend.config.model, now)
        attempt.queue.withdraw(attempt.seq)

    # --- config reload and status ---------------------------------------------------------------------------
    async def reconfigure(self, config: GatewayConfig) -> None:
        """Serve ``config`` from now on (a config reload, ``ops/reload.py``). When its backend list changed,
        unchanged backends keep their state, removed or changed ones take no new call and drain what they
        hold (``drain_retired``), then close; either way the slot set is swapped in one assignment."""
        old = self._slots
        if [b.model_dump() for b in old.config.backends] == [b.model_dump() for b in config.backends]:
            self._slots = old.with_config(config)
            return
        await self._rebuild(config)

    async def _rebuild(self, config: GatewayConfig) -> None:
        slots, dropped = self._slots.rebuilt(config, self.clock)
        tuner = self.alpha_tuner
        if tuner is not None:  # keep tuning (and the alpha reached) on the rebuilt router
            router: Any = slots.router
            router.alpha = tuner.router.alpha
            tuner.router = router
        # One synchronous swap: no await since the rebuild, so no request sees a half-swapped dispatcher.
        self._slots = slots
        for backend in dropped:
            await backend.close()

    @property
    def draining(self) -> bool:
        """Whether backends a reload retired still finish calls."""
        return self._slots.draining

    async def drain_retired(self) -> None:
        """Drop retired backends as their queues empty; returns when none is left."""
        while self._slots.draining:
            if self._slots.drained:
                await self._rebuild(self._slots.config)
            await asyncio.sleep(DRAIN_POLL_S)

    def snapshot(self, window_s: float = SLO_WINDOW_S) -> dict[str, Any]:
        """The JSON of ``/status.json``: plain numbers and strings, newest decisions first."""
        return status_snapshot(self._slots, self.metrics, self.clock(), window_s)
