"""The access log: one JSON line per finished call, on the ``slosched.gateway.access`` logger.

Every call the gateway accepts ends in exactly one terminal outcome (``Dispatcher.finish``), so the log has
exactly one line per accepted call, whatever happened to it: completed, failed, rejected or cancelled (its
client left). Fields: ``ts`` (Unix time of the finish), ``request_id`` (the id the client saw), ``job_id``,
``tenant``, ``path``, ``model`` (the serving backend's, else the one asked for), ``backend``, ``outcome``,
``reason``, ``stream``, ``attempts``, ``prompt_tokens`` (the gateway's estimate for text prompts),
``output_tokens``, ``latency_s`` (arrival to finish), ``ttft_s`` (arrival to first token; null without one),
and ``deadline_met`` (null for a call without a deadline; a call that did not complete missed it).

``access_log: true`` in the gateway config writes the lines to stdout; off, nothing is formatted (a level check
per call). An operator's own logging configuration may route the logger anywhere else.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from typing import IO, Any

import orjson

from slosched.core.request import Outcome
from slosched.gateway.calls.call import Call

ACCESS_LOGGER = logging.getLogger("slosched.gateway.access")
_HANDLER_NAME = "slosched-access-stdout"


def enable_access_log(enabled: bool, stream: IO[str] | None = None) -> None:
    """Write the access lines to ``stream`` (stdout by default) or stop: the handler is attached once, so
    a config reload can turn the log on and off."""
    ours = [handler for handler in ACCESS_LOGGER.handlers if handler.get_name() == _HANDLER_NAME]
    for handler in ours:
        ACCESS_LOGGER.removeHandler(handler)
    if not enabled:  # back to the logging configuration's own say (a WARNING root: no line is even built)
        ACCESS_LOGGER.setLevel(logging.NOTSET)
        ACCESS_LOGGER.propagate = True
        return
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter("%(message)s"))
    ACCESS_LOGGER.addHandler(handler)
    ACCESS_LOGGER.setLevel(logging.INFO)
    ACCESS_LOGGER.propagate = False  # the line is the record: no second copy through the root logger


def log_finished(call: Call, outcome: Outcome, model: str | None, now: float) -> None:
    """The call's access line, when the logger takes INFO (nothing is built otherwise)."""
    if ACCESS_LOGGER.isEnabledFor(logging.INFO):
        ACCESS_LOGGER.info(orjson.dumps(access_record(call, outcome, model, now)).decode())


def access_record(call: Call, outcome: Outcome, model: str | None, now: float) -> dict[str, Any]:
    request = call.request
    deadline_met = None
    if math.isfinite(request.deadline_s):
        deadline_met = outcome is Outcome.COMPLETED and now <= request.deadline_s
    return {
        "ts": round(time.time(), 6),
        "request_id": call.request_id,
        "job_id": request.job_id,
        "tenant": request.tenant,
        "path": call.path,
        "model": model if model is not None else call.model,
        "backend": call.backend,
        "outcome": outcome.value,
        "reason": call.reason,
        "stream": call.stream,
        "attempts": call.attempts,
        "prompt_tokens": request.prompt_tokens,
        "output_tokens": call.output_tokens,
        "latency_s": round(now - request.arrival_s, 6),
        "ttft_s": None if call.first_token_s is None else round(call.first_token_s - request.arrival_s, 6),
        "deadline_met": deadline_met,
    }
