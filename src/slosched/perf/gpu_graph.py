"""CUDA-graph mode of the GPU profile: a plain PyTorch forward of a random-weight model, one graph per shape.

The model is built from ``hardware.json`` dimensions (any model there, or the tiny test shape): bf16 GEMMs,
SDPA attention over a dense KV cache, rotary, RMSNorm, SiLU-gated MLP, the LM head on the sampled rows; it
is the project's ``shared/tools/gpu_floor.py`` forward. On CUDA each step shape is captured in one CUDA graph
and replays are timed with CUDA events (kernel launches cost what they cost under vLLM's graphs); on CPU the
very same forward runs eagerly, which is what the tests run. Three step kinds: prefill (one prompt),
decode (B sequences at C cached tokens) and mixed (a prompt chunk of P tokens at Cp cached tokens beside B
decodes, one forward: the chunk attends to all its Cp + P keys, non-causal when Cp > 0). torch is imported
lazily by the caller (:mod:`slosched.perf.gpu_profile`), which passes the module in.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from typing import Any

from slosched.perf.gpu_profile_data import ProfilePoint

ROPE_THETA = 500000.0


class PlainModel:
    """Random weights of a decoder-only model with ``dims`` (hidden, intermediate, layers, heads, kv_heads, vocab)."""

    def __init__(
        self, torch: Any, dims: dict[str, Any], device: str, dtype: Any, max_positions: int, fused: bool = False
    ) -> None:
        self.torch, self.dims, self.device, self.dtype = torch, dims, device, dtype
        hidden, heads, kv_heads = dims["hidden"], dims["heads"], dims["kv_heads"]
        self.head_dim = hidden // heads
        gen = torch.Generator(device=device).manual_seed(0)

        def weight(*shape: int) -> Any:
            return torch.randn(*shape, device=device, dtype=dtype, generator=gen) * 0.02

        def ones() -> Any:
            return torch.ones(hidden, device=device, dtype=dtype)

        qkv = (heads + 2 * kv_heads) * self.head_dim
        self.layers = [
            {
                "ln1": ones(),
                "wqkv": weight(hidden, qkv),
                "wo": weight(heads * self.head_dim, hidden),
                "ln2": ones(),
                "wgu": weight(hidden, 2 * dims["intermediate"]),
                "wd": weight(dims["intermediate"], hidden),
            }
            for _ in range(dims["layers"])
        ]
        self.emb, self.lm, self.lnf = weight(dims["vocab"], hidden), weight(hidden, dims["vocab"]), ones()
        steps = torch.arange(0, self.head_dim, 2, device=device, dtype=torch.float32) / self.head_dim
        angles = torch.outer(torch.arange(max_positions, device=device, dtype=torch.float32), ROPE_THETA**-steps)
        self.cos = torch.cat([angles.cos()] * 2, -1).to(dtype)
        self.sin = torch.cat([angles.sin()] * 2, -1).to(dtype)
        # ``fused``: one layer compiled by torch.compile (inductor fuses the norms, rotary, SiLU-mul and the
        # residual adds into few kernels, as a current engine's kernels do), the same code for every layer:
        # a compile per step shape (the shape's lengths are constants of the graph), not per layer.
        self.layer: Callable[..., Any] = self._layer
        if fused:
            for limit in ("cache_size_limit", "recompile_limit"):  # one compile per shape: many shapes
                if hasattr(torch._dynamo.config, limit):
                    setattr(torch._dynamo.config, limit, 1024)
            self.layer = torch.compile(self._layer, dynamic=False)

    def weight_bytes(self) -> int:
        tensors = [t for layer in self.layers for t in layer.values()] + [self.emb, self.lm, self.lnf]
        return sum(int(t.numel()) * int(t.element_size()) for t in tensors)

    def kv_cache(self, batch: int, slots: int, random: bool) -> tuple[list[Any], list[Any]]:
        """Per-layer K and V caches of ``batch`` x ``slots`` tokens (random values cost what real ones do)."""
        make = self.torch.randn if random else self.torch.zeros
        shape = (batch, self.dims["kv_heads"], slots, self.head_dim)
        keys = [make(shape, device=self.device, dtype=self.dtype) for _ in self.layers]
        return keys, [make(shape, device=self.device, dtype=self.dtype) for _ in self.layers]

    def _rms(self, x: Any, w: Any) -> Any:
        xf = x.float()
        return (xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * w

    @staticmethod
    def _rope(torch: Any, x: Any, cos: Any, sin: Any) -> Any:
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin

    def _mlp(self, x: Any, layer: dict[str, Any]) -> Any:
        gate, up = (self._rms(x, layer["ln2"]) @ layer["wgu"]).chunk(2, -1)
        return x + (self.torch.nn.functional.silu(gate) * up) @ layer["wd"]

    def _chunk_attention(self, q: Any, k: Any, v: Any, keys: Any, values: Any, cached: int) -> Any:
        """A prompt chunk of P tokens at ``cached`` tokens: K/V written at [cached, cached + P), then attention."""
        torch, (heads, kv_heads), d = self.torch, (self.dims["heads"], self.dims["kv_heads"]), self.head_dim
        n = q.shape[0]
        cos, sin = self.cos[cached : cached + n].unsqueeze(0), self.sin[cached : cached + n].unsqueeze(0)
        q = self._rope(torch, q.view(n, heads, d).transpose(0, 1), cos, sin).unsqueeze(0)
        keys[0, :, cached : cached + n].copy_(self._rope(torch, k.view(n, kv_heads, d).transpose(0, 1), cos, sin))
        values[0, :, cached : cached + n].copy_(v.view(n, kv_heads, d).transpose(0, 1))
        rep = heads // kv_heads
        kk = keys[0, :, : cached + n].repeat_interleave(rep, 0).unsqueeze(0)
        vv = values[0, :, : cached + n].repeat_interleave(rep, 0).unsqueeze(0)
        out = torch.nn.functional.scaled_dot_product_attention(q, kk, vv, is_causal=cached == 0)
        return out[0].transpose(0, 1).reshape(n, heads * d)

    def _decode_attention(self, q: Any, k: Any, v: Any, keys: Any, values: Any, ctx: int) -> Any:
        """B decoding sequences at ``ctx`` cached tokens: the new K/V at slot ``ctx``, grouped-query attention."""
        torch, (heads, kv_heads), d = self.torch, (self.dims["heads"], self.dims["kv_heads"]), self.head_dim
        b = q.shape[0]
        cos, sin = self.cos[ctx], self.sin[ctx]
        q = self._rope(torch, q.view(b, kv_heads, heads // kv_heads, d), cos, sin)
        keys[:, :, ctx : ctx + 1].copy_(self._rope(torch, k.view(b, kv_heads, 1, d), cos, sin))
        values[:, :, ctx : ctx + 1].copy_(v.view(b, kv_heads, 1, d))
        return torch.nn.functional.scaled_dot_product_attention(q, keys, values).reshape(b, heads * d)

    def step(
        self,
        prompt: Any,
        prompt_cache: tuple[list[Any], list[Any]] | None,
        cached: int,
        decode: Any,
        decode_cache: tuple[list[Any], list[Any]] | None,
        ctx: int,
    ) -> Any:
        """One forward of a prompt chunk (``prompt`` ids or None) and/or decodes (``decode`` ids or None)."""
        parts = [ids for ids in (prompt, decode) if ids is not None]
        n = 0 if prompt is None else int(prompt.shape[0])
        x = self.torch.cat([self.emb[ids] for ids in parts], 0)
        for index, layer in enumerate(self.layers):
            chunk = None if prompt_cache is None else (prompt_cache[0][index], prompt_cache[1][index])
            decodes = None if decode_cache is None else (decode_cache[0][index], decode_cache[1][index])
            x = self.layer(x, layer, chunk, decodes, n, cached, ctx)
        rows = x[n - 1 :] if n else x  # the prompt's last position and every decode row are sampled
        return self._rms(rows, self.lnf) @ self.lm

    def _layer(
        self,
        x: Any,
        layer: dict[str, Any],
        chunk: tuple[Any, Any] | None,
        decodes: tuple[Any, Any] | None,
        n: int,
        cached: int,
        ctx: int,
    ) -> Any:
        """One decoder layer over the chunk's ``n`` rows and the decode rows after them (K/V caches in place)."""
        torch, heads, kv_heads, d = self.torch, self.dims["heads"], self.dims["kv_heads"], self.head_dim
        q, k, v = (self._rms(x, layer["ln1"]) @ layer["wqkv"]).split([heads * d, kv_heads * d, kv_heads * d], -1)
        outs = []
        if chunk is not None:
            outs.append(self._chunk_attention(q[:n], k[:n], v[:n], chunk[0], chunk[1], cached))
        if decodes is not None:
            outs.append(self._decode_attention(q[n:], k[n:], v[n:], decodes[0], decodes[1], ctx))
        return self._mlp(x + torch.cat(outs, 0) @ layer["wo"], layer)


