"""Ground-truth step-time model: a calibrated roofline of one engine step on (GPU, model, TP).

A step costs

* dense projections (all layers' QKV/O/MLP plus the LM head for the rows that are sampled): a smooth
  roofline ``sqrt(compute^2 + memory^2)`` of their FLOPs and weight bytes (a free exponent instead of 2
  fits 1.91 and moves no anchor by more than half a percent);
* elementwise traffic (norms, residual adds, RoPE, SiLU-mul), memory-bound, linear in tokens;
* attention: decode reads each sequence's KV (memory-bound), prefill chunks do quadratic FLOPs
  (a smooth roofline of those FLOPs and the KV they read);
* tensor parallelism: every GPU holds ``1/tp`` of the weights, heads and FLOPs; two all-reduces per layer
  (a latency plus bytes over the GPU link);
* the software stack: a fixed per-step overhead and a per-decode-sequence overhead (CPU bookkeeping).

GPU efficiencies and stack overheads are fitted by :mod:`slosched.perf.calibrate` so every measured
anchor point in ``hardware.json`` is reproduced within 10 %; the fitted constants live in
:data:`CALIBRATION` below. ``step_time_s`` is on the simulator's hot path: pure float arithmetic on
constants precomputed in ``__init__``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.perf.hardware import GpuFacts, ModelFacts, gpu_facts, model_facts
from slosched.perf.stacks import (
    CALIBRATION,
    DEFAULT_EFFICIENCY_LIKE,
    DEFAULT_STACK,
    NCCL_BUS_FRACTION,
    Calibration,
    GpuEfficiency,
    NVLINK_CLASS_Bps,
    StackProfile,
    gpu_efficiency,
)

__all__ = [
    "ACTIVATION_BYTES",
    "ACTIVATION_RESERVE_BYTES_PER_GPU",
    "CALIBRATION",
    "DEFAULT_EFFICIENCY_LIKE",
    "DEFAULT_STACK",
    "NCCL_BUS_FRACTION",
    "Calibration",
    "GpuEfficiency",
    "NVLINK_CLASS_Bps",
    "RooflineModel",
    "StackProfile",
    "StepBreakdown",
    "gpu_efficiency",
]

_sqrt = math.sqrt  # bound once: the hot path avoids the module attribute lookup
ACTIVATION_BYTES = 2.0  # activations stay bf16 even with quantised weights
# CUDA context, CUDA graphs, activations and logits buffers vLLM keeps outside the KV pool, per GPU.
ACTIVATION_RESERVE_BYTES_PER_GPU = 2.0e9
# Prompt lengths whose step alone is remembered per model (a gateway's model lives as long as the process).
PROMPT_ALONE_CACHE = 8192


@dataclass(slots=True, frozen=True)
class StepBreakdown:
    """Seconds of one step by component; ``total_s`` equals ``RooflineModel.step_time_s`` to rounding."""

    dense_s: float
    elementwise_s: float
    attention_s: float
    allreduce_s: float
    overhead_s: float

    @property
    def total_s(self) -> float:
        return self.dense_s + self.elementwise_s + self.attention_s + self.allreduce_s + self.overhead_s


def _per_gpu(scales: Mapping[str, float], gpu: GpuFacts) -> float:
    """A stack's per-GPU scale: by name, else its ``efficiency_like`` GPU's, else 1."""
    return scales.get(gpu.name, scales.get(gpu.efficiency_like or "", 1.0))


class RooflineModel:
    """Noise-free step time of one instance (implements ``StepTimeModel``).

    Invariants: deterministic; non-decreasing in every argument (more decode sequences counted at the batch's
    mean context: the same summed context over more sequences may run faster, see ``attention_units``);
    an empty step takes 0 s;
    ``decode_run_s(b, c, n)[k] == step_time_s(0, 0, b, c + k * b)`` bit for bit.
    """

    __slots__ = (
        "_a_pair_s",
        "_attention_units",
        "_c_row_s",
        "_c_tok_s",
        "_decode_bases",
        "_decode_kv",
        "_decode_terms",
        "_e_tok_s",
        "_fixed_s",
        "_kv_groups",
        "_kv_tok_s",
        "_m_dense_s",
        "_m_dense_sq",
        "_m_linear_s",
        "_mixed_fixed_s",
        "_prompt_alone",
        "_seq_s",
        "_stack_fixed_s",
        "_tok_s",
        "_unit_bound",
        "gpu",
        "kv_bytes_per_token",
        "model",
        "stack",
        "tp",
        "weight_bytes",
    )

    def __init__(
        self,
        gpu: GpuFacts,
        model: ModelFacts,
        tp: int,
        efficiency: GpuEfficiency,
        stack: StackProfile,
    ) -> None:
        if tp < 1 or model.heads % tp:
            raise ConfigError("tp", f"must be >= 1 and divide heads={model.heads}, got {tp}")
        self.gpu, self.model, self.tp, self.stack = gpu, model, tp, stack
        flops = gpu.fp16_flops * efficiency.compute * _per_gpu(stack.compute_scale, gpu)
        bandwidth = gpu.bandwidth_Bps * efficiency.memory
        memory_scale = _per_gpu(stack.memory_scale, gpu)
        if memory_scale != 1.0:  # only stacks that set one: the others keep their exact arithmetic
            bandwidth *= memory_scale
        wb = stack.weight_bytes_per_param
        self._c_tok_s = 2.0 * model.linear_params / tp / flops
        self._c_row_s = 2.0 * model.lm_head_params / tp / flops
        self._m_linear_s = model.linear_params / tp * wb / bandwidth
        self._m_dense_s = (model.linear_params + model.lm_head_params) / tp * wb / bandwidth
        self._m_dense_sq = self._m_dense_s * self._m_dense_s  # the same product every step computed
        # Norms and residual adds run on the full hidden state on every GPU; RoPE and the MLP
        # activation run on this GPU's shard.
        sharded = 2 * (model.hidden + model.kv_dim) + model.mlp_matrices * model.intermediate
        elem_bytes = model.layers * ACTIVATION_BYTES * (10 * model.hidden + sharded / tp)
        self._e_tok_s = elem_bytes / bandwidth
        kv_heads_per_gpu = -(-model.kv_heads // tp)  # replicated when tp > kv_heads, as vLLM does
        kv_gpu = 2.0 * model.layers * kv_heads_per_gpu * model.head_dim * stack.kv_bytes_per_elem
        self.kv_bytes_per_token = kv_gpu * tp
        self.weight_bytes = model.num_params * wb
        self._kv_tok_s = kv_gpu / bandwidth
        self._kv_groups = kv_heads_per_gpu
        self._attention_units = units = stack.attention_units_by_gpu.get(gpu.name, stack.attention_units)
        # One work unit (a KV head's share of the attention) streams at most 1/attention_units of the
        # bandwidth, and each must read its head's whole K/V: a floor on any attention pass.
        self._unit_bound = units / kv_heads_per_gpu
        self._mixed_fixed_s = stack.mixed_layer_overhead_s * model.layers
        self._a_pair_s = 4.0 * model.layers * model.head_dim * (model.heads // tp) / flops
        if stack.attention_scale != 1.0:
            self._a_pair_s /= stack.attention_scale
        ar_fixed = ar_tok = 0.0
        if tp > 1:
            ar_fixed = 2 * model.layers * efficiency.link_latency_s
            ring_bytes = 2.0 * (tp - 1) / tp * model.hidden * ACTIVATION_BYTES
            ar_tok = 2 * model.layers * ring_bytes / efficiency.link_Bps
        self._stack_fixed_s = stack.step_overhead_s
        if stack.layer_overhead_s:
            self._stack_fixed_s += stack.layer_overhead_s * model.layers
        self._fixed_s = self._stack_fixed_s + ar_fixed
        self._tok_s = self._e_tok_s + ar_tok
        self._seq_s = stack.seq_overhead_s
        if stack.seq_work_scale:  # per decode row, in proportion to the row's own dense + LM-head FLOPs
            self._seq_s += stack.seq_work_scale * (self._c_tok_s + self._c_row_s)
        self._start_caches()

    def _start_caches(self) -> None:
        """Empty caches of pure functions of the constants: the same floats, looked up on the hot paths."""
        # ``_decode_base_s`` per batch size (a pure function read on every decode run and no-contention
        # latency; batch sizes are few): a dict lookup instead of a square root and eight float ops.
        self._decode_bases: dict[int, float] = {}
        self._decode_terms: dict[int, tuple[float, float]] = {}
        # ``_decode_kv_tok_s`` per batch size, for ``step_time_s`` (a lookup instead of a call, a max and a
        # division on every mixed step: what the ``attention_units`` of vllm-v1 added).
        self._decode_kv: dict[int, float] = {}
        # The prefill step of a prompt alone, by its length: ``no_contention_latency_s`` is asked for the same
        # prompts again and again (a deadline and a report per job, on each instance type). Bounded: a
        # gateway's model lives as long as the process.
        self._prompt_alone: dict[int, float] = {}  # a dict, not an lru_cache of a bound method: a self-cycle

    @classmethod
    def build(
        cls,
        gpu: str,
        model: str,
        tp: int = 1,
        stack: str = DEFAULT_STACK,
        calibration: Calibration | None = None,
    ) -> RooflineModel:
        """The calibrated model for ``gpu`` (aliases allowed), ``model``, ``tp`` and software ``stack``."""
        cal = CALIBRATION if calibration is None else calibration
        facts = gpu_facts(gpu)
        if stack not in cal.stacks:
            raise UnknownNameError("stack", stack, list(cal.stacks))
        return cls(facts, model_facts(model), tp, gpu_efficiency(facts, cal), cal.stacks[stack])

    def step_time_s(
        self,
        num_prefill_tokens: int,
        prefill_context_tokens: int,
        num_decode_seqs: int,
        decode_context_tokens: int,
    ) -> float:
        tokens = num_prefill_tokens + num_decode_seqs
        if tokens <= 0:
            return 0.0
        # Logits are computed for every decode sequence and for the last prefill position.
        rows = num_decode_seqs + 1 if num_prefill_tokens > 0 else num_decode_seqs
        c = tokens * self._c_tok_s + rows * self._c_row_s
        t = _sqrt(c * c + self._m_dense_sq)
        t += self._fixed_s + tokens * self._tok_s + num_decode_seqs * self._seq_s
        if num_decode_seqs > 0:
            per_token = self._decode_kv.get(num_decode_seqs)
            if per_token is None:
                per_token = self._decode_kv[num_decode_seqs] = self._decode_kv_tok_s(num_decode_seqs)
            t += (decode_context_tokens + num_decode_seqs) * per_token
        if num_prefill_tokens > 0:
            # Inlined _prefill_attention_s (hot path).
            pairs = num_prefill_tokens * (prefill_context_tokens + 0.5 * (num_prefill_tokens + 1))
            a = pairs * self._a_pair_s
            b = (prefill_context_tokens + num_prefill_tokens) * self._kv_tok_s
            if self._attention_units:
                attention = _sqrt(a * a + b * b)
                floor = b * self._unit_bound
                t += floor if floor > attention else attention  # max() without the call, same value
                if num_decode_seqs > 0:
                    t += self._mixed_fixed_s
            else:
                t += _sqrt(a * a + b * b)
        return t

    def _decode_kv_tok_s(self, num_decode_seqs: int) -> float:
        """Seconds per cached token of a decode batch: the bandwidth cost, times the occupancy slowdown of a
        batch whose sequences x KV heads leave the attention kernel short of ``attention_units`` blocks."""
        if not self._attention_units:
            return self._kv_tok_s
        return self._kv_tok_s * max(1.0, self._attention_units / (num_decode_seqs * self._kv_groups))

    def _prefill_attention_s(self, num_prefill_tokens: int, prefill_context_tokens: int) -> float:
        # Causal pairs of one chunk: each of its tokens sees the prior context and the chunk up to itself.
        # The step vocabulary does not split chunks by sequence, so several prompts in one step are
        # costed as one chunk (overestimates their quadratic part).
        pairs = num_prefill_tokens * (prefill_context_tokens + 0.5 * (num_prefill_tokens + 1))
        c = pairs * self._a_pair_s
        m = (prefill_context_tokens + num_prefill_tokens) * self._kv_tok_s
        if self._attention_units:
            return max(_sqrt(c * c + m * m), m * self._unit_bound)
        return _sqrt(c * c + m * m)

    def _decode_base_s(self, num_decode_seqs: int) -> float:
        """``step_time_s(0, 0, b, c)`` minus its KV term, with the same float operations in order."""
        base = self._decode_bases.get(num_decode_seqs)
        if base is None:
            base = self._decode_bases[num_decode_seqs] = self._compute_decode_base_s(num_decode_seqs)
        return base

    def _compute_decode_base_s(self, num_decode_seqs: int) -> float:
        c = num_decode_seqs * self._c_tok_s + num_decode_seqs * self._c_row_s
        t = _sqrt(c * c + self._m_dense_sq)
        t += self._fixed_s + num_decode_seqs * self._tok_s + num_decode_seqs * self._seq_s
        return t

    def decode_step_terms(self, num_decode_seqs: int) -> tuple[float, float]:
        """``(base_s, per_token_s)`` with ``step_time_s(0, 0, b, c) == base_s + (c + b) * per_token_s`` bit for
        bit: a decode-only step is affine in its context, which lets callers time runs without numpy."""
        terms = self._decode_terms.get(num_decode_seqs)
        if terms is None:  # read once per decode run by the simulator: one lookup, as for the base
            terms = (self._decode_base_s(num_decode_seqs), self._decode_kv_tok_s(num_decode_seqs))
            self._decode_terms[num_decode_seqs] = terms
        return terms

    def decode_run_s(self, num_decode_seqs: int, decode_context_tokens: int, num_steps: int) -> np.ndarray:
        """Durations (float64) of ``num_steps`` decode-only steps; context grows by the batch each step."""
        if num_steps <= 0:
            return np.empty(0, dtype=np.float64)
        if num_decode_seqs <= 0:
            return np.zeros(num_steps, dtype=np.float64)
        base = self._decode_base_s(num_decode_seqs)
        first = decode_context_tokens + num_decode_seqs
        per_token = self._decode_kv_tok_s(num_decode_seqs)
        if num_steps == 1:
            return np.array([base + first * per_token], dtype=np.float64)
        ctx = np.arange(num_steps, dtype=np.float64)
        ctx *= num_decode_seqs
        ctx += first  # exact: integers below 2**53
        ctx *= per_token
        ctx += base
        return ctx

    def linear_time_s(self, num_tokens: int) -> float:
        """Dense projections and elementwise ops of all layers for ``num_tokens`` tokens, nothing else.

        This is the operator set Vidur's ``mlp.csv`` profiles cover (no attention, all-reduce, LM head
        or engine overhead); the calibration checks it against those profiles.
        """
        c = num_tokens * self._c_tok_s
        return _sqrt(c * c + self._m_linear_s * self._m_linear_s) + num_tokens * self._e_tok_s

    def breakdown(
        self,
        num_prefill_tokens: int,
        prefill_context_tokens: int,
        num_decode_seqs: int,
        decode_context_tokens: int,
    ) -> StepBreakdown:
        """One step split by component (for reports; ``total_s`` matches ``step_time_s`` to rounding)."""
        tokens = num_prefill_tokens + num_decode_seqs
        if tokens <= 0:
            return StepBreakdown(0.0, 0.0, 0.0, 0.0, 0.0)
        rows = num_decode_seqs + 1 if num_prefill_tokens > 0 else num_decode_seqs
        c = tokens * self._c_tok_s + rows * self._c_row_s
        dense = _sqrt(c * c + self._m_dense_s * self._m_dense_s)
        attention = 0.0
        if num_decode_seqs > 0:
            attention += (decode_context_tokens + num_decode_seqs) * self._decode_kv_tok_s(num_decode_seqs)
        if num_prefill_tokens > 0:
            attention += self._prefill_attention_s(num_prefill_tokens, prefill_context_tokens)
        elementwise = tokens * self._e_tok_s
        allreduce = self._fixed_s - self._stack_fixed_s + tokens * (self._tok_s - self._e_tok_s)
        overhead = self._stack_fixed_s + num_decode_seqs * self._seq_s
        if self._attention_units and num_prefill_tokens > 0 and num_decode_seqs > 0:
            overhead += self._mixed_fixed_s
        return StepBreakdown(dense, elementwise, attention, allreduce, overhead)

    def num_kv_blocks(self, gpu_memory_utilization: float = 0.9, block_size: int = 16) -> int:
        """KV blocks that fit beside the weights and the activation reserve (>= 0; 0 when it does not fit)."""
        if not 0.0 < gpu_memory_utilization <= 1.0:
            raise ConfigError("gpu_memory_utilization", f"must be in (0, 1], got {gpu_memory_utilization}")
        if block_size < 1:
            raise ConfigError("block_size", f"must be >= 1, got {block_size}")
        usable = self.tp * (self.gpu.memory_bytes * gpu_memory_utilization - ACTIVATION_RESERVE_BYTES_PER_GPU)
        free = usable - self.weight_bytes
        return max(0, math.floor(free / (block_size * self.kv_bytes_per_token)))

    def no_contention_latency_s(self, prompt_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float:
        """Latency of one request alone: one prefill step of the uncached prompt, then
        ``output_tokens - 1`` decode steps (the prefill step emits the first token)."""
        uncached = max(1, prompt_tokens - cached_tokens)  # the engine always computes the last token
        if uncached == prompt_tokens:
            alone = self._prompt_alone
            cached = alone.get(prompt_tokens)
            if cached is None:
                if len(alone) >= PROMPT_ALONE_CACHE:
                    alone.clear()
                cached = alone[prompt_tokens] = self.step_time_s(prompt_tokens, 0, 0, 0)
            total = cached
        else:
            total = self.step_time_s(uncached, prompt_tokens - uncached, 0, 0)
        if output_tokens > 1:
            total += self.decode_run_total_s(1, prompt_tokens, output_tokens - 1)
        return total

    def decode_run_total_s(self, num_decode_seqs: int, decode_context_tokens: int, num_steps: int) -> float:
        """``decode_run_s(...).sum()`` in closed form (the per-step KV term grows linearly); equal up to
        rounding, for evaluation code that needs totals of many runs quickly."""
        if num_steps <= 0 or num_decode_seqs <= 0:
            return 0.0
        first = decode_context_tokens + num_decode_seqs
        context_sum = num_steps * first + num_decode_seqs * num_steps * (num_steps - 1) / 2
        base, per_token = self.decode_step_terms(num_decode_seqs)  # one cached lookup for both terms
        return num_steps * base + context_sum * per_token
