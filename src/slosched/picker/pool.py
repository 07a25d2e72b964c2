"""The endpoint pool: the gateway's routing table (``SlotSet``) over the pool's endpoints, asked per request.

One mechanism with the gateway, not a copy: the endpoints become gateway backends, the router is built by
the same ``SlotSet`` from the same policy names, each decision is ``SlotSet.choose`` over the same
``BackendView``s (the gateway's own accounting plus the scraped vLLM gauges and the plugin's engine state),
and the request is parsed by the gateway's own ``parse_call`` (OpenAI body, ``x-slo-*`` / ``x-job-*``
headers and the other stacks' dialects), so a job's deadline reaches the router here as it does there.

What differs is who forwards: Envoy does. A pick is therefore entered in the chosen backend's queue at once
(``InstanceQueue.enqueue``: the call counts as running there, or waiting when the window is full, exactly as a
gateway call would) and withdrawn when Envoy's stream for it ends (``release``). Between two scrapes that
accounting is what keeps a burst from landing on the endpoint that looked idlest at the last scrape.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from slosched.core.request import Request
from slosched.gateway.backends.backend import Backend
from slosched.gateway.calls.call import (
    HttpError,
    model_not_found,
    parse_slo_headers,
    per_sequence,
)
from slosched.gateway.calls.dialects.registry import with_dialects
from slosched.gateway.calls.json_body import parse_json_object
from slosched.gateway.calls.other_routes import GENERATION_PATHS, bare_request, body_model
from slosched.gateway.calls.prompt_blocks import CHARS_PER_TOKEN
from slosched.gateway.dispatch.generations import generation_call
from slosched.gateway.dispatch.queues import InstanceQueue, LiveSeq, QueueFullError
from slosched.gateway.dispatch.response_owners import (
    ResponseOwners,
    owner_backend,
    response_id,
    stored_response_path,
)
from slosched.gateway.dispatch.retired import RetiredBackend
from slosched.gateway.dispatch.slots import SlotSet
from slosched.gateway.ops.config import GatewayConfig
from slosched.picker.config import EndpointConfig, PickerConfig, backend_config

_ids = itertools.count()


@dataclass(slots=True)
class Pick:
    """A decision: ``endpoints`` (the primary, then fallbacks), the queue entry that accounts for it and when
    it was made (on the pool's clock: the call's send time, as far as the picker can tell)."""

    endpoints: list[str]
    queue: InstanceQueue
    seq: LiveSeq
    picked_s: float


@dataclass(slots=True)
class ParsedRequest:
    """What the router sees of one HTTP request: its ``Request`` and model (None: any)."""

    request: Request
    model: str | None
    sequences: int = 1  # the call's prompts times ``n`` (``Call.sequences``): what its output is shared by
    pinned: str | None = None  # the only endpoint that may serve it (a stored response's, ``response_owners``)
    prefill_tokens: int = 0  # every prompt of the call (``Call.prefill_tokens``); 0: the request's own


class EndpointPool:
    """The pool's routing table, replaced whole when the endpoint list changes (``set_endpoints``)."""

    def __init__(self, config: PickerConfig, clock: Callable[[], float] | None = None) -> None:
        origin = time.monotonic()
        self.clock = clock or (lambda: time.monotonic() - origin)
        self.config = config
        self.slots: SlotSet | None = None
        self.endpoints: dict[str, EndpointConfig] = {}
        self.owners = ResponseOwners()  # which endpoint stored each response (read from the responses)
        self.set_endpoints(config.endpoints)

    def gateway_config(self, endpoints: Sequence[EndpointConfig]) -> GatewayConfig:
        """The gateway config the endpoints are served under (its routing part; nothing is forwarded)."""
        config = self.config
        return GatewayConfig(
            backends=[backend_config(endpoint) for endpoint in endpoints],
            policies=config.policies,
            scrape_interval_s=config.scrape_interval_s,
            engine_state_max_age_s=config.engine_state_max_age_s,
            retry_down_after_s=config.retry_down_after_s,
            default_max_tokens=config.default_max_tokens,
            max_body_bytes=config.max_body_bytes,
            xargs_key=None,  # the picker forwards nothing: it signs nothing
        )

    def set_endpoints(self, endpoints: Sequence[EndpointConfig]) -> list[Backend]:
        """Serve ``endpoints`` from now on; returns the backends dropped (the caller closes them). Unchanged
        endpoints keep their scraped state and in-flight picks (the gateway's reload, ``SlotSet.rebuilt``)."""
        self.endpoints = {endpoint.address: endpoint for endpoint in endpoints}
        old = self.slots
        if not endpoints:
            self.slots = None
            return [] if old is None else [b for b in old.backends if not isinstance(b, RetiredBackend)]
        config = self.gateway_config(endpoints)
        if old is None:
            self.slots = SlotSet.first(config, self.clock)
            return []
        if [b.model_dump() for b in old.config.backends] == [b.model_dump() for b in config.backends]:
            return []
        self.slots, dropped = old.rebuilt(config, self.clock)
        return list(dropped)

    def parse(
        self, path: str, headers: Mapping[str, str], raw: bytes | None, model_hint: str | None = None
    ) -> ParsedRequest:
        """The request the router sees; 400/404/413 ``HttpError`` as the gateway would answer them. Without a
        body (a GET, or a decision made at the headers), ``model_hint`` (a header) names the model, if any."""
        slots = self._slots()
        slo = parse_slo_headers(headers)
        now = self.clock()
        if raw is None or not raw.strip():
            parsed = ParsedRequest(bare_request(slo, now, 1, "other", _pick_id()), _served(model_hint, slots.models))
            stored = stored_response_path(path)  # a read or cancel of a stored response: where it lives
            if stored is not None:
                parsed.pinned = owner_backend(self.owners, slots.backends, stored, slo.tenant, "response_id").name
            return parsed
        if len(raw) > self.config.max_body_bytes:
            raise HttpError(413, "body_too_large", f"body: at most {self.config.max_body_bytes} bytes")
        body = parse_json_object(raw)  # the picker's copy: dialects strip fields from it, Envoy forwards the original
        slo = with_dialects(slo, headers, body)
        if path in GENERATION_PATHS:
            stored_by = (self.owners, slots.backends)
            call = generation_call(path, body, slo, now, self.config.default_max_tokens, slots.models, stored_by)
            slots.believe(call)
            return ParsedRequest(call.request, call.model, call.sequences, call.pinned, call.prefill_tokens)
        # Another route (embeddings, ...): routed by its model like llm-d's picker, sized by its body, as the
        # gateway forwards them (``calls/other_routes.py``).
        model = body_model(body, slots.models) if "model" in body else _served(model_hint, slots.models)
        return ParsedRequest(bare_request(slo, now, len(raw) // CHARS_PER_TOKEN, path, _pick_id()), model)

    def remember(self, pick: Pick, head: bytes) -> bool:
        """The Responses API: the endpoint of ``pick`` stored the response ``head`` starts (its follow-ups
        go there); whether its id was found."""
        found = response_id(head)
        if found is not None and self.slots is not None and any(q is pick.queue for q in self.slots.queues):
            self.owners.record(found, self.slots.backends[pick.queue.index].name, pick.seq.request.tenant)
        return found is not None

    def pick(self, parsed: ParsedRequest, subset: Iterable[str] | None = None) -> Pick:
        """Route ``parsed`` over the pool (only over ``subset`` addresses when the proxy sent one) and account
        for it at the chosen endpoint; 503 when no endpoint is eligible, 429 when every queue is full."""
        slots = self._slots()
        excluded = self._outside(subset, slots) | slots.others_than(parsed.pinned)
        request, now = parsed.request, self.clock()
        queue = slots.choose(request, excluded, parsed.model, now)
        try:
            seq = queue.enqueue(request, max(parsed.prefill_tokens, request.prompt_tokens), parsed.sequences)
        except QueueFullError as error:
            raise HttpError(429, "queue_full", f"queue of {error} is full", 1.0) from error
        primary = queue
        endpoints = [slots.backends[queue.index].name]
        for _ in range(self.config.fallbacks):
            excluded.add(queue.index)
            try:
                queue = slots.choose(request, excluded, parsed.model, now)
            except HttpError:
                break  # fewer eligible endpoints than fallbacks asked for
            endpoints.append(slots.backends[queue.index].name)
        return Pick(endpoints, primary, seq, now)

    def served(self, pick: Pick, address: str) -> None:
        """The proxy reports that ``address`` served the call (a fallback, after the primary failed): the
        call's accounting moves there."""
        slots = self.slots
        if slots is None or address == pick.endpoints[0] or address not in pick.endpoints:
            return
        pick.queue.withdraw(pick.seq)
        queue = slots.queues[_index(slots, address)]
        try:
            pick.seq = queue.enqueue(pick.seq.request, pick.seq.num_prompt_tokens, pick.seq.sequences)
            pick.queue = queue
        except QueueFullError:
            pass  # its queue is full: the call is not counted anywhere rather than twice

    def learn(self, pick: Pick, output_tokens: int, streamed: bool) -> bool:
        """The call's response ended with ``output_tokens`` produced: the beliefs learn what the gateway's learn
        from a call it forwarded (``SlotSet.learn_finished``); whether they did. A pick made before the
        endpoints were rebuilt around it teaches nothing (its queue is no longer the pool's)."""
        slots = self.slots
        if slots is None or output_tokens <= 0 or not any(queue is pick.queue for queue in slots.queues):
            return False
        tokens = per_sequence(output_tokens, pick.seq.sequences)
        slots.learn_finished(pick.queue, pick.seq, tokens, streamed, pick.picked_s, self.clock())
        return True

    def release(self, pick: Pick) -> None:
        """The call ended (its ext_proc stream closed): its place at the endpoint is free."""
        pick.queue.withdraw(pick.seq)

    def _slots(self) -> SlotSet:
        if self.slots is None:
            raise HttpError(503, "no_backend", "the pool has no endpoints", 1.0)
        return self.slots

    @staticmethod
    def _outside(subset: Iterable[str] | None, slots: SlotSet) -> set[int]:
        if subset is None:
            return set()
        allowed = set(subset)
        if not allowed.intersection(backend.name for backend in slots.backends):
            raise HttpError(503, "no_backend", "no endpoint of the proxy's subset is in the pool", 1.0)
        return {backend.index for backend in slots.backends if backend.name not in allowed}


def _served(model: str | None, models: Mapping[str, int]) -> str | None:
    if model is not None and model not in models:
        raise model_not_found(model, models)
    return model


def _index(slots: SlotSet, name: str) -> int:
    return next(backend.index for backend in slots.backends if backend.name == name)


def _pick_id() -> str:
    return f"pick-{next(_ids)}"