def timed(torch: Any, fn: Callable[[], object], device: str, warmup: int, repeats: int) -> tuple[float, ...]:
    """Seconds of ``repeats`` runs: CUDA-graph replays timed by CUDA events on CUDA, eager calls on CPU."""
    cuda = device.startswith("cuda")
    run: Callable[[], object] = fn
    if cuda:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        run = graph.replay
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            begin = time.perf_counter()
            run()
            times.append(time.perf_counter() - begin)
    return tuple(times)


def measure_step(
    torch: Any, model: PlainModel, shape: tuple[int, int, int, int], warmup: int, repeats: int
) -> tuple[float, ...]:
    """Times of one step ``(P, Cp, B, C)``: a P-token chunk at Cp cached tokens (P = 0: none) beside B decodes at
    C cached tokens each (B = 0: none); caches are allocated for this shape only."""
    prompt_tokens, cached, batch, ctx = shape
    vocab, device = model.dims["vocab"], model.device
    prompt = torch.randint(0, vocab, (prompt_tokens,), device=device) if prompt_tokens else None
    decode = torch.randint(0, vocab, (batch,), device=device) if batch else None
    prompt_cache = model.kv_cache(1, cached + prompt_tokens, cached > 0) if prompt_tokens else None
    decode_cache = model.kv_cache(batch, ctx + 1, True) if batch else None

    def step() -> object:
        return model.step(prompt, prompt_cache, cached, decode, decode_cache, ctx)

    return timed(torch, step, device, warmup, repeats)


