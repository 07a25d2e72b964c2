"""The profiling sweep behind ``slosched profile URL``: measure a live OpenAI-compatible engine, fit a step model.

Design: every (prompt length L, concurrency k, output length O) point sends one *wave* of k identical
requests at once (``ignore_eos``, ``max_tokens`` = O, so each generates exactly O tokens), ``repeats``
times, waves strictly one after another (the engine is idle when a wave starts). Each request's streamed
token arrival times are recorded on the client's monotonic clock. A wave becomes step observations:

* front end: before the waves, bursts of 1, 8 and 32 one-token requests measure the API server's serial
  cost per request (the slope of burst time over width; ``request_overhead_s``). The server admits
  requests one after another, so the k requests of a wave reach the engine spread over k such costs;
* prefill: only single-request waves (k = 1) give one: the TTFT minus the front-end cost, i.e. a prefill
  step of L tokens plus the request's constant latency (HTTP, hand-offs to and from the engine), which
  the fit separates (``fit_profile(prefill_rows_are_ttfts=True)``); the TTFT of a wider wave spans
  several engine steps (see above);
* decode: from the moment every request of the wave has its first token to the moment the first one
  finishes, each step decodes all k sequences; the wave's mean decode step is tokens over time inside
  that window (per-chunk token
  counts from ``continuous_usage_stats``, since a chunk may pack several tokens), the median over the
  wave's requests (it drops one stream's stalls), recorded at the run's mean context (a decode step is
  linear in its context, so the mean step is the step at the mean context). Token-by-token gaps are not
  used: the API server delivers tokens in bursts when it falls behind.

Policies never see this module; it only measures. Optionally reads the engine's ``/metrics``
(``vllm:cache_config_info``) for the KV capacity, so the simulator knows how many blocks the engine has.
"""

from __future__ import annotations

import asyncio
import math
import re
import secrets
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.views import StepObservation
from slosched.perf.profile_fit import MeasuredProfile, fit_profile
from slosched.tuning import frontend_probe
from slosched.tuning.frontend_probe import tokens_between
from slosched.tuning.openai_client import EndpointError, OpenAIClient, aiter_stream_events
from slosched.tuning.saber_profile import ProfileCall
from slosched.workloads.prompts import prompt_ids


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
    """One streamed request: send time, the arrival time of every chunk that carried tokens, and the number
    of tokens generated so far at each (engines pack several tokens into one chunk when the API server
    falls behind; ``None`` means one token per chunk)."""

    start_s: float
    token_times_s: tuple[float, ...]
    token_counts: tuple[int, ...] | None = None

    def counts(self) -> tuple[int, ...]:
        return self.token_counts or tuple(range(1, len(self.token_times_s) + 1))


def wave_observations(
    prompt_tokens: int,
    traces: Sequence[RequestTrace],
    max_batched_tokens: int = 8192,
    request_overhead_s: float = 0.0,
) -> list[StepObservation]:
    """Step observations of one wave of ``len(traces)`` simultaneous identical requests (module docstring)."""
    k = len(traces)
    if k == 0 or any(not trace.token_times_s for trace in traces):
        raise EndpointError("a profiling request streamed no tokens")
    observations: list[StepObservation] = []
    if k == 1 and prompt_tokens <= max_batched_tokens:
        ttft = traces[0].token_times_s[0] - traces[0].start_s - request_overhead_s
        if ttft > 0:
            observations.append(StepObservation(prompt_tokens, 0, 0, 0, (ttft,)))
    decode = _decode_observation(prompt_tokens, traces)
    if decode is not None:
        observations.append(decode)
    return observations


def _decode_observation(prompt_tokens: int, traces: Sequence[RequestTrace]) -> StepObservation | None:
    """The wave's mean decode step while every request decodes: from the moment the last request got its
    first token (all prefills done) to the moment the first request finished, every step emits one token
    per request, so the step lasts ``window * k / tokens`` with ``tokens`` counted over all streams in the
    window (aggregating streams cancels one stream's burst reads). A decode step is linear in its context,
    so the mean step is the step at the window's mean context, which the observation records. None when
    the window saw fewer than two tokens per request."""
    settled = max(trace.token_times_s[0] for trace in traces)
    first = min(traces, key=lambda trace: trace.token_times_s[-1])
    first_done = first.token_times_s[-1]
    k = len(traces)
    own = tokens_between(first.token_times_s, first.counts(), settled, first_done)
    if first_done <= settled or own < 2:
        return None
    # Tokens of one step reach the streams at slightly different moments: count each stream's tokens up
    # to half a step past the window's ends so a step is counted whole or not at all.
    slack = (first_done - settled) / own / 2
    tokens = sum(tokens_between(t.token_times_s, t.counts(), settled + slack, first_done + slack) for t in traces)
    if tokens < 2 * k:
        return None
    middle = (settled + first_done) / 2
    count = statistics.median(tokens_between(t.token_times_s, t.counts(), -math.inf, middle) for t in traces)
    # The step producing the c-th token reads a KV of prompt + c - 2 tokens per sequence.
    context = round(k * (prompt_tokens + count - 1.5))
    return StepObservation(0, 0, k, context, ((first_done - settled) * k / tokens,))


