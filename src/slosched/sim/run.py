"""A run of identical decode-only steps, advanced lazily (the simulator's fast-forward)."""

from __future__ import annotations

import numpy as np

from slosched.sim.belief import BeliefFeed


class DecodeRun:
    """``durations[k]`` is step k's length; ``ends`` the absolute end times (sequential sums, exactly as
    stepping would accumulate them). ``applied`` steps have advanced the cohort; the KV of the first
    ``allocated`` steps is reserved (a step's KV is taken when it starts)."""

    __slots__ = (
        "allocated", "applied", "context_tokens", "delivered", "durations", "ends", "first_clock",
        "num_decode_seqs", "num_steps",
    )

    def __init__(
        self, first_clock: int, num_decode_seqs: int, context_tokens: int, start_s: float, durations: np.ndarray
    ) -> None:
        self.first_clock = first_clock
        self.num_decode_seqs = num_decode_seqs
        self.context_tokens = context_tokens
        self.durations = durations
        self.ends = np.cumsum(np.concatenate(((start_s,), durations)))[1:]
        self.num_steps = int(durations.size)
        self.applied = 0
        self.allocated = 1
        self.delivered = 0

    @property
    def end_s(self) -> float:
        return float(self.ends[self.num_steps - 1])

    def cut(self, now_s: float) -> int:
        """End the run after the step in progress at ``now_s``; returns the number of steps dropped."""
        done = int(np.searchsorted(self.ends, now_s, side="right"))
        keep = min(done + 1, self.num_steps)
        dropped = self.num_steps - keep
        if dropped:
            self.num_steps = keep
            self.durations = self.durations[:keep]
            self.ends = self.ends[:keep]
        return dropped

    def steps_done(self, now_s: float) -> int:
        return int(np.searchsorted(self.ends, now_s, side="right"))

    def deliver(self, until_s: float, belief: BeliefFeed) -> None:
        """Report the steps that ended before ``until_s`` to the belief feed (once each)."""
        upto = int(np.searchsorted(self.ends, until_s, side="left"))
        if upto > self.delivered:
            batch = self.num_decode_seqs
            context = self.context_tokens + batch * self.delivered
            belief.record(0, 0, batch, context, self.durations[self.delivered : upto])
            self.delivered = upto
