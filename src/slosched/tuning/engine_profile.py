"""The profiling sweep behind ``slosched profile URL``: measure a live OpenAI-compatible engine, fit a step model.

Design: every (prompt length L, concurrency k, output length O) point sends one *wave* of k identical
requests at once (``ignore_eos``, ``max_tokens`` = O, so each generates exactly O tokens), ``repeats``
times, waves strictly one after another (the engine is idle when a wave starts). Each request's streamed
token arrival times are recorded on the client's monotonic clock. A wave becomes step observations:

* prefill: the whole wave is one prefill step of ``k * L`` tokens (vLLM batches simultaneous prompts up to
  ``max_batched_tokens``; larger waves are chunked over several steps, so their TTFT is not used); its
  duration is the last first-token time minus the first send time (includes one HTTP round trip, which
  the fitted fixed term absorbs);
* decode: the step emitting token i (i >= 1) runs k sequences whose KV holds ``L + i - 1`` tokens each; its
  duration is the median over the wave's requests of the gap between tokens i-1 and i (the median drops
  one-off stalls of a single stream).

Policies never see this module; it only measures. Optionally reads the engine's ``/metrics``
(``vllm:cache_config_info``) for the KV capacity, so the simulator knows how many blocks the engine has.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from slosched.core.errors import ConfigError
from slosched.core.views import StepObservation
from slosched.perf.profile_fit import MeasuredProfile, fit_profile
from slosched.tuning.openai_client import EndpointError, OpenAIClient, _read_event, _Stream
from slosched.tuning.saber_profile import ProfileCall


@dataclass(slots=True, frozen=True)
class SweepDesign:
    """The measured grid. Invariant (checked): all values >= 1, output lengths >= 2 (a decode step)."""

    prompt_lengths: tuple[int, ...] = (128, 512, 2048)
    concurrencies: tuple[int, ...] = (1, 4, 16)
    output_lengths: tuple[int, ...] = (64,)
    repeats: int = 1
    max_batched_tokens: int = 8192

    def __post_init__(self) -> None:
        for name in ("prompt_lengths", "concurrencies", "output_lengths"):
            values = getattr(self, name)
            if not values or min(values) < 1:
                raise ConfigError(name, f"need at least one value, all >= 1, got {values}")
        if min(self.output_lengths) < 2:
            raise ConfigError("output_lengths", "each must be >= 2 (one prefill token, then decode steps)")
        if self.repeats < 1 or self.max_batched_tokens < 1:
            raise ConfigError("repeats/max_batched_tokens", "must be >= 1")

    def points(self) -> list[tuple[int, int, int]]:
        """(prompt, concurrency, output) in a fixed order (deterministic sweep)."""
        return [
            (length, k, out)
            for length in self.prompt_lengths
            for k in self.concurrencies
            for out in self.output_lengths
            for _ in range(self.repeats)
        ]


@dataclass(slots=True, frozen=True)
class RequestTrace:
    """One streamed request: send time and the arrival time of every generated token (one clock)."""

    start_s: float
    token_times_s: tuple[float, ...]


def wave_observations(
    prompt_tokens: int, traces: Sequence[RequestTrace], max_batched_tokens: int = 8192
) -> list[StepObservation]:
    """Step observations of one wave of ``len(traces)`` simultaneous identical requests (module docstring)."""
    k = len(traces)
    if k == 0 or any(not trace.token_times_s for trace in traces):
        raise EndpointError("a profiling request streamed no tokens")
    observations: list[StepObservation] = []
    if k * prompt_tokens <= max_batched_tokens:
        ttft = max(t.token_times_s[0] for t in traces) - min(t.start_s for t in traces)
        observations.append(StepObservation(k * prompt_tokens, 0, 0, 0, (ttft,)))
    steps = min(len(trace.token_times_s) for trace in traces) - 1
    gaps = [
        statistics.median(trace.token_times_s[i] - trace.token_times_s[i - 1] for trace in traces)
        for i in range(1, steps + 1)
    ]
    if gaps:
        observations.append(StepObservation(0, 0, k, k * prompt_tokens, tuple(gaps)))
    return observations


async def _stream_tokens(http: httpx.AsyncClient, client: OpenAIClient, call: ProfileCall) -> RequestTrace:
    """One streamed completion; a token's time is when its chunk arrived (vLLM sends one token a chunk)."""
    stream = _Stream()
    times: list[float] = []
    start = time.perf_counter()
    async with http.stream("POST", "/v1/completions", json=client.request_body(call)) as response:
        if response.status_code != 200:
            body = (await response.aread()).decode(errors="replace")[:300]
            raise EndpointError(f"{client.base_url}/v1/completions answered {response.status_code}: {body}")
        async for line in response.aiter_lines():
            before = stream.chunks
            if _read_event(line, stream):
                break
            if stream.chunks > before:
                times.append(time.perf_counter())
    return RequestTrace(start, tuple(times))


async def _read_kv_capacity(http: httpx.AsyncClient) -> tuple[int | None, int | None]:
    """``(num_gpu_blocks, block_size)`` from vLLM's ``cache_config_info`` gauge labels, if exposed."""
    try:
        response = await http.get("/metrics")
    except httpx.HTTPError:
        return None, None
    if response.status_code != 200:
        return None, None
    for line in response.text.splitlines():
        if line.startswith("vllm:cache_config_info{"):
            blocks = re.search(r'num_gpu_blocks="(\d+)"', line)
            size = re.search(r'block_size="(\d+)"', line)
            if blocks and size:
                return int(blocks.group(1)), int(size.group(1))
    return None, None


async def run_sweep(
    client: OpenAIClient, design: SweepDesign, on_point: Callable[[int, int, int], None] | None = None
) -> tuple[list[StepObservation], tuple[int | None, int | None]]:
    """Run every wave of ``design`` in order; returns the step observations and the KV capacity."""
    headers = {"Authorization": f"Bearer {client.api_key}"} if client.api_key else {}
    widest = max(design.concurrencies)
    limits = httpx.Limits(max_connections=widest + 1, max_keepalive_connections=widest + 1)
    observations: list[StepObservation] = []
    async with httpx.AsyncClient(
        base_url=client.base_url.rstrip("/"), headers=headers, timeout=client.timeout_s, limits=limits
    ) as http:
        capacity = await _read_kv_capacity(http)
        for prompt, k, out in design.points():
            if on_point is not None:
                on_point(prompt, k, out)
            call = ProfileCall(prompt, out)
            traces = await asyncio.gather(*(_stream_tokens(http, client, call) for _ in range(k)))
            observations.extend(wave_observations(prompt, traces, design.max_batched_tokens))
    return observations, capacity


def profile_endpoint(
    client: OpenAIClient,
    design: SweepDesign,
    on_point: Callable[[int, int, int], None] | None = None,
) -> MeasuredProfile:
    """Sweep the endpoint and fit a :class:`MeasuredProfile` (the engine must be otherwise idle)."""
    observations, (blocks, block_size) = asyncio.run(run_sweep(client, design, on_point))
    source = {
        "base_url": client.base_url,
        "model": client.model,
        "prompt_lengths": list(design.prompt_lengths),
        "concurrencies": list(design.concurrencies),
        "output_lengths": list(design.output_lengths),
        "repeats": design.repeats,
    }
    return fit_profile(observations, num_gpu_blocks=blocks, block_size=block_size, source=source)
