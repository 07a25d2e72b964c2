"""The dispatcher's routing table: one ``Slot`` per backend (the backend, its queue, its step-time belief) and
the policies built over them, held together as one immutable ``SlotSet``.

A ``SlotSet`` is never changed in place: a config reload builds a new one (``rebuilt``) and the dispatcher
swaps it in with one assignment, so a request sees either the old routing table or the new one, never half
of each. Backend swap invariant: a backend whose entry is unchanged keeps its objects (client pool, health,
queue and in-flight window); a removed or changed one is *retired*: it takes no new call but stays at the
tail of the slots until its queue is empty, so calls queued at or running on it finish there (their
``Attempt`` and queue keep consistent indexes); a later ``rebuilt`` drops it and the caller closes its
client. The router and job policy are rebuilt over the new instance list (their learned state starts afresh).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from slosched.core.request import Request
from slosched.core.views import JobView, StageDecision, StepObservation
from slosched.gateway.backends.backend import Backend
from slosched.gateway.calls.call import Call, HttpError, model_not_found, per_sequence
from slosched.gateway.dispatch.attempts import Attempt
from slosched.gateway.dispatch.queues import InstanceQueue, LiveSeq
from slosched.gateway.dispatch.retired import RetiredBackend
from slosched.gateway.dispatch.views import BackendView
from slosched.gateway.ops.config import GatewayConfig, fair_share_spec
from slosched.gateway.ops.prometheus import QueueRow
from slosched.perf.linear import LinearStepPredictor
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.base import CompletionObserver, Router
from slosched.policies.engine.queue import fits_model_len
from slosched.policies.fairness.places import fair_room
from slosched.policies.job.bands import BandAware, bands_of
from slosched.policies.job.base import JobPolicy, StageDecider, stage_decider
from slosched.policies.registry import PolicyContext


def new_predictor() -> LinearStepPredictor:
    # Refit rarely: a refit is an NNLS over the window (milliseconds), and live traffic observes a step per
    # finished request, far more often than the simulator's refit ticks.
    return LinearStepPredictor(refit_every=256)


@dataclass(slots=True)
class Slot:
    """One backend as the dispatcher serves it. Its index (``backend.index == queue.index``) is its position
    in the slot set, which is also the router's instance index."""

    backend: Backend
    queue: InstanceQueue
    predictor: LinearStepPredictor


# A slot being laid out: its queue is made once the layout's policies are built.
_Layout = list[tuple[Backend, InstanceQueue | None, LinearStepPredictor]]


