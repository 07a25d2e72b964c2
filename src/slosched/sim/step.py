"""Forms one engine step of a simulated instance from a StepPlan: the mechanism (queues, KV, preemption)
behind the policies. The instance owns one ``StepFormer``; waiting requests are ordered and admitted by
the instance's ``PolicyQueue`` (the same queue the gateway and the vLLM plugin use).

Mirrors vLLM's scheduler: running requests first (the whole decode cohort, then continuing prefill
chunks), preempting the most recently admitted request by recompute when KV runs out; then waiting
requests in policy order while the running cap, the token budget and KV allow (the queue's stop rule; a
capacity failure stops admission, an admission-policy deferral skips to the next request). Running
requests always decode together: a token budget below the number of decoding requests leaves no room for
prefill but never splits the decode batch.
"""

from __future__ import annotations

from typing import Any

from slosched.core.views import EngineView, StepMode, StepPlan
from slosched.policies.engine.queue import PolicyQueue
from slosched.sim.engine_state import EngineState
from slosched.sim.seq import Seq


class StepWork:
    """What one step computes. ``prefills`` pairs a sequence with its chunk size.

    A plain class, not a dataclass: compiled (slosched.native), a dataclass keeps the interpreted
    ``__init__`` the dataclasses module generates, several times slower than an explicit, compiled one."""

    __slots__ = (
        "decode_context_tokens",
        "num_decode_seqs",
        "num_prefill_tokens",
        "preempted",
        "prefill_context_tokens",
        "prefills",
    )

    def __init__(self) -> None:
        self.num_decode_seqs = 0
        self.decode_context_tokens = 0
        self.prefills: list[tuple[Seq, int]] = []
        self.num_prefill_tokens = 0
        self.prefill_context_tokens = 0
        self.preempted = False


