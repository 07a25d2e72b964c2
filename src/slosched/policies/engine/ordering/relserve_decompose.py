"""Batch decomposition for RelServe's Dynamic Priority Updater (pure functions, no engine state).

``remaining_duration_s`` predicts how long a relQuery's unfinished requests take if the engine ran them
alone: it replays, in closed form per wave, the batches RelServe's own arranger would form for them —
prefill batches while waiting requests fit (the running-request cap, the token budget, KV capacity),
then decode steps until the next running group finishes — and sums the predicted step times. Running
requests only contribute their remaining decode. Invariant: the result is >= 0 and finite.

``estimate_miss_ratio`` is the sampled prefix-cache miss ratio used to turn prompt tokens into uncached
tokens without querying the cache for every row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slosched.core.request import Request


@dataclass(slots=True, frozen=True)
class BatchLimits:
    """The engine's batch limits the decomposition respects."""

    max_batched_tokens: int
    max_running: int
    num_kv_blocks: int
    block_size: int


@dataclass(slots=True, frozen=True)
class WaitingWork:
    """``count`` requests still to prefill, each with (on average) ``uncached_tokens`` to compute,
    ``output_tokens`` to generate and ``kv_blocks`` to hold. Rows of one relQuery share a template and an
    output limit, so treating them as alike loses little and makes the estimate O(waves), not O(rows)."""

    count: int
    uncached_tokens: float
    output_tokens: int
    kv_blocks: int


@dataclass(slots=True, frozen=True)
class LineCoefficients:
    """``prefill(p) = ap * uncached + bp``; ``decode(d) = ad * requests + bd`` (seconds)."""

    ap: float
    bp: float
    ad: float
    bd: float


def remaining_duration_s(
    waiting: WaitingWork,
    running: Sequence[tuple[int, int, int]],
    limits: BatchLimits,
    lines: LineCoefficients,
) -> float:
    """Predicted seconds until the last of these requests finishes, run alone on the engine.

    ``running`` groups running requests as ``(remaining decode steps, count, KV blocks each)``. Each
    wave admits as many waiting requests as the free running slots and KV blocks allow, in prefill
    batches of at most ``max_batched_tokens`` (a request larger than that runs alone), then decodes
    until the next group finishes and frees its slots and blocks.
    """
    active = sorted(group for group in running if group[1] > 0)
    num_active = sum(count for _, count, _ in active)
    kv_used = sum(count * blocks for _, count, blocks in active)
    left = waiting.count
    uncached = waiting.uncached_tokens
    per_batch = max(1, int(limits.max_batched_tokens // uncached)) if uncached > 0 else left
    total = 0.0
    while left > 0 or active:
        if left > 0:
            kv_room = (limits.num_kv_blocks - kv_used) // max(1, waiting.kv_blocks)
            admit = min(left, limits.max_running - num_active, kv_room)
            if admit <= 0 and not active:
                admit = 1  # an oversized request on an idle engine still runs, alone
            if admit > 0:
                total += lines.ap * admit * uncached + lines.bp * -(-admit // per_batch)
                left -= admit
                # The prefill step samples the first token; the rest are decode steps.
                if waiting.output_tokens > 1:
                    active.append((waiting.output_tokens - 1, admit, waiting.kv_blocks))
                    active.sort()
                    num_active += admit
                    kv_used += admit * waiting.kv_blocks
                continue
        steps = active[0][0]
        total += steps * (lines.ad * num_active + lines.bd)
        survivors = []
        for remaining, count, blocks in active:
            if remaining > steps:
                survivors.append((remaining - steps, count, blocks))
            else:
                num_active -= count
                kv_used -= count * blocks
        active = survivors
    return total


def estimate_miss_ratio(
    requests: Sequence[Request], cached_tokens: Callable[[Request], int], block_size: int, num_samples: int
) -> float:
    """Uncached share of prompt tokens over ``num_samples`` evenly spaced requests (all when fewer).

    Systematic sampling keeps the estimate deterministic; the engine always computes a prompt's last
    token, so at most the full blocks before it can hit.
    """
    count = len(requests)
    if count == 0:
        return 1.0
    if count <= num_samples:
        picks = list(range(count))
    else:
        step = count / num_samples
        picks = [int(step * i + step / 2) for i in range(num_samples)]
    prompt = uncached = 0
    for pick in picks:
        request = requests[pick]
        limit = (request.prompt_tokens - 1) // block_size * block_size
        hit = min(cached_tokens(request), limit)
        prompt += request.prompt_tokens
        uncached += request.prompt_tokens - hit
    return uncached / prompt if prompt else 1.0


def kv_blocks(tokens: float, block_size: int) -> int:
    return max(1, -(-int(tokens + 0.999) // block_size))
