"""Measure prefill and decode step times of a random-weight Llama-3-8B-shaped model with PyTorch + transformers.

``python -m slosched.perf.gpu_profile --out DIR [--device cuda] [--tiny] [--quick]`` builds the model from a
``transformers.LlamaConfig`` with Llama-3-8B's dimensions (taken from ``hardware.json``, so they match the
roofline's model), random init, bf16 on CUDA (no download), and times single forwards:

* prefill: one sequence of N tokens (``use_cache``, logits of the last position only, as an engine samples);
* decode: B sequences whose static KV cache holds C random keys/values each, one new token each. The cache
  is reset to C after every run, so every run sees the same context (random K/V cost the same as real ones).

It writes ``DIR/gpu_profile.json`` (every run), ``DIR/gpu_profile.md`` (tables against slosched's roofline
truth and the ``hardware.json`` anchors) and ``DIR/gpu_profile_fit.json`` (slosched's measured step model
fitted to the points: a ``profile:`` for scenarios). ``--render`` rebuilds the two reports from a JSON file.
``--engine graph`` measures instead a plain PyTorch forward (:mod:`slosched.perf.gpu_graph`, the forward of the
project's H100 measurements) captured in one CUDA graph per shape (eager on CPU), adds mixed chunked-prefill
steps, and writes ``DIR/stack_fit.json``: the ``vllm-v1`` stack refitted to the points (constants to paste into
``stacks.CALIBRATION``); ``python -m slosched.perf.calibrate --measured DIR/gpu_profile.json [--refit]`` checks
the shipped (or refitted) stack against every point. ``--model NAME`` builds any ``hardware.json`` model;
``--fused`` (graph engine) compiles each layer with torch.compile: how far fused kernels take the same forward.
torch (and transformers, for the default engine) is imported lazily: the rest of slosched does not need them.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slosched.core.errors import ConfigError
from slosched.perf import gpu_graph
from slosched.perf.gpu_profile_data import Grid, ProfilePoint, ProfileResult, grid_for, kv_blocks_estimate, plan_decode
from slosched.perf.gpu_profile_report import fit_points, render_markdown
from slosched.perf.hardware import model_facts
from slosched.perf.measured_steps import parse_measured
from slosched.perf.profile_fit import MeasuredProfile
from slosched.perf.stack_fit import write_stack_fit

MODEL = "Llama-3-8B"
TINY_DIMS = {"hidden": 256, "intermediate": 688, "layers": 4, "heads": 4, "kv_heads": 2, "vocab": 2000}
BLOCK_SIZE = 16  # vLLM's default KV block, for the profile's capacity estimate
DTYPES = ("auto", "bfloat16", "float16", "float32")


def model_dims(tiny: bool, model: str = MODEL) -> dict[str, Any]:
    """Shape of the model to build: ``model``'s from hardware.json, or a tiny one for CPU tests."""
    if tiny:
        return {"name": "tiny-llama", **TINY_DIMS}
    f = model_facts(model)
    dims = {"hidden": f.hidden, "intermediate": f.intermediate, "layers": f.layers, "heads": f.heads}
    return {"name": f"{model}-shaped", **dims, "kv_heads": f.kv_heads, "vocab": f.vocab}


