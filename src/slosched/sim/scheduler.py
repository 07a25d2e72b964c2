"""Forms one engine step from a StepPlan: the mechanism (queues, KV, preemption) behind the policies.

Mirrors vLLM's scheduler: running requests first (decode tokens, continuing prefill chunks), preempting
the most recently admitted request by recompute when KV runs out; then waiting requests in policy order
while the running cap, the token budget and KV allow. A capacity failure stops admission (strict order);
an admission-policy deferral skips to the next request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from slosched.core.views import StepMode, StepPlan
from slosched.sim.seq import Seq

if TYPE_CHECKING:
    from slosched.sim.instance import SimInstance


@dataclass(slots=True)
class StepWork:
    """What one step computes. ``prefills`` pairs a sequence with its chunk size."""

    decodes: list[Seq] = field(default_factory=list)
    prefills: list[tuple[Seq, int]] = field(default_factory=list)
    num_prefill_tokens: int = 0
    prefill_context_tokens: int = 0
    decode_context_tokens: int = 0
    preempted: bool = False

    @property
    def empty(self) -> bool:
        return not self.decodes and not self.prefills


def form_step(instance: SimInstance, plan: StepPlan) -> StepWork:
    work = StepWork()
    budget = min(plan.token_budget, instance.spec.max_batched_tokens)
    max_running = min(plan.max_running, instance.spec.max_running)
    if plan.mode is StepMode.PREFILL_FIRST:
        _admit_waiting(instance, work, budget, max_running, chunked=False)
        if work.prefills:
            return work
        _schedule_running(instance, work, budget, allow_prefill=False, chunked=False)
        return work
    if plan.mode is not StepMode.PREFILL_ONLY:
        budget = _schedule_running(
            instance, work, budget, allow_prefill=plan.mode is StepMode.MIXED, chunked=plan.chunked_prefill
        )
    if plan.mode is not StepMode.DECODE_ONLY and not work.preempted:
        _admit_waiting(instance, work, budget, max_running, chunked=plan.chunked_prefill)
    return work


def _schedule_running(
    instance: SimInstance, work: StepWork, budget: int, allow_prefill: bool, chunked: bool
) -> int:
    running = instance.running
    kv = instance.kv
    block_size = kv.block_size
    position = 0
    while position < len(running) and budget > 0:
        seq = running[position]
        if seq.num_computed_tokens < seq.num_prompt_tokens:
            if not allow_prefill:
                position += 1
                continue
            remaining = seq.num_prompt_tokens - seq.num_computed_tokens
            tokens = min(remaining, budget) if chunked else remaining
            if tokens > budget:
                position += 1
                continue
        else:
            tokens = 1
        needed = -(-(seq.num_computed_tokens + tokens) // block_size) - seq.num_blocks
        while not kv.allocate(seq, needed):
            victim = running[-1]
            instance.preempt(victim)
            work.preempted = True
            if victim is seq:
                break
        else:
            if tokens == 1 and seq.num_computed_tokens >= seq.num_prompt_tokens:
                work.decodes.append(seq)
                work.decode_context_tokens += seq.num_computed_tokens + 1
            else:
                work.prefills.append((seq, tokens))
                work.num_prefill_tokens += tokens
                work.prefill_context_tokens += seq.num_computed_tokens
            budget -= tokens
            position += 1
    return budget


def _admit_waiting(instance: SimInstance, work: StepWork, budget: int, max_running: int, chunked: bool) -> None:
    waiting = instance.waiting
    if not waiting:
        return
    instance.sort_waiting()
    kv = instance.kv
    block_size = kv.block_size
    admission = instance.engine.admission
    admitted: list[Seq] = []
    num_running = len(instance.running)
    for seq in waiting:
        if num_running >= max_running or budget <= 0:
            break
        if not admission.admit(seq, instance):
            continue
        hashes = seq.request.prefix_hashes
        hit_blocks = min(kv.cached_prefix_blocks(hashes), (seq.num_prompt_tokens - 1) // block_size)
        cached_tokens = hit_blocks * block_size
        tokens = seq.num_prompt_tokens - cached_tokens
        if chunked:
            tokens = min(tokens, budget)
        elif tokens > budget and (work.prefills or work.decodes):
            break  # an over-budget prompt still runs alone, so it can never hang
        needed = -(-(cached_tokens + tokens) // block_size) - hit_blocks
        if needed > kv.num_free:
            break
        kv.acquire_prefix(seq, hashes, hit_blocks)
        kv.allocate(seq, needed)
        seq.num_computed_tokens = cached_tokens
        instance.on_admitted(seq, cached_tokens)
        work.prefills.append((seq, tokens))
        work.num_prefill_tokens += tokens
        work.prefill_context_tokens += cached_tokens
        budget -= tokens
        admitted.append(seq)
        num_running += 1
    if admitted:
        instance.remove_waiting(admitted)
