"""What the gateway sends to and reads from a backend: the forwarded body with policy metadata, SSE token
counting, and response-closing rules."""

from __future__ import annotations

import math
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp

from slosched.core.request import Request
from slosched.serve.calls import Call
from slosched.serve.config import BackendConfig, GatewayConfig
from slosched.serve.queues import LiveSeq

_NO_DEADLINE_PRIORITY = 2**62  # vLLM priority for calls without a deadline: after every deadline
_SSE_EVENT = b"data: {"
_COMPLETION_TOKENS = re.compile(rb'"completion_tokens"\s*:\s*(\d+)')


def backend_body(call: Call, backend: BackendConfig, config: GatewayConfig, now_s: float) -> dict[str, Any]:
    """The client's body plus policy metadata: vLLM ``priority`` (when the backend runs priority
    scheduling) and ``vllm_xargs`` (deadline, budget, job, stage, predicted length) for the engine plugin."""
    body = dict(call.body)
    request = call.request
    body.setdefault("model", backend.model)
    if backend.forward_priority:
        body["priority"] = vllm_priority(request, config.priority_mode)
    if config.forward_xargs:
        given = body.get("vllm_xargs")
        xargs: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
        xargs.update(
            slosched_job_id=request.job_id,
            slosched_stage=request.stage,
            slosched_predicted_tokens=round(request.predicted_output_tokens, 1),
            slosched_priority=request.priority,
        )
        if math.isfinite(request.deadline_s):
            # Wall clock, so the engine (another process, another clock) can compare it with its own.
            xargs["slosched_deadline_unix_s"] = round(time.time() + request.deadline_s - now_s, 3)
        if request.budget_s is not None and math.isfinite(request.budget_s):
            xargs["slosched_budget_s"] = round(request.budget_s, 3)
        body["vllm_xargs"] = xargs
    return body


def vllm_priority(request: Request, mode: str) -> int:
    """Lower runs sooner in vLLM. ``deadline``: the absolute deadline in ms on the gateway clock (EDF in
    vLLM's waiting queue); ``job``: the job-level priority the job policy or header set."""
    if mode == "job":
        return round(request.priority)
    if not math.isfinite(request.deadline_s):
        return _NO_DEADLINE_PRIORITY
    return max(round(request.deadline_s * 1000.0), 0)


class TokenCounter:
    """Counts SSE data events (vLLM streams one event per generated token; the chat role event and the
    final usage event make this an estimate within ~2 tokens) into ``seq.num_output_tokens``."""

    __slots__ = ("_clock", "_tail", "seq")

    def __init__(self, seq: LiveSeq, clock: Callable[[], float]) -> None:
        self.seq = seq
        self._clock = clock
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        data = self._tail + chunk
        events = data.count(_SSE_EVENT)
        self._tail = data[-(len(_SSE_EVENT) - 1) :]  # an event marker split across two chunks
        if events:
            if self.seq.first_token_s is None:
                self.seq.first_token_s = self._clock()
            self.seq.num_output_tokens += events


async def whole_body(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    yield await response.read()


def is_broken(error: BaseException) -> bool:
    """A failure that says the server is gone (not merely slow): mark the backend down."""
    connection = isinstance(error, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError)
    return connection and not isinstance(error, aiohttp.ServerTimeoutError)


def close_response(response: aiohttp.ClientResponse, fully_read: bool) -> None:
    """Return a fully read connection to the pool; drop one cut short (its stream state is unknown)."""
    if fully_read:
        response.release()
    else:
        response.close()


def usage_tokens(body: bytes) -> int:
    """``usage.completion_tokens`` of an OpenAI response body (0 when absent). A byte search, not a JSON
    parse: the body can be large (choices, logprobs) and this runs on every non-streamed call."""
    match = _COMPLETION_TOKENS.search(body)
    return int(match.group(1)) if match else 0
