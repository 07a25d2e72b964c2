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
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.perf.hardware import GpuFacts, ModelFacts, gpu_facts, model_facts

_sqrt = math.sqrt  # bound once: the hot path avoids the module attribute lookup
ACTIVATION_BYTES = 2.0  # activations stay bf16 even with quantised weights
# CUDA context, CUDA graphs, activations and logits buffers vLLM keeps outside the KV pool, per GPU.
ACTIVATION_RESERVE_BYTES_PER_GPU = 2.0e9


@dataclass(slots=True, frozen=True)
class GpuEfficiency:
    """Achievable fractions of a GPU's peaks, and its all-reduce link.

    ``compute``: fraction of peak dense bf16 FLOP/s large GEMMs reach; ``memory``: fraction of peak
    bandwidth that weight/KV streaming reaches (both in (0, 1], fitted). ``link_Bps`` (all-reduce bus
    bandwidth per GPU) and ``link_latency_s`` (per all-reduce) are vendor/NCCL figures, not fitted.
    """

    compute: float
    memory: float
    link_Bps: float
    link_latency_s: float


@dataclass(slots=True, frozen=True)
class StackProfile:
    """What one software stack (engine, kernels, precision) adds to the hardware roofline.

    ``compute_scale`` (per canonical GPU, default 1) is the stack's GEMM efficiency relative to the
    kernel-level profiles the GPU efficiencies were fitted on.
    """

    name: str
    weight_bytes_per_param: float = 2.0
    kv_bytes_per_elem: float = 2.0
    step_overhead_s: float = 0.0
    seq_overhead_s: float = 0.0
    compute_scale: Mapping[str, float] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class Calibration:
    """Everything fitted: GPU efficiencies (by canonical name) and software stacks (by name)."""

    gpus: Mapping[str, GpuEfficiency]
    stacks: Mapping[str, StackProfile]


_NVLINK_A100 = (240e9, 10e-6)  # NVLink3 300 GB/s per direction; ~240 GB/s NCCL bus bandwidth
_NVLINK_H100 = (360e9, 10e-6)  # NVLink4 450 GB/s per direction
_PCIE4 = (22e9, 25e-6)  # PCIe 4.0 x16, 32 GB/s per direction, ~22 GB/s achieved

# Fitted by slosched.perf.calibrate.fit_efficiencies(): scipy least squares over log(model/measured)
# of every anchor in hardware.json (Vidur per-operator profiles for A100/H100/A40, Splitwise's
# Llama2-70B TP2 prompt/token times, Hexgen's 4-bit Llama-3.1-70B decode times). Ties, because no
# anchor separates them: A100-40G = A100-80G (same GA100 die); A6000 = A40 (same GA102 die, GDDR6);
# L40S borrows A40's compute efficiency (its only anchor is memory-bound decode).
_A100 = GpuEfficiency(0.721, 0.693, *_NVLINK_A100)
_A40 = GpuEfficiency(0.757, 0.771, *_PCIE4)
CALIBRATION = Calibration(
    gpus=MappingProxyType(
        {
            "A100-80G": _A100,
            "A100-40G": _A100,
            "H100": GpuEfficiency(0.732, 0.762, *_NVLINK_H100),
            "A40": _A40,
            "A6000": _A40,
            "L40S": GpuEfficiency(_A40.compute, 0.916, *_PCIE4),
        }
    ),
    stacks=MappingProxyType(
        {
            # Kernel-level profiles: no engine overheads (Vidur's linear-operator CSVs).
            "vidur": StackProfile("vidur"),
            # The 2023 vLLM-based engine Splitwise measured (bf16; TP2, per its CSV's tensor_parallel).
            # Default for simulation: the only full-engine bf16 measurement. Its ~0.42 ms per decode
            # sequence is CPU bookkeeping (batch 1 -> 32 adds ~15 ms on both A100 and H100, whatever
            # their FLOPs); its H100 GEMMs reached 73 % of the efficiency Vidur's kernels show (no
            # Hopper-tuned kernels then).
            "splitwise": StackProfile(
                "splitwise",
                step_overhead_s=4.99e-3,
                seq_overhead_s=0.424e-3,
                compute_scale=MappingProxyType({"H100": 0.733}),
            ),
            # Hexgen-Text2SQL's engine: 4-bit weights and KV; its larger fixed cost per step absorbs
            # dequantisation and engine overhead (one constant for all three GPUs).
            "hexgen": StackProfile(
                "hexgen", weight_bytes_per_param=0.5, kv_bytes_per_elem=0.5, step_overhead_s=10.45e-3
            ),
        }
    ),
)
DEFAULT_STACK = "splitwise"


