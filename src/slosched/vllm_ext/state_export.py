"""The engine state the plugin publishes for routers (PRISM) and the gateway: a small JSON file.

Top-level keys are NexusSched's ``s_e`` (``policies/engine/nexus_state.EngineState``, so
``EngineState.from_json`` reads the file): ``latency_s`` (predicted duration of the next step),
``pending_prefill_tokens`` and ``pending_requests`` (work not yet done), ``free_kv_tokens`` (free KV minus
what queued requests will claim: prompt plus predicted output, or max tokens when unpredicted) and
``peak_tokens_per_s`` (capacity). A policy that exports these itself (LENS) overrides the generic values.
Extra keys: ``step_model`` (the online linear step-time fit), ``engine`` (queue and KV counters),
``plugin`` (policy, control state, step and overhead statistics, metadata problems), and the data's age:
``snapshot_unix_s`` (when the engine computed it, on its scheduling thread) and ``written_unix_s`` (the
writer thread's heartbeat; a stale heartbeat means a dead engine, a stale snapshot an idle one).

The file is replaced atomically (write a temporary file, then rename), so readers never see half a
document.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slosched.perf.linear import LinearStepPredictor
from slosched.vllm_ext.views import VllmEngineView, VllmSeq

_DECODE_CONTEXT_GUESS = 512  # tokens per request when sizing the peak decode step


def _claim_tokens(seq: VllmSeq) -> int:
    request = seq.request
    output = request.predicted_output_tokens if request.predicted_output_tokens > 0 else request.max_output_tokens
    return int(seq.num_prompt_tokens + output)


def core_state(view: VllmEngineView, predictor: LinearStepPredictor, max_tokens: int) -> dict[str, float]:
    """``s_e`` from the engine's queues and the step-time belief."""
    spec = view.spec
    decoding = chunk_tokens = decode_ctx = 0
    for seq in view.running_seqs:
        remaining = seq.raw.num_tokens - seq.raw.num_computed_tokens
        if seq.raw.is_prefill_chunk:
            chunk_tokens += max(remaining, 0)
        else:
            decoding += 1
            decode_ctx += seq.num_computed_tokens
    waiting_tokens = sum(max(seq.num_prompt_tokens - seq.num_computed_tokens, 0) for seq in view.waiting)
    pending_prefill = chunk_tokens + waiting_tokens
    next_prefill = min(pending_prefill, max(max_tokens - decoding, 0))
    latency = predictor.predict_s(next_prefill, 0, decoding, decode_ctx) if next_prefill or decoding else 0.0
    claims = sum(_claim_tokens(seq) for seq in view.waiting)
    prefill_peak = max_tokens / max(predictor.predict_s(max_tokens, 0, 0, 0), 1e-9)
    batch = max(spec.max_running, 1)
    decode_peak = batch / max(predictor.predict_s(0, 0, batch, batch * _DECODE_CONTEXT_GUESS), 1e-9)
    return {
        "latency_s": float(latency),
        "pending_prefill_tokens": float(pending_prefill),
        "pending_requests": float(len(view.waiting) + len(view.running_seqs)),
        "free_kv_tokens": float(view.num_free_kv_blocks * spec.block_size - claims),
        "peak_tokens_per_s": float(max(prefill_peak, decode_peak)),
    }


def step_model(predictor: LinearStepPredictor) -> dict[str, float]:
    c = predictor.coefficients
    return {
        "c0_s": c.c0_s,
        "prefill_s_per_token": c.prefill_s_per_token,
        "decode_s_per_seq": c.decode_s_per_seq,
        "context_s_per_token": c.context_s_per_token,
        "num_observations": float(predictor.num_observations),
    }


def finite(value: Any) -> Any:
    """JSON has no infinity or NaN: they become null (readers treat null peak as unbounded)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {key: finite(item) for key, item in value.items()}
    return value


def write_atomic(path: Path, document: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(finite(document), separators=(",", ":"), sort_keys=True))
    os.replace(tmp, path)


class StateWriter:
    """Daemon thread writing the latest snapshot every ``interval_s`` with a fresh heartbeat. The
    scheduling thread only swaps in a new (immutable) snapshot reference; no scheduler state is read here."""

    def __init__(self, path: Path, interval_s: float) -> None:
        self.path = path
        self.interval_s = interval_s
        self._snapshot: Mapping[str, Any] | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.num_writes = 0
        self.last_error = ""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._loop, name="slosched-state", daemon=True)
        self._thread.start()

    def publish(self, snapshot: Mapping[str, Any], immediately: bool = False) -> None:
        self._snapshot = snapshot
        if immediately:
            self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.write_now()
            self._wake.wait(self.interval_s)
            self._wake.clear()

    def write_now(self) -> None:
        snapshot = self._snapshot
        if snapshot is None:
            return
        try:
            write_atomic(self.path, {**snapshot, "written_unix_s": time.time(), "interval_s": self.interval_s})
            self.num_writes += 1
        except OSError as error:  # a full disk must not take the engine down; the age shows it
            self.last_error = str(error)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=2.0)
        self.write_now()


def read_state(path: Path, now_unix_s: float | None = None) -> dict[str, Any] | None:
    """The exported state with ``age_s`` (seconds since the engine computed it) and ``heartbeat_age_s``
    added; None when the file does not exist (yet) or cannot be parsed."""
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text())
        if isinstance(data, dict):
            now = time.time() if now_unix_s is None else now_unix_s
            data["age_s"] = now - float(data.get("snapshot_unix_s", 0.0))
            data["heartbeat_age_s"] = now - float(data.get("written_unix_s", 0.0))
            return data
    return None
