"""The decode cohort: every running request past its prefill, advanced by one clock.

Each engine step that decodes advances all of them by one token, so their progress is stored relative
to a shared clock (``num_computed = offset + clock``) and a step costs O(1) however large the batch.
KV growth is O(1) too: a member needs a new block at clock ``k`` exactly when ``offset + k`` is a
multiple of the block size, so members are counted in ``block_size`` buckets by ``offset % block_size``.
Invariant: a member holds exactly ``ceil(num_computed / block_size)`` blocks between steps.
"""

from __future__ import annotations

import heapq

from slosched.sim.seq import Seq


class DecodeCohort:
    __slots__ = ("_buckets", "_heap", "block_size", "clock", "context_tokens", "members")

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.clock = 0
        self.members: dict[int, Seq] = {}
        self.context_tokens = 0  # sum of (num_computed + 1): the next step's decode context
        self._buckets = [0] * block_size
        self._heap: list[tuple[int, int, Seq]] = []

    def __len__(self) -> int:
        return len(self.members)

    def join(self, seq: Seq) -> None:
        """Add a request whose prefill just completed (its fields are current)."""
        clock = self.clock
        seq.computed_offset = seq.num_computed_tokens - clock
        seq.output_offset = seq.num_output_tokens - clock
        seq.finish_clock = clock + seq.true_output_tokens - seq.num_output_tokens
        self.members[seq.order] = seq
        self._buckets[seq.computed_offset % self.block_size] += 1
        self.context_tokens += seq.num_computed_tokens + 1
        heapq.heappush(self._heap, (seq.finish_clock, seq.order, seq))

    def materialize(self, seq: Seq) -> None:
        seq.num_computed_tokens = seq.computed_offset + self.clock
        seq.num_output_tokens = seq.output_offset + self.clock

    def leave(self, seq: Seq) -> None:
        """Remove a member; its fields become current and its private block count exact."""
        self.materialize(seq)
        del self.members[seq.order]
        self._buckets[seq.computed_offset % self.block_size] -= 1
        self.context_tokens -= seq.num_computed_tokens + 1
        seq.finish_clock = -1
        held = -(-seq.num_computed_tokens // self.block_size)
        seq.num_private_blocks = held - seq.num_shared_blocks - seq.num_own_cached_blocks

    def advance(self, steps: int) -> None:
        self.clock += steps
        self.context_tokens += steps * len(self.members)

    def pop_finished(self) -> list[Seq]:
        """Members whose true output is complete at the current clock (they leave the cohort)."""
        done: list[Seq] = []
        heap = self._heap
        while heap and heap[0][0] <= self.clock:
            finish_clock, _, seq = heapq.heappop(heap)
            if seq.finish_clock == finish_clock:
                self.leave(seq)
                done.append(seq)
        return done

    def steps_to_next_finish(self) -> int:
        heap = self._heap
        while heap and heap[0][2].finish_clock != heap[0][0]:
            heapq.heappop(heap)  # stale entry of a member that left early
        return heap[0][0] - self.clock if heap else 1 << 62

    def next_step_blocks(self) -> int:
        """New blocks the members need for the step starting at the current clock."""
        return self._buckets[-self.clock % self.block_size]

    def blocks_needed(self, first_clock: int, num_steps: int) -> int:
        """New blocks the members need for the steps starting at clocks first_clock .. +num_steps-1."""
        if num_steps <= 0:
            return 0
        block_size = self.block_size
        full, rest = divmod(num_steps, block_size)
        total = full * len(self.members)  # every member crosses one block boundary per period
        if rest:
            # Clocks start .. start+rest-1 read buckets top = -start % block_size, top-1, ... (wrapping): at
            # most two slices summed in C instead of a loop of up to block_size steps.
            buckets = self._buckets
            top = -(first_clock + full * block_size) % block_size
            low = top - rest + 1
            if low >= 0:
                total += sum(buckets[low : top + 1])
            else:
                total += sum(buckets[: top + 1]) + sum(buckets[block_size + low :])
        return total

    def max_steps_within(self, free_blocks: int, max_steps: int) -> int:
        """Longest run (<= max_steps) whose steps after the first (already allocated) fit in free_blocks."""
        following = self.clock + 1
        if self.blocks_needed(following, max_steps - 1) <= free_blocks:
            return max_steps
        low, high = 1, max_steps - 1
        while low < high:
            middle = (low + high + 1) // 2
            if self.blocks_needed(following, middle - 1) <= free_blocks:
                low = middle
            else:
                high = middle - 1
        return low
