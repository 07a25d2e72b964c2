"""Fitted constants of the roofline truth (:mod:`slosched.perf.roofline`): GPU efficiencies and software stacks.

Split from ``roofline`` (which re-exports every name) so the step-time arithmetic stays readable; the
constants are fitted by :mod:`slosched.perf.calibrate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from slosched.core.errors import UnknownNameError
from slosched.core.instance import DEFAULT_SOFTWARE_STACK
from slosched.perf.hardware import GpuFacts


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
    kernel-level profiles the GPU efficiencies were fitted on; ``memory_scale`` the same for bandwidth.
    Overheads per step: ``step_overhead_s`` plus ``layer_overhead_s`` per layer (kernel launches and
    small kernels of one layer, which CUDA graphs shorten but do not remove). Per decode sequence:
    ``seq_overhead_s`` plus ``seq_work_scale`` times the FLOP time of one row through the dense layers
    and the LM head, so it scales with the model (skinny-GEMM inefficiency, sampling, per-sequence
    attention work). ``attention_scale``: prefill attention's FLOP/s relative to the stack's GEMMs.
    ``attention_units``: the attention kernel's work units (thread blocks) needed to stream K/V at full
    bandwidth; an attention with fewer (decode: sequences x KV heads; a prompt chunk: query heads x
    128-token query blocks) runs that many times slower, as a small model at long context with few
    sequences shows (0: no such limit); ``attention_units_by_gpu`` replaces it on a GPU whose memory streams
    faster than the one it was fitted on (a unit's rate is the SMs', so more units fill a faster memory).
    ``mixed_layer_overhead_s``: per layer, what a step carrying both a
    prompt chunk and decodes adds (a second attention pass and its metadata; only with ``attention_units``).
    The defaults leave the older stacks' arithmetic untouched.
    """

    name: str
    weight_bytes_per_param: float = 2.0
    kv_bytes_per_elem: float = 2.0
    step_overhead_s: float = 0.0
    seq_overhead_s: float = 0.0
    compute_scale: Mapping[str, float] = field(default_factory=dict)
    memory_scale: Mapping[str, float] = field(default_factory=dict)
    layer_overhead_s: float = 0.0
    seq_work_scale: float = 0.0
    attention_scale: float = 1.0
    attention_units: float = 0.0
    attention_units_by_gpu: Mapping[str, float] = field(default_factory=dict)
    mixed_layer_overhead_s: float = 0.0


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
            # The RelServe and SABER reproductions' engine (a 2023 full-engine bf16 measurement). Its ~0.42 ms
            # per decode sequence is CPU bookkeeping (batch 1 -> 32 adds ~15 ms on both A100 and H100, whatever
            # their FLOPs); its H100 GEMMs reached 73 % of the efficiency Vidur's kernels show (no
            # Hopper-tuned kernels then).
            "splitwise": StackProfile(
                "splitwise",
                step_overhead_s=4.99e-3,
                seq_overhead_s=0.424e-3,
                compute_scale=MappingProxyType({"H100": 0.733}),
            ),
            # A current engine (vLLM v1: CUDA graphs, fused kernels, FlashAttention, asynchronous scheduling)
            # on H100, fitted by slosched.perf.stack_fit to the 52 H100 steps measured for the project
            # (Llama-3-8B, CUDA graph per shape) at FLOOR_OVER_ENGINE = 1.10: the measured unfused forward is
            # an upper bound on the engine's GPU time. Streams weights and KV at the datasheet bandwidth
            # (memory_scale * 0.762 = 1); 81 us per layer per step of launch/small-kernel floor; each decode
            # row costs a tenth more of its own FLOP time (the lower bound of the fit: sampling, metadata);
            # attention streams KV at full bandwidth only with >= 70 work units (sequences x KV heads, or
            # query heads x 128-token blocks of a chunk), and a mixed step adds 54 us per layer. Checked, not
            # fitted, on 230 steps of six more models measured the same way (perf/data/heldout-*.json).
            # H200 (the same GH100 die, HBM3e): its compute scale is H100's; its streaming rate and attention
            # units were fitted by stack_fit.fit_gpu_scales to 46 H200 steps of Llama-3-8B, the engine's
            # constants held (4.32 TB/s streamed, as a device-to-device copy measures 4.28; 99 units, where
            # H100's 70.3 units at H100's 3.07 TB/s predict 98.8 for a unit rate set by the SMs), and checked
            # on 265 H200 steps of the six other models (perf/data/heldout-h200-*.json).
            "vllm-v1": StackProfile(
                "vllm-v1",
                compute_scale=MappingProxyType({"H100": 0.834, "H200": 0.834}),
                memory_scale=MappingProxyType({"H100": 1 / 0.762, "H200": 1.180}),
                layer_overhead_s=81.4e-6,
                seq_work_scale=0.1,
                attention_scale=0.640,
                attention_units=70.3,
                attention_units_by_gpu=MappingProxyType({"H200": 99.0}),
                mixed_layer_overhead_s=54.4e-6,
            ),
            # Hexgen-Text2SQL's engine: 4-bit weights and KV; its larger fixed cost per step absorbs
            # dequantisation and engine overhead (one constant for all three GPUs).
            "hexgen": StackProfile(
                "hexgen", weight_bytes_per_param=0.5, kv_bytes_per_elem=0.5, step_overhead_s=10.45e-3
            ),
        }
    ),
)
# The simulator's truth when an instance names no stack: the current engine (one constant, in core).
DEFAULT_STACK = DEFAULT_SOFTWARE_STACK
CURRENT_ENGINE_STACK = "vllm-v1"


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
