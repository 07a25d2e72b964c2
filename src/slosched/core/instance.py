"""Instance (model replica) and cluster specifications."""

from __future__ import annotations

from dataclasses import dataclass

from slosched.core.numbers import plain_numbers

_INT_FIELDS = ("tp", "max_running", "max_batched_tokens", "max_model_len", "block_size", "num_kv_blocks")


# The software stack of the roofline truth an instance runs on when none is named: the current engine
# (vLLM v1 with CUDA graphs), calibrated to measured H100 steps (``perf/stacks.py``, ``docs/hardware.md``).
# ``splitwise`` (the 2023 engine), ``vidur`` (kernels only) and ``hexgen`` stay for the paper reproductions,
# which name theirs.
DEFAULT_SOFTWARE_STACK = "vllm-v1"


@dataclass(slots=True, frozen=True)
class InstanceSpec:
    """One model replica. ``num_kv_blocks`` None means: derive from GPU memory (see perf.roofline).

    ``stack`` names the software stack of the ground-truth step-time model (``perf.roofline``: engine
    overheads and weight/KV precision: ``vllm-v1``, the default, for a current bf16 engine, ``splitwise``
    for the 2023 one, ``hexgen`` for 4-bit weights). ``available_from_s`` is when the instance joins the
    cluster (routers ignore it before), e.g. a fresh, unprofiled replica added to a loaded cluster.
    ``profile``: a JSON file from ``slosched profile`` whose measured step model replaces the roofline as
    ground truth.
    """

    name: str
    gpu: str
    model: str
    tp: int = 1
    max_running: int = 256
    max_batched_tokens: int = 8192
    max_model_len: int = 32768
    block_size: int = 16
    num_kv_blocks: int | None = None
    prefix_caching: bool = True
    gpu_memory_utilization: float = 0.9
    stack: str = DEFAULT_SOFTWARE_STACK
    available_from_s: float = 0.0
    profile: str | None = None

    def __post_init__(self) -> None:
        plain_numbers(self, _INT_FIELDS, ("gpu_memory_utilization", "available_from_s"))


@dataclass(slots=True, frozen=True)
class ClusterSpec:
    instances: tuple[InstanceSpec, ...]