@dataclass(frozen=True, slots=True)
class SlotSet:
    """The slots and the policies over them. ``backends``, ``queues`` and ``predictors`` are the slots'
    parts in slot order (what the router and the policies index)."""

    config: GatewayConfig
    slots: tuple[Slot, ...]
    context: PolicyContext
    router: Router
    job_policy: JobPolicy
    # Checked once: a runtime protocol isinstance costs ~10 us, too much for every request.
    observer: CompletionObserver | None
    decider: StageDecider  # the job policy's decisions, with the backends' views where it reads the backlog
    backends: tuple[Backend, ...]
    queues: tuple[InstanceQueue, ...]
    predictors: list[LinearStepPredictor]  # the very list policies read as context.extras["step_predictors"]
    models: dict[str, int]  # served model -> the largest max_model_len among its backends

    @classmethod
    def first(cls, config: GatewayConfig, clock: Callable[[], float]) -> SlotSet:
        """The slot set of a starting gateway: every configured backend, fresh beliefs and policies."""
        layout: _Layout = [
            (Backend(index, backend, config), None, new_predictor()) for index, backend in enumerate(config.backends)
        ]
        rng = np.random.default_rng(config.policies.seed)
        output_predictor = HistoryOutputPredictor(
            default_tokens=config.default_max_tokens // 2, mode=config.policies.output_predictor
        )
        return _assemble(config, layout, clock, rng, output_predictor, {})

    def with_config(self, config: GatewayConfig) -> SlotSet:
        """The same slots under a config whose backend list is unchanged (keys, tenants, timeouts...). The
        queues take the config's fair sharing (tenant weights and bands, ``fair_share``) in place."""
        fair = fair_share_spec(config)
        for queue in self.queues:
            queue.share_fairly(fair)
        if isinstance(self.job_policy, BandAware):  # and the job layer judges admission by the new bands
            self.job_policy.use_bands(bands_of(fair))
        return dataclasses.replace(self, config=config)

    def rebuilt(self, config: GatewayConfig, clock: Callable[[], float]) -> tuple[SlotSet, list[RetiredBackend]]:
        """Slots for ``config.backends`` (reusing unchanged ones), then the retired ones still busy. Also
        returns the retired backends dropped now (idle): the caller closes them. Kept backends and queues
        are renumbered in place, so the caller swaps the result in before its next await."""
        current = {slot.backend.name: slot for slot in self.slots if not isinstance(slot.backend, RetiredBackend)}
        retired = [slot for slot in self.slots if isinstance(slot.backend, RetiredBackend)]
        layout: _Layout = []
        for backend_config in config.backends:
            kept = current.pop(backend_config.name, None)
            if kept is not None and kept.backend.config == backend_config:
                layout.append((kept.backend, kept.queue, kept.predictor))
            else:
                layout.append((Backend(len(layout), backend_config, config), None, new_predictor()))
        # Changed or removed: retire (a changed backend's new entry above is a new object with a new pool).
        retired += [Slot(RetiredBackend(slot.backend), slot.queue, slot.predictor) for slot in current.values()]
        dropped = [slot.backend for slot in retired if is_idle(slot.queue)]
        layout += [(slot.backend, slot.queue, slot.predictor) for slot in retired if not is_idle(slot.queue)]
        old = self.context
        slots = _assemble(config, layout, clock, old.rng, old.output_predictor, old.extras)
        return slots, [backend for backend in dropped if isinstance(backend, RetiredBackend)]

    @property
    def draining(self) -> bool:
        """Whether a retired backend still finishes its calls here."""
        return any(isinstance(backend, RetiredBackend) for backend in self.backends)

    @property
    def drained(self) -> bool:
        """Whether a retired backend has nothing left (a rebuild would drop it)."""
        return any(isinstance(slot.backend, RetiredBackend) and is_idle(slot.queue) for slot in self.slots)

    def free_room(self) -> int:
        """Calls the routable backends take now without refusing one: free window slots plus free queue places
        (a call takes at least one slot, so free slots bound the calls that start)."""
        room = 0
        for backend, queue in zip(self.backends, self.queues, strict=True):
            if backend.routable():
                room += queue.free_window + max(queue.max_queue - len(queue.waiting), 0)
        return room

    def capacity(self) -> int:
        """Calls all queues hold at once: in-flight windows plus queue places."""
        return sum(queue.window + queue.max_queue for queue in self.queues)

    def tenant_room(self, tenant: str, contended: bool = False) -> int | None:
        """Calls ``tenant`` may add within its weighted share of the capacity (None: no fair sharing; with
        ``contended``, None too while no other tenant holds a call: the queues' own limits decide then)."""
        held: dict[str, int] = {}
        spec = None
        for queue in self.queues:
            if queue.places is not None:
                spec = queue.places.spec
                for name, count in queue.places.held.items():
                    held[name] = held.get(name, 0) + count
        if spec is None or (contended and not any(count > 0 for name, count in held.items() if name != tenant)):
            return None
        return fair_room(spec, tenant, self.capacity(), held)

    def tenant_places(self) -> dict[str, int]:
        """Queued calls per tenant over every queue (the per-tenant occupancy gauge); empty without fair sharing."""
        waiting: dict[str, int] = {}
        for queue in self.queues:
            if queue.places is not None:
                for name, count in queue.places.waiting.items():
                    waiting[name] = waiting.get(name, 0) + count
        return waiting

    def queue_rows(self) -> list[QueueRow]:
        return [
            (
                b.name,
                len(q.waiting),
                q.num_running,
                b.healthy and not b.outlier.ejected,
                q.window,
                b.outlier.ejected,
                b.outlier.total_ejections,
            )
            for b, q in zip(self.backends, self.queues, strict=True)
        ]

    def learn(self, call: Call, attempt: Attempt, now: float) -> None:
        """What a completed call teaches the beliefs (``learn_finished``)."""
        tokens = per_sequence(call.output_tokens, call.sequences)
        self.learn_finished(attempt.queue, attempt.seq, tokens, call.stream, attempt.sent_s, now)

    def learn_finished(
        self, queue: InstanceQueue, seq: LiveSeq, output_tokens: int, streamed: bool, sent_s: float, now: float
    ) -> None:
        """What a call completed at ``queue`` teaches the beliefs: the output-length predictor, the router's
        completion feedback and the backend's step-time predictor. The gateway's calls, and the picker's (from
        the responses Envoy shows it): one mechanism. ``output_tokens``: one sequence's (``per_sequence``)."""
        request, index = seq.request, queue.index
        if output_tokens > 0:
            self.context.output_predictor.observe(request, output_tokens)
        if self.observer is not None:
            self.observer.on_request_finished(index, request, now - request.arrival_s, now)
        if output_tokens >= 2:
            if streamed and seq.first_token_s is not None:
                decode_s = (now - seq.first_token_s) / (output_tokens - 1)
            else:  # one body at the end: the per-token time includes prefill, so it errs slow
                decode_s = (now - sent_s) / output_tokens
            batch = max(queue.running_sequences, 1)  # the decode batch: every running call's sequences
            context = batch * (request.prompt_tokens + output_tokens // 2)
            self.predictors[index].observe(StepObservation(0, 0, batch, context, (decode_s,)))

    def believe(self, call: Call) -> None:
        """Give ``call`` its output-length belief (never the truth): the predictor's, averaged with the client's
        prior when it sent one (``expected_output_length``, ``osl``). The prior is weighed, not obeyed: a client
        claiming tiny outputs to jump a shortest-first queue moves its belief at most halfway below what the
        predictor learned from completed requests."""
        hint = call.output_hint
        predicted = self.context.output_predictor.predict(call.request)
        belief = predicted if hint is None else 0.5 * (predicted + hint)
        call.request.predicted_output_tokens = min(belief, float(call.request.max_output_tokens))

    def choose(self, request: Request, excluded: set[int], model: str | None, now: float) -> InstanceQueue:
        """Route over the healthy, not ejected, feasible, not-yet-tried backends serving ``model`` (None:
        any); raises 404/503/400/429 HttpErrors."""
        views = [self._view(backend, now) for backend in self._candidates(excluded, model)]
        # The gateway's prompt count is an estimate and its max_tokens may be its own default, so it checks
        # the prompt part of vLLM's rule only (room for one output token); vLLM applies the whole rule.
        feasible = [view for view in views if fits_model_len(request.prompt_tokens, None, view.spec.max_model_len)]
        if not feasible:
            raise HttpError(400, "context_length", f"prompt of ~{request.prompt_tokens} tokens is too long")
        while feasible:
            position = self.router.route(request, feasible, now)
            queue = self.queues[feasible[position].index]
            if len(queue.waiting) < queue.max_queue or queue.free_window > 0:
                return queue
            if queue.places is not None and queue.places.victim(request.tenant, queue.max_queue) is not None:
                return queue  # full, but this tenant is under its fair share: it displaces (queues.py)
            feasible.pop(position)  # the router's pick is full: let it choose among the others
        raise HttpError(429, "queue_full", "every backend queue is full", 1.0)

    def decide_stage(self, job: JobView, requests: Sequence[Request], now: float) -> StageDecision:
        """The job policy's decision for a released stage (not applied); a policy that reads the backlog
        sees every routable backend's view."""
        return self.decider(job, requests, now, lambda: [self._view(b, now) for b in self.backends if b.routable()])

    def _view(self, backend: Backend, now: float) -> BackendView:
        return BackendView(backend, self.queues[backend.index], now)

    def others_than(self, backend: str | None) -> set[int]:
        """The backends but ``backend`` (None: none), to exclude from routing a call pinned to it."""
        return set() if backend is None else {b.index for b in self.backends if b.name != backend}

    def _candidates(self, excluded: set[int], model: str | None) -> list[Backend]:
        if model is not None and model not in self.models:
            raise model_not_found(model, self.models)
        now = time.monotonic()
        usable = [
            backend
            for backend in self.backends
            if backend.index not in excluded and (model is None or backend.config.model == model) and backend.routable()
        ]
        ready = [backend for backend in usable if backend.outlier.available(now)]
        if ready:
            return ready
        # Every candidate is ejected: the one back soonest takes a probe call early rather than every call
        # to the model failing until an ejection ends (at most one probe per backend is in flight).
        probes = [backend for backend in usable if backend.outlier.may_probe()]
        if probes:
            return [min(probes, key=lambda backend: backend.outlier.ejected_until_s)]
        wait_s = min((b.outlier.ejected_until_s - now for b in usable), default=self.config.retry_down_after_s)
        what = "no healthy backend" if model is None else f"no healthy backend serves model {model!r}"
        raise HttpError(503, "no_backend", what, max(wait_s, 1.0))

    async def scrape(self, now_s: float) -> None:
        """Read every backend's engine state; each queue then admits against its backend's new KV usage."""
        await asyncio.gather(*(backend.scrape(now_s) for backend in self.backends))
        self.refresh_queues()

    def refresh_queues(self) -> None:
        """Each queue admits against its backend's newly scraped KV usage (after any scrape, the picker's too)."""
        for backend, queue in zip(self.backends, self.queues, strict=True):
            queue.set_kv_usage(backend.metrics.kv_usage)
            queue.pump()

    async def check_health(self, only_down: bool) -> None:
        """Health-check every backend, or (``only_down``) those marked down, which are checked more often."""
        await asyncio.gather(*(b.check_health() for b in self.backends if not (only_down and b.healthy)))

    def request_counts(self) -> tuple[int, int]:
        """Calls running on and waiting for the backends."""
        running = sum(queue.num_running for queue in self.queues)
        waiting = sum(len(queue.waiting) for queue in self.queues)
        return running, waiting


def is_idle(queue: InstanceQueue) -> bool:
    return not queue.waiting and queue.num_running == 0


def served_models(config: GatewayConfig) -> dict[str, int]:
    models: dict[str, int] = {}
    for backend in config.backends:
        models[backend.model] = max(models.get(backend.model, 0), backend.max_model_len)
    return models


def _assemble(
    config: GatewayConfig,
    layout: _Layout,
    clock: Callable[[], float],
    rng: np.random.Generator,
    output_predictor: Any,
    extras: Mapping[str, Any],
) -> SlotSet:
    """Renumber the layout, build the policies over its instances, and make new queues where needed."""
    for index, (backend, queue, _) in enumerate(layout):
        backend.index = index
        if isinstance(backend, RetiredBackend):
            backend.original.index = index  # calls in flight hold the original
        if queue is not None:
            queue.index = index
    predictors = [predictor for _, _, predictor in layout]
    context = PolicyContext(
        instances=tuple(backend.config.spec() for backend, _, _ in layout),
        rng=rng,
        output_predictor=output_predictor,
        extras={**extras, "step_predictors": predictors},
    )
    # The shared builder (policies/spec.py): the same names build the same objects as in the simulator.
    spec = dataclasses.replace(config.policies.spec(), fair_share=fair_share_spec(config))
    built = spec.build(context)
    router, job_policy = built.cluster_layer()
    slots: list[Slot] = []
    for index, (backend, queue, predictor) in enumerate(layout):
        if queue is None:
            queue = _new_queue(index, backend, predictor, built.new_engine(), context, clock, config)
        else:  # a kept queue keeps its engine policy: it takes the config's fair sharing in place
            queue.share_fairly(spec.fair_share)
        slots.append(Slot(backend, queue, predictor))
    return SlotSet(
        config=config,
        slots=tuple(slots),
        context=context,
        router=router,
        job_policy=job_policy,
        observer=router if isinstance(router, CompletionObserver) else None,
        decider=stage_decider(job_policy),
        backends=tuple(slot.backend for slot in slots),
        queues=tuple(slot.queue for slot in slots),
        predictors=predictors,
        models=served_models(config),
    )


def _new_queue(
    index: int,
    backend: Backend,
    predictor: LinearStepPredictor,
    engine: Any,
    context: PolicyContext,
    clock: Callable[[], float],
    config: GatewayConfig,
) -> InstanceQueue:
    return InstanceQueue(
        index,
        context.instances[index],
        engine,
        predictor,
        clock,
        backend.config.max_queue,
        min_wake_s=config.tick_s,  # time-dependent policies re-pump at most this often
    )