DEFAULT_EFFICIENCY_LIKE = "H100"  # uncalibrated GPUs without efficiency_like: the newest calibrated part
NCCL_BUS_FRACTION = 0.8  # achieved all-reduce bus bandwidth / per-direction link (240/300 A100, 360/450 H100)
NVLINK_CLASS_Bps = 100e9  # links at least this fast are NVLink-class (10 us per all-reduce), else PCIe (25 us)


def gpu_efficiency(gpu: GpuFacts, calibration: Calibration = CALIBRATION) -> GpuEfficiency:
    """The fitted efficiencies of ``gpu``, or, for a GPU with no anchor (H200, B200, user GPUs), those of
    its ``efficiency_like`` GPU (default H100) with the all-reduce link of its own ``interconnect_Bps``.

    Borrowed efficiencies are an assumption, not a fit: a borrowed GPU's step times are its datasheet
    roofline times the efficiencies another GPU reached.
    """
    if gpu.name in calibration.gpus:
        return calibration.gpus[gpu.name]
    like = gpu.efficiency_like or DEFAULT_EFFICIENCY_LIKE
    if like not in calibration.gpus:
        raise UnknownNameError(f"gpus.{gpu.name}.efficiency_like", like, list(calibration.gpus))
    base = calibration.gpus[like]
    if gpu.interconnect_Bps <= 0:
        return base
    latency_s = _NVLINK_H100[1] if gpu.interconnect_Bps >= NVLINK_CLASS_Bps else _PCIE4[1]
    return GpuEfficiency(base.compute, base.memory, NCCL_BUS_FRACTION * gpu.interconnect_Bps, latency_s)


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


