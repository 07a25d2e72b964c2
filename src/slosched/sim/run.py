"""A run of identical decode-only steps, advanced lazily (the simulator's fast-forward)."""

from __future__ import annotations

import numpy as np

from slosched.sim.belief import BeliefFeed
from slosched.sim.kv import KVCache
from slosched.sim.seq import Seq


class DecodeRun:
    """``durations[k]`` is step k's length; ``ends`` the absolute end times (sequential sums, exactly as
    stepping would accumulate them). ``applied`` steps have been written into the sequences."""

    __slots__ = ("applied", "context_tokens", "delivered", "durations", "ends", "num_steps", "seqs")

    def __init__(self, seqs: list[Seq], start_s: float, durations: np.ndarray, context_tokens: int) -> None:
        self.seqs = seqs
        self.durations = durations
        self.ends = np.cumsum(np.concatenate(((start_s,), durations)))[1:]
        self.num_steps = int(durations.size)
        self.context_tokens = context_tokens
        self.applied = 0
        self.delivered = 0

    @property
    def end_s(self) -> float:
        return float(self.ends[self.num_steps - 1])

    def cut(self, now_s: float) -> int:
        """End the run after the step in progress at ``now_s``; returns the number of steps dropped."""
        done = int(np.searchsorted(self.ends[: self.num_steps], now_s, side="right"))
        keep = min(done + 1, self.num_steps)
        dropped = self.num_steps - keep
        if dropped:
            self.num_steps = keep
            self.durations = self.durations[:keep]
            self.ends = self.ends[:keep]
        return dropped

    def advance(self, now_s: float, kv: KVCache) -> int:
        """Apply the steps finished by ``now_s`` and allocate KV for the one in progress; returns the
        number of steps newly applied."""
        done = int(np.searchsorted(self.ends, now_s, side="right"))
        delta = done - self.applied
        if delta > 0:
            for seq in self.seqs:
                seq.num_computed_tokens += delta
                seq.num_output_tokens += delta
            self.applied = done
        # Hold exactly the blocks stepping would hold now: those of the applied steps, plus the step in
        # progress (its KV is allocated when it starts).
        in_progress = 1 if done < self.num_steps else 0
        block_size = kv.block_size
        for seq in self.seqs:
            needed = -(-(seq.num_computed_tokens + in_progress) // block_size) - seq.num_blocks
            if needed > 0 and not kv.allocate(seq, needed):
                raise AssertionError("decode run outgrew the KV capacity it was sized for")
        return delta

    def deliver(self, until_s: float, belief: BeliefFeed) -> None:
        """Report the steps that ended before ``until_s`` to the belief feed (once each)."""
        upto = int(np.searchsorted(self.ends, until_s, side="left"))
        if upto > self.delivered:
            batch = len(self.seqs)
            context = self.context_tokens + batch * self.delivered
            belief.record(0, 0, batch, context, self.durations[self.delivered : upto])
            self.delivered = upto

    @staticmethod
    def kv_limited_length(seqs: list[Seq], kv: KVCache, length: int) -> int:
        """Longest run (<= length) whose KV growth fits the free blocks; step 1 is already allocated."""
        block_size = kv.block_size
        free = kv.num_free
        if len(seqs) * ((length + block_size - 1) // block_size + 1) <= free:
            return length

        def extra_blocks(steps: int) -> int:
            return sum(-(-(seq.num_computed_tokens + steps) // block_size) - seq.num_blocks for seq in seqs)

        low, high = 1, length
        while low < high:
            middle = (low + high + 1) // 2
            if extra_blocks(middle) <= free:
                low = middle
            else:
                high = middle - 1
        return low
