"""A :class:`~slosched.tuning.saber_profile.ProfileClient` for a live OpenAI-compatible endpoint (vLLM).

Each call is one streamed ``POST {base_url}/v1/completions`` with ``max_tokens`` = the call's output
tokens and ``ignore_eos`` (a vLLM extension other servers ignore) so the server generates exactly that
many; the prompt is ``input_tokens`` repetitions of a one-token word. A call's timing is taken on the
client's monotonic clock: sent, first streamed text, last chunk. Output tokens are the server's
``usage.completion_tokens`` when it streams usage, otherwise the number of text chunks (vLLM streams
one token per chunk). At most ``concurrency`` calls are in flight (an asyncio semaphore), which is the
closed loop the profiler wants. The gateway will reuse this client for its backends' profiles.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from slosched.client.sse import StreamError, aiter_openai
from slosched.core.errors import ConfigError, SloschedError
from slosched.tuning.saber_profile import CallTiming, ProfileCall


class EndpointError(SloschedError):
    """The endpoint answered with an error or a malformed stream."""


@dataclass(slots=True)
class _Stream:
    first_token_s: float | None = None
    chunks: int = 0
    usage_tokens: int | None = None


@dataclass(slots=True)
class OpenAIClient:
    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 600.0
    prompt_word: str = " hello"
    extra_body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError("base_url", f"expected http(s)://host[:port], got {self.base_url!r}")

    def run_closed_loop(self, calls: Sequence[ProfileCall], concurrency: int) -> list[CallTiming]:
        if concurrency < 1:
            raise ConfigError("concurrency", f"must be >= 1, got {concurrency}")
        return asyncio.run(self._run_all(calls, concurrency))

    async def _run_all(self, calls: Sequence[ProfileCall], concurrency: int) -> list[CallTiming]:
        gate = asyncio.Semaphore(concurrency)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(
            base_url=self.base_url.rstrip("/"), headers=headers, timeout=self.timeout_s, limits=limits
        ) as client:

            async def one(call: ProfileCall) -> CallTiming:
                async with gate:
                    return await self._complete(client, call)

            return list(await asyncio.gather(*(one(call) for call in calls)))

    def request_body(self, call: ProfileCall) -> dict[str, Any]:
        return {
            "model": self.model,
            "prompt": self.prompt_word * max(call.input_tokens, 1),
            "max_tokens": call.output_tokens,
            "stream": True,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
            **self.extra_body,
        }

    async def _complete(self, client: httpx.AsyncClient, call: ProfileCall) -> CallTiming:
        stream = _Stream()
        start = time.perf_counter()
        async with client.stream("POST", "/v1/completions", json=self.request_body(call)) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode(errors="replace")[:300]
                raise EndpointError(f"{self.base_url}/v1/completions answered {response.status_code}: {body}")
            async for event in aiter_stream_events(response):
                _read_event(event, stream)
        finish = time.perf_counter()
        tokens = stream.usage_tokens if stream.usage_tokens is not None else stream.chunks
        first = stream.first_token_s if stream.first_token_s is not None else finish
        return CallTiming(start, first, finish, tokens)


async def aiter_stream_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON events of an OpenAI stream up to ``[DONE]``, through the SDK's stream reader
    (``client/sse.py`` on httpx-sse: events end at blank lines only, never at U+2028 inside a model's text);
    a malformed or error event raises ``EndpointError``."""
    try:
        async for event in aiter_openai(response):
            yield event
    except StreamError as error:
        raise EndpointError(f"stream error: {error.error}") from None


def _read_event(event: dict[str, Any], stream: _Stream) -> None:
    """Fold one stream event into ``stream``."""
    usage = event.get("usage")
    if usage and usage.get("completion_tokens") is not None:
        stream.usage_tokens = int(usage["completion_tokens"])
    if any(choice.get("text") for choice in event.get("choices") or ()):
        if stream.first_token_s is None:
            stream.first_token_s = time.perf_counter()
        stream.chunks += 1
