"""Belief about output length learned from completed requests (an ``OutputLengthPredictor``).

Per ``request.predictor_key`` (template/stage) a running mean of output tokens, optionally of the
output/prompt ratio; a global mean before the key has enough samples; a prior before anything
completed. Predictions are always clipped to ``[1, request.max_output_tokens]``.

``mode="bucket"`` refines the key's mean by prompt length: a running mean per half-octave of prompt tokens
(``prompt_bucket``), trusted once it has ``BUCKET_MIN_SAMPLES`` completions, else the key's mean. Calls of one
template are often a mixture of applications whose prompt lengths cluster and whose outputs differ by cluster:
on the stack bench's chat calls (Azure conversation rows) the template's mean ranks outputs at a Spearman 0.05,
the buckets at 0.58 (``perf/length_error.py``; the table in docs/stack.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.request import Request

MODES = ("mean", "ratio", "bucket")
BUCKETS_PER_OCTAVE = 2
BUCKET_MIN_SAMPLES = 5  # completions a prompt-length bucket needs before its mean is trusted


@dataclass(slots=True)
class _RunningStats:
    """Running means of output tokens and of output/prompt tokens over ``count`` completions."""

    count: int = 0
    mean_tokens: float = 0.0
    mean_ratio: float = 0.0

    buckets: dict[int, _RunningStats] | None = None  # by ``prompt_bucket`` (mode "bucket" only)

    def add(self, output_tokens: int, ratio: float) -> None:
        """One completion of ``output_tokens``, ``ratio`` of them per prompt token."""
        count = self.count + 1
        self.count = count
        self.mean_tokens += (output_tokens - self.mean_tokens) / count
        self.mean_ratio += (ratio - self.mean_ratio) / count


def prompt_bucket(prompt_tokens: int) -> int:
    """The half-octave of ``prompt_tokens`` (1 token: 0; 2: 2; 3: 3; 4: 4; ...): buckets as wide as
    their lengths' own spread, so short prompts are told apart and long ones pool enough samples."""
    return int(math.log2(max(prompt_tokens, 1)) * BUCKETS_PER_OCTAVE)


class HistoryOutputPredictor:
    """Learns only through ``observe``, which runtimes call for completed requests; ``predict`` has no
    side effects, so in-flight, failed or cancelled requests never influence a prediction.

    ``mode="mean"`` predicts the key's mean output; ``mode="ratio"`` scales the request's prompt length
    by the key's mean output/prompt ratio (for stages whose output tracks their input); ``mode="bucket"``
    predicts the mean of the key's calls with prompts in the same half-octave once it has
    ``BUCKET_MIN_SAMPLES`` of them (the key's mean before).
    ``min_samples`` completions are needed before a key (or the global mean) is trusted.
    At most ``max_keys`` keys are kept, the least recently observed evicted first: keys come from clients
    (a gateway's ``x-job-stage``), so without a bound a client could grow the map without end.
    """

    __slots__ = ("_bucket", "_by_key", "_global", "_ratio", "default_tokens", "max_keys", "min_samples", "mode")

    def __init__(
        self, default_tokens: int = 128, min_samples: int = 1, mode: str = "mean", max_keys: int = 4096
    ) -> None:
        if mode not in MODES:
            raise ConfigError("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
        if default_tokens < 1 or min_samples < 1 or max_keys < 1:
            raise ConfigError("HistoryOutputPredictor", "default_tokens, min_samples and max_keys must be >= 1")
        self.max_keys = max_keys
        self.default_tokens = default_tokens
        self.min_samples = min_samples
        self.mode = mode
        self._ratio = mode == "ratio"
        self._bucket = mode == "bucket"
        self._by_key: dict[str, _RunningStats] = {}
        self._global = _RunningStats()

    def predict(self, request: Request) -> float:
        upper = float(max(1, request.max_output_tokens))
        stats = self._by_key.get(request.predictor_key)
        if stats is None or stats.count < self.min_samples:
            stats = self._global  # the key's own mean is not trusted yet
        elif self._bucket and stats.buckets is not None:
            bucket = stats.buckets.get(prompt_bucket(request.prompt_tokens))
            if bucket is not None and bucket.count >= BUCKET_MIN_SAMPLES:
                stats = bucket
        if stats.count >= self.min_samples:
            estimate = stats.mean_ratio * request.prompt_tokens if self._ratio else stats.mean_tokens
        else:
            estimate = float(self.default_tokens)
        return min(max(estimate, 1.0), upper)

    def observe(self, request: Request, output_tokens: int) -> None:
        """Record one completed request's true output length (ignored when < 1: nothing was generated)."""
        if output_tokens < 1:
            return
        key = request.predictor_key
        stats = self._by_key.pop(key, None)  # re-inserted last: dict order is least recently observed first
        if stats is None:
            stats = _RunningStats()
            if len(self._by_key) >= self.max_keys:
                del self._by_key[next(iter(self._by_key))]
        self._by_key[key] = stats
        ratio = output_tokens / max(1, request.prompt_tokens)
        stats.add(output_tokens, ratio)
        self._global.add(output_tokens, ratio)
        if self._bucket:  # at most ~2 x log2(longest prompt) buckets a key: bounded with the keys
            buckets = stats.buckets if stats.buckets is not None else {}
            stats.buckets = buckets
            buckets.setdefault(prompt_bucket(request.prompt_tokens), _RunningStats()).add(output_tokens, ratio)

    def num_samples(self, key: str | None = None) -> int:
        """Completions learned from, for one key or (None) in total."""
        if key is None:
            return self._global.count
        stats = self._by_key.get(key)
        return 0 if stats is None else stats.count
