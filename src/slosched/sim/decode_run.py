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
    ) -> None:
        self.first_clock = first_clock
        self.start_s = start_s
        self.num_decode_seqs = num_decode_seqs
        self.context_tokens = context_tokens
        self.durations = durations
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
