"""LENS's batch search: for batch sizes B from |running| upwards, binary-search the largest token budget S
whose predicted step time fits the target, build that batch greedily (running requests first, then
waiting ones FCFS, the last one chunked), predict it, keep the candidate closest to the target and stop
early within a tolerance.

The engine mechanism always decodes every running request, so B >= |running| and S >= the decode
cohort; what the search really chooses is how many waiting requests to admit (``max_running``) and how
many prefill tokens to spend (``token_budget``). Pure functions over ``BatchState``; O(candidates x
iterations) model evaluations, with the candidates bounded by the waiting requests that fit the token cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from slosched.perf.structural import StructuralParams

_exp = math.exp


@dataclass(slots=True)
class BatchState:
    """What the search needs of the engine. ``prefill_remaining``: tokens still to prefill of running
    requests mid-prefill (admission order); ``waiting_tokens``: uncached prompt tokens of the waiting
    requests that could join (queue order, truncated once the token cap is exceeded)."""

    num_running: int
    num_decoding: int
    decode_context_tokens: float
    max_running: int
    max_tokens: int
    prefill_remaining: list[int] = field(default_factory=list)
    prefill_context_tokens: list[int] = field(default_factory=list)
    waiting_tokens: list[int] = field(default_factory=list)
    waiting_context_tokens: list[int] = field(default_factory=list)


@dataclass(slots=True, frozen=True)
class Choice:
    """The chosen step: ``token_budget`` and ``max_running`` for the StepPlan, its predicted seconds."""

    token_budget: int
    max_running: int
    predicted_s: float
    num_admitted: int
    num_candidates: int


def step_time_s(p: StructuralParams, b: float, s: float, c: float, a: float) -> float:
    g = p.pmax * (1.0 - _exp(-p.k_b * b)) * (1.0 - _exp(-p.k_s * s))
    return p.tau0_s + (p.w0 + p.ws * s) / g + p.tau_b_s * b + p.tau_s_s * s + p.tau_c_s * c + p.tau_a_s * a


def largest_budget(
    p: StructuralParams, b: int, low: int, high: int, target_s: float, context: float, iterations: int = 10
) -> int:
    """Largest S in [low, high] with predicted T(b, S) <= target (``low`` if none fits), by at most
    ``iterations`` bisection steps (the answer is then within (high - low) / 2**iterations of exact).
    The tokens above ``low`` are costed as one prefill chunk after ``context`` prior tokens; ``target_s``
    already excludes the decode-context term, which does not depend on S. Assumes T is non-decreasing
    in S over the range (true whenever ``w0`` is small against ``ws / kS``, as fits find)."""
    if high <= low:
        return low
    # Terms that do not depend on S, hoisted: this runs inside every scheduling decision.
    pmax_b = p.pmax * (1.0 - _exp(-p.k_b * b))
    fixed = p.tau0_s + p.tau_b_s * b
    w0, ws, k_s, tau_s, tau_a = p.w0, p.ws, p.k_s, p.tau_s_s, p.tau_a_s

    def fits(s: int) -> bool:
        extra = s - low
        pairs = extra * (context + 0.5 * extra) if extra > 0 else 0.0
        g = pmax_b * (1.0 - _exp(-k_s * s))
        return fixed + (w0 + ws * s) / g + tau_s * s + tau_a * pairs <= target_s

    if fits(high):
        return high
    lo, hi = low, high  # invariant: lo is the floor or fits; hi does not fit
    for _ in range(iterations):
        if hi - lo <= 1:
            break
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def greedy_batch(state: BatchState, b: int, s: int) -> tuple[int, int, float]:
    """(admitted, tokens, prefill pairs) of the batch of at most ``b`` requests and ``s`` tokens: the
    decode cohort, then running prefills, then waiting requests FCFS (the last one chunked)."""
    tokens = state.num_decoding
    pairs = 0.0
    for remaining, ctx in zip(state.prefill_remaining, state.prefill_context_tokens, strict=True):
        chunk = min(remaining, s - tokens)
        if chunk <= 0:
            return 0, tokens, pairs
        tokens += chunk
        pairs += chunk * (ctx + 0.5 * chunk)
    admitted = 0
    slots = b - state.num_running
    for want, ctx in zip(state.waiting_tokens, state.waiting_context_tokens, strict=True):
        if admitted >= slots or tokens >= s:
            break
        chunk = min(want, s - tokens)
        tokens += chunk
        pairs += chunk * (ctx + 0.5 * chunk)
        admitted += 1
    return admitted, tokens, pairs


def search(
    p: StructuralParams,
    state: BatchState,
    target_s: float,
    tolerance: float,
    iterations: int = 10,
    budget: int | None = None,
) -> Choice:
    """The batch closest to ``target_s`` over B = |running| .. min(|running| + |waiting|, max_running).

    The model's batch-size feature counts the decode cohort plus one for the prefill work (step
    observations carry no per-prefill-request count, and the engine's per-request costs are per
    decoding sequence), so the bisection for S depends only on whether the step carries prefill: it
    runs once and each B then differs in how many waiting requests the greedy build admits.
    ``budget``: the bisection's result when the caller already has it.
    """
    floor = max(state.num_decoding, 1)
    head_context = float(
        state.prefill_context_tokens[0]
        if state.prefill_context_tokens
        else (state.waiting_context_tokens[0] if state.waiting_context_tokens else 0)
    )
    decode_context = state.decode_context_tokens
    model_b = state.num_decoding + 1
    if budget is None:
        budget = largest_budget(
            p, model_b, floor, state.max_tokens, target_s - p.tau_c_s * decode_context, head_context, iterations
        )
    last_b = max(min(state.num_running + len(state.waiting_tokens), state.max_running), state.num_running)
    best = Choice(floor, state.num_running, math.inf, 0, 0)
    best_gap = math.inf
    candidates = 0
    for b in range(state.num_running, last_b + 1):
        candidates += 1
        admitted, tokens, pairs = greedy_batch(state, b, budget)
        seqs = state.num_decoding + (1 if tokens > state.num_decoding else 0)
        predicted = step_time_s(p, max(seqs, 1), max(tokens, 1), decode_context, pairs)
        gap = abs(predicted - target_s)
        if gap < best_gap:
            best_gap = gap
            best = Choice(max(tokens, 1), state.num_running + admitted, predicted, admitted, candidates)
        # Within tolerance, or token-bound: a larger B would only admit the same requests.
        if gap <= tolerance * target_s or admitted < b - state.num_running:
            break
    return Choice(best.token_budget, best.max_running, best.predicted_s, best.num_admitted, candidates)
