"""NexusSched's chat workloads: ``flowgpt``, ``coding``, ``sharegpt``, ``summarization``.

Lengths are lognormal with the mean and standard deviation of ``chat_and_long_context`` in
``workloads.json``, rounded to whole tokens and clipped at the published p99 (``clip: p99``, the default;
``clip: none`` keeps the lognormal tail). Clipping at the p99 keeps the p99 exact and moves the mean and
std by under 5%. FlowGPT's published output p99 (51) is below its mean (177), which no distribution with
std 200 allows, so it is a typo: its outputs are clipped at the fitted lognormal's own p99 (~970) instead.

Parameters common to all four (all optional): ``clip``; ``max_tokens`` (2048, each request's
``max_output_tokens``; true outputs are clipped to it); ``slo_s`` (none: the scenario's SLO rule decides;
the paper's SLOs are per-token TPOT/TTFT, not end-to-end); ``ttft_slo_s`` / ``tpot_slo_s`` (none: per-token
SLOs every job carries, e.g. the paper's 2 s TTFT for summarization and 12 ms TPOT for FlowGPT);
``id_prefix`` (the generator name).

``flowgpt`` is multi-turn (see ``flowgpt``); the other three are independent single requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from slosched.core.job import CallSpec, JobSpec, single_job
from slosched.workloads._sampling import (
    build_single_jobs,
    gc_paused,
    lognormal_params,
    lognormal_quantile,
    to_tokens,
)
from slosched.workloads._validation import Params
from slosched.workloads.bundled import workload_section

CHAT_WORKLOADS = ("flowgpt", "coding", "sharegpt", "summarization")


def length_cap(stats: Mapping[str, float]) -> float:
    """Where lengths with these ``mean``/``std``/``p99`` stats are clipped: the published p99, or the
    fitted lognormal's p99 when the published one is below the mean (flowgpt's output typo)."""
    if stats["p99"] >= stats["mean"]:
        return float(stats["p99"])
    mu, sigma = lognormal_params(stats["mean"], stats["std"])
    return lognormal_quantile(mu, sigma, 0.99)


def _sample(rng: np.random.Generator, stats: Mapping[str, float], size: int, clip: bool) -> np.ndarray:
    mu, sigma = lognormal_params(stats["mean"], stats["std"])
    return to_tokens(rng.lognormal(mu, sigma, size=size), length_cap(stats) if clip else np.inf)


def chat(name: str, params: Mapping[str, Any], arrivals: np.ndarray, rng: np.random.Generator) -> list[JobSpec]:
    """Single requests of ``coding``, ``sharegpt`` or ``summarization``; job i arrives at ``arrivals[i]``."""
    reader = Params(name, params)
    clip = reader.choice("clip", "p99", ("p99", "none")) == "p99"
    max_tokens = reader.integer("max_tokens", 2048)
    slo_s = reader.optional_number("slo_s")
    token_slos = _token_slos(reader)
    id_prefix = reader.text("id_prefix", name)
    reader.finish()
    stats = workload_section("chat_and_long_context", "workloads", name)
    prompts = _sample(rng, stats["prompt"], len(arrivals), clip)
    outputs = np.minimum(_sample(rng, stats["output"], len(arrivals), clip), max_tokens)
    return _with_token_slos(
        build_single_jobs(id_prefix, arrivals, prompts, outputs, max_tokens, name, slo_s), token_slos
    )


def flowgpt(params: Mapping[str, Any], arrivals: np.ndarray, rng: np.random.Generator) -> list[JobSpec]:
    """Multi-turn chat sessions whose turns reuse the session's KV cache.

    A session has a geometric number of turns (mean ``turns_mean``, default 3). Turn 1's prompt is a
    fresh (system + user) prompt; turn k's prompt is turn k-1's prompt + its output + ``user_tokens``
    new tokens (lognormal, mean ``user_tokens_mean`` 100, CV 1), with ``prefix_key`` = ``session_id`` =
    the session id and ``prefix_tokens`` = turn k-1's prompt + output. A turn that would exceed
    ``max_input_tokens`` (default: the published prompt p99, 7014) starts a new session instead, as chat
    front ends do when a context fills, so every prompt is <= ``max_input_tokens``. Turn-1 prompts are
    lognormal with the published prompt mean/std (clipped at ``max_input_tokens``): growth and restarts
    balance, so with the defaults all prompts together have mean ~4100 (published 4089), p99 exactly 7014
    and std ~1460 (the published 2061 cannot coexist with a 7014 cap in this model); ~63% of prompt tokens
    are a cached session prefix.

    Turns of one session arrive in order, about ``think_time_s`` (default 30, exponential) apart: each
    turn gets a wanted time (session start + think times) and the wanted times, sorted, are matched to
    ``arrivals`` one for one, so the arrival process is kept exactly. Open loop: a turn may arrive before
    the previous turn finished when arrivals are dense.
    """
    reader = Params("flowgpt", params)
    clip = reader.choice("clip", "p99", ("p99", "none")) == "p99"
    max_tokens = reader.integer("max_tokens", 2048)
    slo_s = reader.optional_number("slo_s")
    token_slos = _token_slos(reader)
    id_prefix = reader.text("id_prefix", "flowgpt")
    turns_mean = reader.number("turns_mean", 3.0, minimum=1.0, strict=False)
    user_mean = reader.number("user_tokens_mean", 100.0)
    think_time_s = reader.number("think_time_s", 30.0, minimum=0.0, strict=False)
    stats = workload_section("chat_and_long_context", "workloads", "flowgpt")
    max_input = reader.integer("max_input_tokens", int(stats["prompt"]["p99"]))
    reader.finish()

    count = len(arrivals)
    turn = _turn_numbers(rng, count, turns_mean)
    order = _session_order(rng, arrivals, turn, think_time_s)
    mu, sigma = lognormal_params(stats["prompt"]["mean"], stats["prompt"]["std"])
    first = to_tokens(rng.lognormal(mu, sigma, size=count), max_input)
    user = to_tokens(rng.lognormal(*lognormal_params(user_mean, user_mean), size=count), max_input)
    outputs = np.minimum(_sample(rng, stats["output"], count, clip), max_tokens)
    calls = _session_calls(id_prefix, turn, first, user, outputs, max_input, max_tokens)
    with gc_paused():
        jobs = [
            single_job(f"{id_prefix}-{slot}", arrival, calls[flat], slo_s=slo_s, template="flowgpt")
            for slot, (arrival, flat) in enumerate(zip(arrivals.tolist(), order.tolist(), strict=True))
        ]
    return _with_token_slos(jobs, token_slos)


def _token_slos(reader: Params) -> tuple[float | None, float | None]:
    return reader.optional_number("ttft_slo_s"), reader.optional_number("tpot_slo_s")


def _with_token_slos(jobs: list[JobSpec], slos: tuple[float | None, float | None]) -> list[JobSpec]:
    """``jobs`` carrying the per-token SLOs ``(ttft_slo_s, tpot_slo_s)`` (unchanged when both are none)."""
    ttft, tpot = slos
    if ttft is None and tpot is None:
        return jobs
    with gc_paused():
        return [replace(job, ttft_slo_s=ttft, tpot_slo_s=tpot) for job in jobs]


def _turn_numbers(rng: np.random.Generator, count: int, turns_mean: float) -> np.ndarray:
    """Turn index (0-based) of each of ``count`` turns laid out session after session."""
    turns = rng.geometric(1.0 / turns_mean, size=count)
    starts = np.concatenate([[0], np.cumsum(turns)])
    starts = starts[starts < count]
    return np.arange(count) - np.repeat(starts, np.diff(np.append(starts, count)))


def _session_order(rng: np.random.Generator, arrivals: np.ndarray, turn: np.ndarray, think_time_s: float) -> np.ndarray:
    """``order[slot]`` = the turn (in session layout) that arrives at ``arrivals[slot]``."""
    count = len(turn)
    is_start = turn == 0
    gaps = np.where(is_start, 0.0, rng.exponential(think_time_s, size=count) if think_time_s > 0 else 0.0)
    elapsed = np.cumsum(gaps)
    session_of = np.cumsum(is_start) - 1
    start_index = np.flatnonzero(is_start)
    wanted = arrivals[start_index][session_of] + elapsed - elapsed[start_index][session_of]
    # Stable: equal wanted times keep layout order, so a session's turns never swap.
    return np.argsort(wanted, kind="stable")


def _session_calls(
    id_prefix: str,
    turn: np.ndarray,
    first: np.ndarray,
    user: np.ndarray,
    outputs: np.ndarray,
    max_input: int,
    max_tokens: int,
) -> list[CallSpec]:
    """One call per turn in session layout; each turn extends the previous turn's context."""
    calls: list[CallSpec] = []
    session = -1
    session_id = ""
    context = 0
    with gc_paused():
        for turn_index, first_tokens, user_tokens, output in zip(
            turn.tolist(), first.tolist(), user.tolist(), outputs.tolist(), strict=True
        ):
            if turn_index == 0 or context + user_tokens > max_input:
                session += 1
                session_id = f"{id_prefix}-s{session}"
                prompt, prefix = first_tokens, 0
            else:
                prompt, prefix = context + user_tokens, context
            calls.append(CallSpec(prompt, output, max_tokens, session_id, prefix, session_id))
            context = prompt + output
    return calls
