"""A run of identical decode-only steps, advanced lazily (the simulator's fast-forward)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate

from slosched.sim.belief import BeliefFeed


class DecodeRun:
    """``durations[k]`` is step k's length; ``ends`` the absolute end times, summed one step at a time
    exactly as stepping accumulates them. ``applied`` steps have advanced the cohort; the KV of the first
    ``allocated`` steps is reserved (a step's KV is taken when it starts). Plain lists: runs are mostly a
    few steps long, where numpy's per-call overhead would dominate."""

    __slots__ = (
        "allocated",
        "applied",
        "context_tokens",
        "delivered",
        "durations",
        "ends",
        "first_clock",
        "next_end_s",
        "num_decode_seqs",
        "num_steps",
        "start_s",
    )

    def __init__(
        self,
        first_clock: int,
        num_decode_seqs: int,
        context_tokens: int,
        start_s: float,
        durations: list[float],
        ends: list[float] | None = None,
    ) -> None:
        """``ends``: the end times of ``durations`` from ``start_s`` when the caller summed them already
        (``decode_step_times``)."""
        self.first_clock = first_clock
        self.start_s = start_s
        self.num_decode_seqs = num_decode_seqs
        self.context_tokens = context_tokens
        self.durations = durations
        if ends is None:
            ends = list(accumulate(durations, initial=start_s))
            del ends[0]
        self.ends = ends
        self.num_steps = len(durations)
        self.applied = 0
        self.next_end_s = ends[0]  # end of the first step not applied yet
        self.allocated = 1
        self.delivered = 0

    @property
    def end_s(self) -> float:
        return self.ends[self.num_steps - 1]

    def cut(self, now_s: float) -> int:
        """End the run after the step in progress at ``now_s``; returns the number of steps dropped."""
        keep = bisect_right(self.ends, now_s) + 1
        if keep > self.num_steps:
            keep = self.num_steps
        dropped = self.num_steps - keep
        if dropped:
            self.num_steps = keep
            del self.durations[keep:]
            del self.ends[keep:]
        return dropped

    def steps_done(self, now_s: float) -> int:
        return bisect_right(self.ends, now_s)

    def deliver(self, until_s: float, belief: BeliefFeed) -> None:
        """Report the steps that ended before ``until_s`` to the belief feed (once each)."""
        upto = bisect_left(self.ends, until_s)
        if upto > self.delivered:
            batch = self.num_decode_seqs
            context = self.context_tokens + batch * self.delivered
            belief.record(0, 0, batch, context, self.durations[self.delivered : upto])
            self.delivered = upto


def decode_step_times(
    base_s: float, per_token_s: float, first_context: int, batch: int, factors: list[float], start_s: float
) -> tuple[list[float], list[float]]:
    """Durations and end times of ``len(factors)`` decode steps from ``start_s``, in one pass: step k reads
    ``first_context + k * batch`` tokens and lasts ``(base_s + context * per_token_s) * factors[k]`` (the
    floats ``step_time_s`` gives, times the step's noise); its end adds its duration to the previous end,
    one step at a time as stepping does. One typed loop instead of a comprehension over ``zip`` and a
    separate ``accumulate``: compiled, its float arithmetic runs unboxed and the factors are read once."""
    durations: list[float] = []
    ends: list[float] = []
    context = first_context
    end = start_s
    for factor in factors:
        duration = (base_s + context * per_token_s) * factor
        durations.append(duration)
        end += duration
        ends.append(end)
        context += batch
    return durations, ends
