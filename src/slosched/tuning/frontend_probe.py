"""How much an engine's API server slows down while it streams tokens (part of ``slosched profile``).

vLLM's OpenAI server is one process: it admits requests and turns every generated token of every stream
into a server-sent event on the same event loop (and, on a small machine, the same core as the client).
While many streams decode, admissions therefore wait their turn. The probe measures that directly: bursts
of one-token requests while ``BACKGROUND_STREAMS`` long streams decode, against the same bursts on an idle
server. Modelled as processor sharing, a front end busy a fraction ``u`` of the time with tokens stretches
an admission by ``1 / (1 - u)``; ``u = rate * token_cost`` gives the front end's cost per streamed token.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import httpx

PROBE_WIDTH = 8
BACKGROUND_STREAMS = 32
_BACKGROUND_PROMPT, _BACKGROUND_TOKENS = 64, 400


def tokens_between(times: Sequence[float], counts: Sequence[int], start: float, end: float) -> int:
    """Tokens a stream delivered in ``(start, end]`` given its chunk times and running counts."""
    before = max((c for t, c in zip(times, counts, strict=True) if t <= start), default=0)
    until = max((c for t, c in zip(times, counts, strict=True) if t <= end), default=0)
    return until - before


def token_cost_s(idle_burst_s: float, loaded_burst_s: float, tokens_per_s: float) -> float:
    """The front end's cost per streamed token from the stretch of an admission burst (module docstring)."""
    if idle_burst_s <= 0 or tokens_per_s <= 0 or loaded_burst_s <= idle_burst_s:
        return 0.0
    busy = min(1.0 - idle_burst_s / loaded_burst_s, 0.95)
    return busy / tokens_per_s


async def loaded_bursts(
    http: httpx.AsyncClient,
    one_token: Callable[[int], Awaitable[None]],
    stream: Callable[[int], Coroutine[Any, Any, Any]],
    salt: int,
    settle_s: float,
    repeats: int = 3,
) -> tuple[float, float]:
    """``(mean burst seconds, streamed tokens per second)``: ``repeats`` bursts of ``PROBE_WIDTH``
    one-token requests while ``BACKGROUND_STREAMS`` streams (``stream(salt)``, returning a trace with
    ``token_times_s`` and ``counts()``) decode; ``settle_s`` lets every stream reach its decode phase."""
    background = [asyncio.create_task(stream(salt + i)) for i in range(BACKGROUND_STREAMS)]
    salt += BACKGROUND_STREAMS
    await asyncio.sleep(settle_s)
    bursts = []
    start = time.perf_counter()
    for _ in range(repeats):
        began = time.perf_counter()
        await asyncio.gather(*(one_token(salt + i) for i in range(PROBE_WIDTH)))
        bursts.append(time.perf_counter() - began)
        salt += PROBE_WIDTH
    end = time.perf_counter()
    traces = await asyncio.gather(*background)
    tokens = sum(tokens_between(t.token_times_s, t.counts(), start, end) for t in traces)
    return statistics.mean(bursts), tokens / (end - start)


BACKGROUND_CALL = (_BACKGROUND_PROMPT, _BACKGROUND_TOKENS)