class StepFormer:
    """Builds the instance's next step over its ``EngineState``; owned by one ``SimInstance``, which is also the
    ``view`` its engine policy reads while ordering and admitting.

    Invariant: between two calls of ``form`` every request is in exactly one of the queue's waiting list,
    ``state.prefilling`` (running, prefill incomplete) or the decode cohort (running), or finished.
    """

    __slots__ = ("_chunked", "_limits", "_limits_of", "_work", "queue", "state", "view")

    def __init__(self, state: EngineState, view: EngineView, queue: PolicyQueue[Seq]) -> None:
        self.state = state
        self.view = view
        self.queue = queue
        self._work = StepWork()  # the step being formed (scratch for ``_charge``)
        self._chunked = False
        self._limits_of: object = None  # the plan ``_limits`` was read from (static policies repeat one)
        self._limits = (0, 0, False)

    def _plain_limits(self, plan: StepPlan) -> tuple[int, int, bool]:
        """(token budget, running cap, chunked) of ``plan`` within the instance's limits, as plain values.

        Read through Any and converted: compiled (slosched.native), this module checks declared types
        strictly, and a plan holding numpy numbers, which the sources accept, would fail. Plans are
        frozen, so the values of the last plan are reused while a policy hands out the same one."""
        if plan is self._limits_of:
            return self._limits
        spec = self.state.spec
        shape: Any = plan
        budget = min(int(shape.token_budget), spec.max_batched_tokens)
        max_running = min(int(shape.max_running), spec.max_running)
        self._limits = (budget, max_running, bool(shape.chunked_prefill))
        self._limits_of = plan
        return self._limits

    def form(self, plan: StepPlan) -> StepWork:
        state = self.state
        work = StepWork()
        budget, max_running, chunked = self._plain_limits(plan)
        mode = plan.mode
        if mode is StepMode.PREFILL_FIRST:
            if state.prefilling:
                budget = self._schedule_prefilling(work, budget, chunked=False)
            if self.queue.waiting:
                self._admit_waiting(work, budget, max_running, chunked=False)
            if not work.prefills:
                self._schedule_cohort(work)
            return work
        if mode is not StepMode.PREFILL_ONLY:
            budget -= self._schedule_cohort(work)
        if mode is not StepMode.DECODE_ONLY:
            if state.prefilling:
                budget = self._schedule_prefilling(work, budget, chunked=chunked)
            if self.queue.waiting and not work.preempted:
                self._admit_waiting(work, budget, max_running, chunked=chunked)
        return work

    def _schedule_cohort(self, work: StepWork) -> int:
        state = self.state
        cohort = state.cohort
        if not cohort.members:
            return 0
        kv = state.kv
        needed = cohort.next_step_blocks()
        while needed > kv.num_free and cohort.members:
            state.preempt(state.last_running())
            work.preempted = True
            needed = cohort.next_step_blocks()
        if not cohort.members:
            return 0
        kv.reserve(needed)
        work.num_decode_seqs = len(cohort.members)
        work.decode_context_tokens = cohort.context_tokens
        return work.num_decode_seqs

    def _schedule_prefilling(self, work: StepWork, budget: int, chunked: bool) -> int:
        """Continue partially prefilled running requests (chunked prefill), in admission order."""
        state = self.state
        kv = state.kv
        block_size = kv.block_size
        for seq in list(state.prefilling):
            if budget <= 0:
                break
            if seq.finish_clock >= 0 or seq.order not in state.running:
                continue  # preempted by an earlier allocation in this loop
            remaining = seq.num_prompt_tokens - seq.num_computed_tokens
            tokens = min(remaining, budget) if chunked else remaining
            if tokens > budget:
                continue
            needed = -(-(seq.num_computed_tokens + tokens) // block_size) - seq.num_blocks
            scheduled = True
            while not kv.allocate(seq, needed):
                victim = state.last_running()
                state.preempt(victim)
                work.preempted = True
                if victim is seq:
                    scheduled = False
                    break
            if scheduled:
                work.prefills.append((seq, tokens))
                kv.promote_prompt_blocks(seq, seq.num_computed_tokens + tokens)
                work.num_prefill_tokens += tokens
                work.prefill_context_tokens += seq.num_computed_tokens
                budget -= tokens
        return budget

    def _admit_waiting(self, work: StepWork, budget: int, max_running: int, chunked: bool) -> None:
        state = self.state
        queue = self.queue
        queue.order(self.view)
        self._work, self._chunked = work, chunked
        admitted = queue.admission_pass(self.view, max_running - len(state.running), budget, self._charge)
        if admitted:
            queue.remove(admitted)
            state.start_running(admitted)

    def _charge(self, seq: Seq, budget: int) -> int | None:
        """Allocate KV for an admitted request and schedule its first prefill chunk; the tokens it takes from
        the budget, or None when it cannot run now (KV, or an unchunked prompt over the budget)."""
        state, work = self.state, self._work
        kv = state.kv
        block_size = kv.block_size
        prefix = seq.request.prefix
        hit_blocks = min(kv.cached_prefix_blocks(prefix), (seq.num_prompt_tokens - 1) // block_size)
        cached_tokens = hit_blocks * block_size
        tokens = seq.num_prompt_tokens - cached_tokens
        if self._chunked:
            tokens = min(tokens, budget)
        elif tokens > budget and (work.prefills or work.num_decode_seqs):
            return None  # an over-budget prompt still runs alone, so it can never hang
        needed = -(-(cached_tokens + tokens) // block_size) - hit_blocks
        if kv.admission_cost(prefix, hit_blocks, needed) > kv.num_free:
            return None
        kv.acquire_prefix(seq, hit_blocks)
        kv.allocate(seq, needed)
        seq.num_computed_tokens = cached_tokens
        state.on_admitted(seq, cached_tokens)
        work.prefills.append((seq, tokens))
        kv.promote_prompt_blocks(seq, cached_tokens + tokens)
        work.num_prefill_tokens += tokens
        work.prefill_context_tokens += cached_tokens
        return tokens
