"""One forwarded attempt of a call (``Attempt``) and the dispatcher's judgements of it: how long to wait for
a backend's first byte, and whether what it answered is a valid response (a 200 with a broken body is a
backend failure, never a success)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import orjson

from slosched.core.belief import StepPredictor
from slosched.core.request import Outcome
from slosched.gateway.backends.backend import Backend
from slosched.gateway.backends.forwarding import is_broken
from slosched.gateway.backends.upstream import UpstreamError, UpstreamResponse
from slosched.gateway.calls.call import Call
from slosched.gateway.dispatch.queues import InstanceQueue, LiveSeq
from slosched.gateway.ops.config import TimeoutConfig


@dataclass(slots=True)
class Attempt:
    """A forwarded call whose backend response is open; ``first_chunk`` already read."""

    backend: Backend
    queue: InstanceQueue
    seq: LiveSeq
    response: UpstreamResponse
    first_chunk: bytes
    sent_s: float
    probe: bool = False  # the half-open probe of an ejected backend (``backends/ejection.py``)

    def judge_stream(self, outcome: Outcome, reason: str) -> None:
        """A stream's verdict on its backend: broken is a failure, cancelled (client gone) none."""
        outlier = self.backend.outlier
        if outcome is Outcome.CANCELLED:
            outlier.released(self.probe)
        elif reason == "backend_stream_broken":
            outlier.failed(time.monotonic(), self.probe, "stream broken")
        else:
            outlier.succeeded(self.probe)


class RetryElsewhere(Exception):
    """This attempt failed before any byte reached the client; try another backend. ``code`` is the
    client's error code should no attempt succeed."""

    def __init__(self, message: str, code: str = "backend_failed") -> None:
        super().__init__(message)
        self.code = code


def first_byte_timeout_s(
    call: Call, num_running: int, predictor: StepPredictor, timeouts: TimeoutConfig, last_attempt: bool
) -> float:
    """``first_byte_factor`` x the predicted time to the first byte, within [``first_byte_min_s``,
    ``first_byte_s``]: a hung backend is abandoned (and the call retried elsewhere) after a few predicted
    latencies rather than after the configured worst case.

    The prediction is one prefill step in a batch of the calls already running there, plus, when the body
    comes whole (not streamed), one decode step per output token the call may produce. Without an explicit
    output limit vLLM may generate up to the model length, so such a call, and a last attempt (nowhere left
    to retry), wait the whole ``first_byte_s``."""
    cap = timeouts.first_byte_s
    if last_attempt:
        return cap
    request = call.request
    batch = max(num_running, 1)
    context = batch * request.prompt_tokens
    predicted = predictor.predict_s(request.prompt_tokens, 0, batch - 1, context)
    if not call.stream:
        body = call.body
        if body.get("max_tokens") is None and body.get("max_completion_tokens") is None:
            return cap
        predicted += request.max_output_tokens * predictor.predict_s(0, 0, batch, context)
    return min(cap, max(timeouts.first_byte_min_s, timeouts.first_byte_factor * predicted))


def is_json(body: bytes) -> bool:
    """Whether a non-streamed answer is a JSON document (orjson: microseconds on a typical body)."""
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses but JSON allows in practice (NaN, lone surrogates)
            json.loads(body)
        except (ValueError, RecursionError):
            return False
    return True


def is_event_stream(content_type: str | None) -> bool:
    """Whether a streamed answer is declared as server-sent events (vLLM's ``text/event-stream``)."""
    return content_type is not None and content_type.partition(";")[0].strip().lower() == "text/event-stream"


def stream_error(message: str) -> bytes:
    """An OpenAI-style error event (vLLM's own form) closing a stream the gateway cannot complete."""
    error = {"error": {"message": message, "type": "bad_backend_response", "code": 502}}
    return f"data: {json.dumps(error)}\n\n".encode()


def failed_attempt(
    backend: Backend, probe: bool, reason: str, error: UpstreamError | None = None, code: str = "backend_failed"
) -> RetryElsewhere:
    """Record a failed attempt on its backend (a broken connection also marks it down) and return the retry
    that sends the call elsewhere."""
    if error is not None and is_broken(error):
        backend.mark_down(f"{reason}: {error}")
    backend.outlier.failed(time.monotonic(), probe, reason)
    return RetryElsewhere(f"{backend.name}: {reason}", code)
