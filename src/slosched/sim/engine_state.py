"""What one simulated engine holds between steps, and the moves a step makes on it.

The running set (admission order; the last one is the preemption victim), the running requests whose
prefill is not complete, the decode cohort, the KV cache, the waiting prefill work and the counters these
moves update. ``StepFormer`` forms a step over this state alone; ``SimInstance`` extends it with time
(steps, decode runs, events, belief, noise) and decides how a preempted request waits again.
"""

from __future__ import annotations

from slosched.core.instance import InstanceSpec
from slosched.core.records import InstanceStats
from slosched.sim.cohort import DecodeCohort
from slosched.sim.kernel import EventKernel
from slosched.sim.kv import KVCache
from slosched.sim.seq import Seq


class EngineState:
    def __init__(self, spec: InstanceSpec, num_kv_blocks: int, kernel: EventKernel) -> None:
        self.spec = spec
        self.kernel = kernel
        self.kv = KVCache(num_kv_blocks, spec.block_size, spec.prefix_caching)
        self.cohort = DecodeCohort(spec.block_size)
        self.running: dict[int, Seq] = {}  # admission order; the last one is the preemption victim
        self.prefilling: list[Seq] = []  # running requests whose prefill is not complete
        self.stats = InstanceStats(name=spec.name)
        self.waiting_prefill_tokens = 0

    def last_running(self) -> Seq:
        return self.running[next(reversed(self.running))]

    def start_running(self, admitted: list[Seq]) -> None:
        """Requests an admission pass took (already out of waiting) join the running set, prefill pending."""
        for seq in admitted:
            self.running[seq.order] = seq
            self.prefilling.append(seq)

    def on_admitted(self, seq: Seq, cached_tokens: int) -> None:
        self.waiting_prefill_tokens -= seq.num_prompt_tokens
        if seq.first_scheduled_s is None:
            seq.first_scheduled_s = self.kernel.now_s
            seq.num_cached_tokens = cached_tokens
            self.stats.prefix_query_tokens += seq.num_prompt_tokens
            self.stats.prefix_hit_tokens += cached_tokens

    def preempt(self, seq: Seq) -> None:
        """Preemption by recompute: drop its KV; it re-prefills prompt plus the tokens generated so far."""
        del self.running[seq.order]
        if seq.finish_clock >= 0:
            self.cohort.leave(seq)
        else:
            self.prefilling.remove(seq)
        self.kv.release(seq)
        seq.num_prompt_tokens = seq.request.prompt_tokens + seq.num_output_tokens
        seq.num_computed_tokens = 0
        seq.num_preemptions += 1
        self.stats.num_preemptions += 1
        self.wait_again(seq)

    def wait_again(self, seq: Seq) -> None:
        """Put ``seq`` back among the waiting requests (the instance's policy queue decides where)."""
        raise NotImplementedError