class RooflineModel:
    """Noise-free step time of one instance (implements ``StepTimeModel``).

    Invariants: deterministic; non-decreasing in every argument; an empty step takes 0 s;
    ``decode_run_s(b, c, n)[k] == step_time_s(0, 0, b, c + k * b)`` bit for bit.
    """

    __slots__ = (
        "_a_pair_s",
        "_c_row_s",
        "_c_tok_s",
        "_decode_bases",
        "_e_tok_s",
        "_fixed_s",
        "_kv_tok_s",
        "_m_dense_s",
        "_m_linear_s",
        "_seq_s",
        "_tok_s",
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
        scale = stack.compute_scale.get(gpu.name, stack.compute_scale.get(gpu.efficiency_like or "", 1.0))
        flops = gpu.fp16_flops * efficiency.compute * scale
        bandwidth = gpu.bandwidth_Bps * efficiency.memory
        wb = stack.weight_bytes_per_param
        self._c_tok_s = 2.0 * model.linear_params / tp / flops
        self._c_row_s = 2.0 * model.lm_head_params / tp / flops
        self._m_linear_s = model.linear_params / tp * wb / bandwidth
        self._m_dense_s = (model.linear_params + model.lm_head_params) / tp * wb / bandwidth
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
        self._a_pair_s = 4.0 * model.layers * model.head_dim * (model.heads // tp) / flops
        ar_fixed = ar_tok = 0.0
        if tp > 1:
            ar_fixed = 2 * model.layers * efficiency.link_latency_s
            ring_bytes = 2.0 * (tp - 1) / tp * model.hidden * ACTIVATION_BYTES
            ar_tok = 2 * model.layers * ring_bytes / efficiency.link_Bps
        self._fixed_s = stack.step_overhead_s + ar_fixed
        self._tok_s = self._e_tok_s + ar_tok
        self._seq_s = stack.seq_overhead_s
        # ``_decode_base_s`` per batch size (a pure function read on every decode run and no-contention
        # latency; batch sizes are few): a dict lookup instead of a square root and eight float ops.
        self._decode_bases: dict[int, float] = {}

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
        t = _sqrt(c * c + self._m_dense_s * self._m_dense_s)
        t += self._fixed_s + tokens * self._tok_s + num_decode_seqs * self._seq_s
        if num_decode_seqs > 0:
            t += (decode_context_tokens + num_decode_seqs) * self._kv_tok_s
        if num_prefill_tokens > 0:
            # Inlined _prefill_attention_s (hot path).
            pairs = num_prefill_tokens * (prefill_context_tokens + 0.5 * (num_prefill_tokens + 1))
            a = pairs * self._a_pair_s
            b = (prefill_context_tokens + num_prefill_tokens) * self._kv_tok_s
            t += _sqrt(a * a + b * b)
        return t

    def _prefill_attention_s(self, num_prefill_tokens: int, prefill_context_tokens: int) -> float:
        # Causal pairs of one chunk: each of its tokens sees the prior context and the chunk up to itself.
        # The step vocabulary does not split chunks by sequence, so several prompts in one step are
        # costed as one chunk (overestimates their quadratic part).
        pairs = num_prefill_tokens * (prefill_context_tokens + 0.5 * (num_prefill_tokens + 1))
        c = pairs * self._a_pair_s
        m = (prefill_context_tokens + num_prefill_tokens) * self._kv_tok_s
        return _sqrt(c * c + m * m)

    def _decode_base_s(self, num_decode_seqs: int) -> float:
        """``step_time_s(0, 0, b, c)`` minus its KV term, with the same float operations in order."""
        base = self._decode_bases.get(num_decode_seqs)
        if base is None:
            base = self._decode_bases[num_decode_seqs] = self._compute_decode_base_s(num_decode_seqs)
        return base

    def _compute_decode_base_s(self, num_decode_seqs: int) -> float:
        c = num_decode_seqs * self._c_tok_s + num_decode_seqs * self._c_row_s
        t = _sqrt(c * c + self._m_dense_s * self._m_dense_s)
        t += self._fixed_s + num_decode_seqs * self._tok_s + num_decode_seqs * self._seq_s
        return t

    def decode_step_terms(self, num_decode_seqs: int) -> tuple[float, float]:
        """``(base_s, per_token_s)`` with ``step_time_s(0, 0, b, c) == base_s + (c + b) * per_token_s`` bit for
        bit: a decode-only step is affine in its context, which lets callers time runs without numpy."""
        return self._decode_base_s(num_decode_seqs), self._kv_tok_s

    def decode_run_s(self, num_decode_seqs: int, decode_context_tokens: int, num_steps: int) -> np.ndarray:
        """Durations (float64) of ``num_steps`` decode-only steps; context grows by the batch each step."""
        if num_steps <= 0:
            return np.empty(0, dtype=np.float64)
        if num_decode_seqs <= 0:
            return np.zeros(num_steps, dtype=np.float64)
        base = self._decode_base_s(num_decode_seqs)
        first = decode_context_tokens + num_decode_seqs
        if num_steps == 1:
            return np.array([base + first * self._kv_tok_s], dtype=np.float64)
        ctx = np.arange(num_steps, dtype=np.float64)
        ctx *= num_decode_seqs
        ctx += first  # exact: integers below 2**53
        ctx *= self._kv_tok_s
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
            attention += (decode_context_tokens + num_decode_seqs) * self._kv_tok_s
        if num_prefill_tokens > 0:
            attention += self._prefill_attention_s(num_prefill_tokens, prefill_context_tokens)
        elementwise = tokens * self._e_tok_s
        allreduce = self._fixed_s - self.stack.step_overhead_s + tokens * (self._tok_s - self._e_tok_s)
        overhead = self.stack.step_overhead_s + num_decode_seqs * self._seq_s
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
        return num_steps * self._decode_base_s(num_decode_seqs) + context_sum * self._kv_tok_s