def _lib(name: str) -> Any:
    """torch/transformers, imported on first use (``Any``: the main environment has no stubs for them)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ConfigError("environment", f"{name} is not installed in {sys.executable}") from None


def build_model(dims: dict[str, Any], max_positions: int, device: str, dtype: Any) -> Any:
    """A randomly initialised ``LlamaForCausalLM`` created directly on ``device`` in ``dtype`` (eval mode)."""
    torch, transformers = _lib("torch"), _lib("transformers")
    config = transformers.LlamaConfig(
        hidden_size=dims["hidden"],
        intermediate_size=dims["intermediate"],
        num_hidden_layers=dims["layers"],
        num_attention_heads=dims["heads"],
        num_key_value_heads=dims["kv_heads"],
        vocab_size=dims["vocab"],
        max_position_embeddings=max(8192, max_positions),
        tie_word_embeddings=False,  # Llama-3-8B has its own LM head
        attn_implementation="sdpa",
    )
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # allocate in the target dtype: an fp32 8B model would need 32 GB first
    try:
        with torch.device(device):
            model = transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.to(device=device, dtype=dtype).eval()


def time_runs(
    step: Callable[[], object], reset: Callable[[], None], sync: Callable[[], None], warmup: int, repeats: int
) -> tuple[float, ...]:
    """Seconds of ``repeats`` calls of ``step`` after ``warmup`` untimed ones; ``reset`` runs untimed after each."""
    times = []
    for index in range(warmup + repeats):
        sync()
        start = time.perf_counter()
        step()
        sync()
        elapsed = time.perf_counter() - start
        reset()
        if index >= warmup:
            times.append(elapsed)
    return tuple(times)


def measure_prefill(model: Any, tokens: int, grid: Grid, device: str, sync: Callable[[], None]) -> ProfilePoint:
    torch = _lib("torch")
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), device=device)

    def step() -> object:
        return model(input_ids=ids, use_cache=True, logits_to_keep=1)

    return ProfilePoint("prefill", 1, tokens, time_runs(step, lambda: None, sync, grid.warmup, grid.repeats))


def _filled_cache(model: Any, batch: int, context: int, device: str) -> Any:
    """A ``StaticCache`` of ``context + 1`` slots per sequence whose first ``context`` hold random K/V."""
    torch, transformers = _lib("torch"), _lib("transformers")
    config, dtype = model.config, model.dtype
    head_dim = config.hidden_size // config.num_attention_heads
    # Keyword arguments both transformers 4.4x (max_batch_size/device/dtype) and 5.x (which ignores them) accept.
    cache = transformers.StaticCache(
        config=config, max_batch_size=batch, max_cache_len=context + 1, device=device, dtype=dtype
    )
    shape = (batch, config.num_key_value_heads, context, head_dim)
    positions = {"cache_position": torch.arange(context, device=device)}
    for layer in range(config.num_hidden_layers):
        keys = torch.randn(shape, device=device, dtype=dtype)
        cache.update(keys, torch.randn_like(keys), layer, positions)
        del keys  # one layer's temporaries at a time (see decode_memory_bytes)
    if int(cache.get_seq_length()) != context:
        raise RuntimeError(f"static cache holds {int(cache.get_seq_length())} tokens, expected {context}")
    return cache


def measure_decode(
    model: Any, batch: int, context: int, grid: Grid, device: str, sync: Callable[[], None]
) -> ProfilePoint:
    """Time one decode step of ``batch`` sequences at ``context`` cached tokens each."""
    torch = _lib("torch")
    cache = _filled_cache(model, batch, context, device)
    ids = torch.randint(0, model.config.vocab_size, (batch, 1), device=device)
    kwargs: dict[str, Any] = {"position_ids": torch.full((batch, 1), context, device=device)}
    layers = list(getattr(cache, "layers", ()))
    # transformers 5 tracks the fill level per layer (rewound below); 4.x writes where cache_position says.
    rewindable = bool(layers) and all(hasattr(layer, "cumulative_length") for layer in layers)
    if not rewindable:
        kwargs["cache_position"] = torch.tensor([context], device=device)

    def step() -> object:
        return model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1, **kwargs)

    def reset() -> None:
        for layer in layers if rewindable else ():
            layer.cumulative_length.fill_(context)

    # The cache dies with this frame on return, before the caller empties the allocator cache.
    return ProfilePoint("decode", batch, context, time_runs(step, reset, sync, grid.warmup, grid.repeats))


def memory_budget_bytes(device: str, fraction: float) -> int:
    """Memory a decode point may use: ``fraction`` of what is free now (after the weights are loaded)."""
    if device.startswith("cuda"):
        free, _total = _lib("torch").cuda.mem_get_info()
        return int(free * fraction)
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * fraction)


def _is_oom(error: BaseException) -> bool:
    oom = getattr(_lib("torch"), "OutOfMemoryError", None)  # torch.cuda.OutOfMemoryError, re-exported
    return (oom is not None and isinstance(error, oom)) or "out of memory" in str(error).lower()


def _resolve_device_dtype(device: str, dtype: str) -> tuple[Any, str]:
    torch = _lib("torch")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("device", f"{device!r} requested but torch {torch.__version__} sees no CUDA device")
    if device != "cpu" and not device.startswith("cuda"):
        raise ConfigError("device", f"must be cpu or cuda[:N], got {device!r}")
    if dtype not in DTYPES:
        raise ConfigError("dtype", f"must be one of {', '.join(DTYPES)}, got {dtype!r}")
    name = ("bfloat16" if device.startswith("cuda") else "float32") if dtype == "auto" else dtype
    return getattr(torch, name), name


def _measure_safely(measure: Callable[[], ProfilePoint], kind: str, batch: int, tokens: int) -> ProfilePoint:
    """One point; an out-of-memory error marks it skipped (and frees the allocator's cache) instead of aborting."""
    try:
        point = measure()
    except Exception as error:  # only out-of-memory is tolerated; everything else is re-raised
        if not _is_oom(error):
            raise
        point = ProfilePoint(kind, batch, tokens, skipped=f"out of memory: {str(error).splitlines()[0][:80]}")
    torch = _lib("torch")
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # each decode point allocates a differently sized cache
    return point


def measure_grid(
    model: Any, grid: Grid, device: str, sync: Callable[[], None], kv_per_token: int, budget: int
) -> list[ProfilePoint]:
    """Every prefill point, then every decode point (batches outer); decode points over budget are skipped."""
    points = []
    with _lib("torch").inference_mode():
        for n in grid.prefill_tokens:
            measure = functools.partial(measure_prefill, model, n, grid, device, sync)
            points.append(_measure_safely(measure, "prefill", 1, n))
            print(f"prefill N={n}: {points[-1].median_s or points[-1].skipped}", file=sys.stderr)
        for b, c, reason in plan_decode(grid, kv_per_token, model.config.num_hidden_layers, budget):
            if reason is None:
                measure = functools.partial(measure_decode, model, b, c, grid, device, sync)
                point = _measure_safely(measure, "decode", b, c)
            else:
                point = ProfilePoint("decode", b, c, skipped=reason)
            points.append(point)
            print(f"decode B={b} C={c}: {point.median_s or point.skipped}", file=sys.stderr)
    return points


def _graph_points(
    dims: dict[str, Any], grid: Grid, device: str, dtype: Any, kv: int, budget: int, quick: bool, fused: bool = False
) -> Any:
    """``(weight bytes, points)`` of the plain forward, one CUDA graph per shape (eager on CPU)."""
    torch = _lib("torch")
    tiny = dims["name"] == "tiny-llama"
    long_chunks, long_decodes = gpu_graph.long_context_grid(tiny, quick)
    mixed = gpu_graph.mixed_grid(tiny, quick) + long_chunks
    positions = max(
        grid.max_positions,
        *(p + cp + 1 for p, cp, _, c in mixed),
        *(c + 1 for *_, c in mixed),
        *(c + 1 for _, c in long_decodes),
    )
    with torch.inference_mode():
        model = gpu_graph.PlainModel(torch, dims, device, dtype, positions, fused)
        plan = plan_decode(grid, kv, dims["layers"], budget)
        for batch, context in long_decodes:  # each long decode is planned against the same memory budget
            plan += plan_decode(Grid((1,), (batch,), (context,), 0, 1), kv, dims["layers"], budget)
        points = gpu_graph.graph_points(torch, model, grid, mixed, _measure_safely, plan)
    return model.weight_bytes(), points


def run_profile(
    device: str,
    dtype: str,
    tiny: bool,
    quick: bool,
    gpu: str,
    budget_gib: float | None,
    engine: str = "transformers",
    model_name: str = MODEL,
    fused: bool = False,
) -> ProfileResult:
    """Build the model and measure the grid (with a KV capacity estimate on CUDA)."""
    torch = _lib("torch")
    torch.manual_seed(0)
    torch_dtype, dtype_name = _resolve_device_dtype(device, dtype)
    grid, dims = grid_for(tiny, quick), model_dims(tiny, model_name)
    cuda = device.startswith("cuda")
    kv_per_token = 2 * dims["layers"] * dims["kv_heads"] * (dims["hidden"] // dims["heads"]) * torch_dtype.itemsize
    budget = int(budget_gib * 2**30) if budget_gib else memory_budget_bytes(device, 0.85)
    if engine == "graph":
        weight_bytes, points = _graph_points(dims, grid, device, torch_dtype, kv_per_token, budget, quick, fused)
        version = f"none: plain PyTorch forward, {'CUDA graph per shape' if cuda else 'eager on CPU'}"
        if fused:
            version += ", each layer compiled by torch.compile (inductor)"
    else:
        model = build_model(dims, grid.max_positions, device, torch_dtype)
        sync: Callable[[], None] = torch.cuda.synchronize if cuda else (lambda: None)
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        points = measure_grid(model, grid, device, sync, kv_per_token, budget)
        version = str(_lib("transformers").__version__)
    result = ProfileResult(
        device=torch.cuda.get_device_name(device) if cuda else f"CPU ({os.cpu_count()} cores)",
        torch_version=str(torch.__version__),
        transformers_version=version,
        dtype=dtype_name,
        model={**dims, "weight_bytes": weight_bytes, "kv_bytes_per_token": kv_per_token},
        warmup=grid.warmup,
        repeats=grid.repeats,
        memory_budget_bytes=budget,
        points=points,
        roofline_gpu=None if tiny else gpu,
        roofline_model=None if tiny else model_name,
    )
    if engine == "graph" and cuda:
        result.timing = "CUDA events around one replay"
    if cuda:
        total = torch.cuda.get_device_properties(device).total_memory
        result.kv_blocks_estimate = kv_blocks_estimate(total, weight_bytes, kv_per_token, BLOCK_SIZE)
    return result


def write_reports(out: Path, result: ProfileResult) -> list[Path]:
    """``gpu_profile.json``, ``gpu_profile.md`` and (when the points identify it) ``gpu_profile_fit.json``."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "gpu_profile.json"]
    written[0].write_text(json.dumps(result.to_json_dict(), indent=1, allow_nan=False) + "\n")
    source = {
        "kind": "gpu_profile",
        "engine": f"transformers {result.transformers_version} eager (torch {result.torch_version})",
        "device": result.device,
        "model": result.model.get("name"),
        "dtype": result.dtype,
    }
    fit: MeasuredProfile | None = None
    fit_error = None
    try:
        capacity = result.kv_blocks_estimate
        fit = fit_points(result.points, source, capacity, BLOCK_SIZE if capacity is not None else None)
        written.append(fit.save(out / "gpu_profile_fit.json"))
    except ConfigError as error:
        fit_error = str(error)
    written.append(out / "gpu_profile.md")
    written[-1].write_text(render_markdown(result, fit, fit_error))
    if result.roofline_gpu is not None and result.roofline_model is not None:
        written.append(write_stack_fit(out / "stack_fit.json", parse_measured(result.to_json_dict())))
    return written


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m slosched.perf.gpu_profile", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the JSON, Markdown and fit files")
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default cuda)")
    parser.add_argument("--dtype", default="auto", choices=DTYPES, help="auto: bfloat16 on CUDA, float32 on CPU")
    parser.add_argument("--tiny", action="store_true", help="a tiny Llama and small grids (CPU tests)")
    parser.add_argument("--quick", action="store_true", help="fewer points and runs")
    parser.add_argument("--gpu", default="H100", help="hardware.json GPU for the roofline comparison (default H100)")
    parser.add_argument("--memory-budget-gib", type=float, default=None, help="cap on a decode point's KV memory")
    parser.add_argument("--render", type=Path, default=None, help="re-render reports from this gpu_profile.json")
    parser.add_argument(
        "--engine", default="transformers", choices=("transformers", "graph"), help="graph: plain forward, CUDA graphs"
    )
    parser.add_argument(
        "--fused", action="store_true", help="graph engine: each layer compiled by torch.compile (fused kernels)"
    )
    parser.add_argument("--model", default=MODEL, help=f"hardware.json model to build (default {MODEL})")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.fused and args.engine != "graph":
        print("error: --fused: needs --engine graph", file=sys.stderr)
        return 2
    try:
        if args.render is not None:
            result = ProfileResult.from_json_dict(json.loads(args.render.read_text()))
        else:
            result = run_profile(
                args.device,
                args.dtype,
                args.tiny,
                args.quick,
                args.gpu,
                args.memory_budget_gib,
                args.engine,
                args.model,
                args.fused,
            )
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in write_reports(args.out, result):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