def mixed_grid(tiny: bool, quick: bool) -> tuple[tuple[int, int, int, int], ...]:
    """Mixed steps ``(P, Cp, B, C)``: the 18 measured on H100 (full), two (quick) or two tiny ones."""
    if tiny:
        return ((32, 0, 4, 64), (32, 64, 4, 64))
    if quick:
        return ((512, 0, 64, 1024), (512, 2048, 64, 1024))
    return tuple((p, cp, b, 1024) for p in (256, 512, 2048) for cp in (0, 2048) for b in (16, 64, 128))


def long_context_grid(
    tiny: bool, quick: bool
) -> tuple[tuple[tuple[int, int, int, int], ...], tuple[tuple[int, int], ...]]:
    """Long-context steps (the shared H100 set): prompt chunks of 512/2048 tokens at 4k-16k cached tokens beside
    one decode at 1,024 (as mixed shapes), and decode batches ``(B, C)`` at 8k-32k; none in quick mode."""
    if tiny:
        return ((16, 128, 1, 64),), ((2, 256),)
    if quick:
        return (), ()
    chunks = tuple((p, cp, 1, 1024) for p in (512, 2048) for cp in (4096, 8192, 16384))
    return chunks, ((16, 8192), (16, 16384), (32, 8192), (8, 32768))


def graph_points(
    torch: Any,
    model: PlainModel,
    grid: Any,
    mixed: tuple[tuple[int, int, int, int], ...],
    measure_safely: Callable[[Callable[[], Any], str, int, int], Any],
    decode_plan: list[tuple[int, int, str | None]],
) -> list[Any]:
    """Prefill, decode (as planned: skipped ones keep their reason) and mixed points, one graph per shape."""

    def point(kind: str, shape: tuple[int, int, int, int]) -> Any:
        prompt, cached, batch, ctx = shape
        times = measure_step(torch, model, shape, grid.warmup, grid.repeats)
        if kind == "prefill":
            return ProfilePoint("prefill", 1, prompt, times)
        if kind == "decode":
            return ProfilePoint("decode", batch, ctx, times)
        return ProfilePoint("mixed", batch, prompt, times, None, cached, ctx)

    shapes = [("prefill", (n, 0, 0, 0)) for n in grid.prefill_tokens]
    shapes += [("decode", (0, 0, b, c)) for b, c, _ in decode_plan]
    shapes += [("mixed", shape) for shape in mixed]
    skips = {(0, 0, b, c): reason for b, c, reason in decode_plan if reason is not None}
    points = []
    for kind, shape in shapes:
        batch, tokens = (1, shape[0]) if kind == "prefill" else (shape[2], shape[3] if kind == "decode" else shape[0])
        if shape in skips and kind == "decode":
            points.append(ProfilePoint("decode", batch, tokens, skipped=skips[shape]))
        else:
            points.append(measure_safely(functools.partial(point, kind, shape), kind, batch, tokens))
        # One line per shape as it is measured: a run cut short by a time limit still leaves its figures.
        print(f"{kind} {shape}: {points[-1].median_s or points[-1].skipped}", file=sys.stderr, flush=True)
    return points