async def _stream_tokens(http: httpx.AsyncClient, client: OpenAIClient, call: ProfileCall, salt: int) -> RequestTrace:
    """``_stream_once``, sent again once if the connection failed before any answer (a keep-alive
    connection the server closed while it sat idle in the pool)."""
    try:
        return await _stream_once(http, client, call, salt)
    except (httpx.ReadError, httpx.RemoteProtocolError, httpx.ConnectError):
        return await _stream_once(http, client, call, salt)


async def _stream_once(http: httpx.AsyncClient, client: OpenAIClient, call: ProfileCall, salt: int) -> RequestTrace:
    """One streamed completion with per-chunk usage (``continuous_usage_stats``: the token count at every
    chunk, exact even when a chunk packs several tokens). The prompt is ``call.input_tokens`` token ids
    unique to ``salt``: exact length, no prefix-cache hits."""
    times: list[float] = []
    counts: list[int] = []
    body = {
        **client.request_body(call),
        "prompt": prompt_ids(call.input_tokens, salt),
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    start = time.perf_counter()
    async with http.stream("POST", "/v1/completions", json=body) as response:
        if response.status_code != 200:
            text = (await response.aread()).decode(errors="replace")[:300]
            raise EndpointError(f"{client.base_url}/v1/completions answered {response.status_code}: {text}")
        async for event in aiter_stream_events(response):
            count = _chunk_token_count(event, counts[-1] if counts else 0)
            if count is not None and count > (counts[-1] if counts else 0):
                times.append(time.perf_counter())
                counts.append(count)
    return RequestTrace(start, tuple(times), tuple(counts))


def _chunk_token_count(event: dict[str, Any], previous: int) -> int | None:
    """Tokens generated so far after this event: its usage count, else one more per chunk with choices."""
    usage = event.get("usage")
    if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
        return int(usage["completion_tokens"])
    return previous + 1 if event.get("choices") else None


ADMISSION_WIDTHS = (1, 8, 32)


async def _one_token(http: httpx.AsyncClient, client: OpenAIClient, salt: int) -> None:
    body = {"model": client.model, "prompt": prompt_ids(1, salt), "max_tokens": 1, "ignore_eos": True}
    response = await http.post("/v1/completions", json=body)
    if response.status_code != 200:
        raise EndpointError(f"{client.base_url}/v1/completions answered {response.status_code}: {response.text[:300]}")


async def admission_samples(
    http: httpx.AsyncClient, client: OpenAIClient, salt: int, repeats: int = 3
) -> list[tuple[int, float]]:
    """``(k, seconds)``: k one-token requests with one-token prompts sent at once, until the last answer.
    The engine work hardly grows with k, so the growth is the server front end's serial cost per request."""
    samples = []
    for _ in range(repeats):
        for width in ADMISSION_WIDTHS:
            start = time.perf_counter()
            await asyncio.gather(*(_one_token(http, client, salt + i) for i in range(width)))
            samples.append((width, time.perf_counter() - start))
            salt += width
    return samples


def fit_request_overhead_s(samples: Sequence[tuple[int, float]]) -> float:
    """The front end's cost per request: the least-squares slope of burst time over burst width (>= 0)."""
    widths = np.array([k for k, _ in samples], dtype=np.float64)
    if len(samples) < 2 or np.ptp(widths) == 0:
        return 0.0
    slope = float(np.polyfit(widths, np.array([t for _, t in samples]), 1)[0])
    return max(0.0, slope)


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


async def _warm_up(http: httpx.AsyncClient, client: OpenAIClient, design: SweepDesign, salt: int) -> None:
    """One untimed pass over the sweep's extremes: a fresh server runs its first steps of each new shape
    (longest prompt, widest batch) several times slower, which would land in the fit as outliers."""
    widest = max(design.concurrencies)
    for length in design.prompt_lengths:
        await _stream_tokens(http, client, ProfileCall(length, 4), salt)
        salt += 1
    call = ProfileCall(min(design.prompt_lengths), 16)
    await asyncio.gather(*(_stream_tokens(http, client, call, salt + i) for i in range(widest)))


async def _token_cost(
    http: httpx.AsyncClient, client: OpenAIClient, salt: int, idle: Sequence[tuple[int, float]], overhead: float
) -> float:
    """The front end's cost per streamed token (``tuning.frontend_probe``), against idle bursts of the same width."""
    idle_bursts = [seconds for width, seconds in idle if width == frontend_probe.PROBE_WIDTH]
    if not idle_bursts:
        return 0.0
    prompt, tokens = frontend_probe.BACKGROUND_CALL
    call = ProfileCall(prompt, tokens)
    loaded, rate = await frontend_probe.loaded_bursts(
        http,
        lambda i: _one_token(http, client, i),
        lambda i: _stream_tokens(http, client, call, i),
        salt,
        settle_s=0.5 + frontend_probe.BACKGROUND_STREAMS * overhead,
    )
    return frontend_probe.token_cost_s(statistics.mean(idle_bursts), loaded, rate)


@dataclass(slots=True, frozen=True)
class SweepResult:
    """What a sweep measured: step observations, the KV capacity ``(blocks, block size)`` if the engine
    exposes it, the front end's serial cost per request and its cost per streamed token (seconds)."""

    observations: list[StepObservation]
    capacity: tuple[int | None, int | None]
    request_overhead_s: float
    token_overhead_s: float = 0.0


async def run_sweep(
    client: OpenAIClient, design: SweepDesign, on_point: Callable[[int, int, int], None] | None = None
) -> SweepResult:
    """Measure the front end's per-request cost, then run every wave of ``design`` in order."""
    headers = {"Authorization": f"Bearer {client.api_key}"} if client.api_key else {}
    widest = max(design.concurrencies)
    limits = httpx.Limits(max_connections=widest + 1, max_keepalive_connections=widest + 1)
    observations: list[StepObservation] = []
    async with httpx.AsyncClient(
        base_url=client.base_url.rstrip("/"), headers=headers, timeout=client.timeout_s, limits=limits
    ) as http:
        capacity = await _read_kv_capacity(http)
        salt = secrets.randbits(40) << 20  # a fresh id space: nothing an earlier sweep cached is hit
        await _warm_up(http, client, design, salt - (1 << 18))
        samples = await admission_samples(http, client, salt)
        overhead = fit_request_overhead_s(samples)
        token_cost = await _token_cost(http, client, salt + (1 << 16), samples, overhead)
        salt += 1 << 17
        for prompt, k, out in design.points():
            if on_point is not None:
                on_point(prompt, k, out)
            call = ProfileCall(prompt, out)
            traces = await asyncio.gather(*(_stream_tokens(http, client, call, salt + i) for i in range(k)))
            salt += k
            observations.extend(wave_observations(prompt, traces, design.max_batched_tokens, overhead))
    return SweepResult(observations, capacity, overhead, token_cost)


def profile_endpoint(
    client: OpenAIClient,
    design: SweepDesign,
    on_point: Callable[[int, int, int], None] | None = None,
) -> MeasuredProfile:
    """Sweep the endpoint and fit a :class:`MeasuredProfile` (the engine must be otherwise idle)."""
    return fit_sweeps([asyncio.run(run_sweep(client, design, on_point))], client, design)


def fit_sweeps(sweeps: Sequence[SweepResult], client: OpenAIClient, design: SweepDesign) -> MeasuredProfile:
    """One :class:`MeasuredProfile` from every step observation of ``sweeps`` (several sweeps of the same
    engine, e.g. taken at different moments so that the fit averages over the machine's speed), with the
    front end's costs their median over the sweeps."""
    if not sweeps:
        raise ConfigError("sweeps", "need at least one sweep to fit")
    blocks, block_size = next((sweep.capacity for sweep in sweeps if sweep.capacity[0] is not None), (None, None))
    source = {
        "base_url": client.base_url,
        "model": client.model,
        "prompt_lengths": list(design.prompt_lengths),
        "concurrencies": list(design.concurrencies),
        "output_lengths": list(design.output_lengths),
        "repeats": design.repeats,
        "sweeps": len(sweeps),
    }
    observations = [observation for sweep in sweeps for observation in sweep.observations]
    profile = fit_profile(
        observations, num_gpu_blocks=blocks, block_size=block_size, source=source, prefill_rows_are_ttfts=True
    )
    profile.request_overhead_s = statistics.median(sweep.request_overhead_s for sweep in sweeps)
    profile.token_overhead_s = statistics.median(sweep.token_overhead_s for sweep in sweeps)
    return profile
