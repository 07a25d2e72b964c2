"""Router-facing views of live backends (implements ``core.views.InstanceView``).

A view combines the gateway's own accounting (exact for traffic through this gateway, never stale) with
the backend's scraped vLLM gauges (which also see other clients, but lag by up to a scrape interval):

- ``num_waiting`` = requests queued at the gateway for this backend + vLLM's own waiting queue (scraped);
- ``num_running`` = forwarded-and-unfinished requests not waiting inside vLLM, at least vLLM's scraped
  running count;
- ``outstanding_decode_tokens`` = for every queued or forwarded request, its predicted output length
  (belief) minus the tokens already streamed back, at least one token;
- KV blocks from ``kv_cache_usage_perc`` times the configured block count;
- ``exported`` = the slosched plugin's engine state (PRISM's ``s_e``, scraped from ``/metrics``) plus the
  calls queued here for the backend, with its ``age_s``, while younger than ``engine_state_max_age_s``;
  otherwise what the gateway's own engine policy exports over its queue (often nothing, and then PRISM
  estimates ``s_e`` from the fields above). See ``gateway/backends/engine_state.py``;
- ``cached_prefix_tokens`` from the gateway's approximate prefix index of the backend (what it was sent
  recently, ``prefix_index.py``): vLLM's cache itself is out of the gateway's sight.

Views read live state: a view made for one routing decision stays consistent within that decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from slosched.core.belief import StepPredictor
from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.gateway.backends.backend import Backend
from slosched.gateway.backends.engine_state import exported_mapping
from slosched.gateway.dispatch.queues import InstanceQueue


class BackendView:
    """``InstanceView`` of one backend at ``snapshot_s``; ``index`` is the backend's config position."""

    __slots__ = ("_backend", "_exported", "_queue", "snapshot_s")

    def __init__(self, backend: Backend, queue: InstanceQueue, snapshot_s: float) -> None:
        self._backend = backend
        self._queue = queue
        self.snapshot_s = snapshot_s
        self._exported: Mapping[str, float] | None = None

    @property
    def index(self) -> int:
        return self._queue.index

    @property
    def spec(self) -> InstanceSpec:
        return self._queue.spec

    @property
    def num_running(self) -> int:
        scraped = self._backend.metrics
        own = max(self._queue.num_running - int(scraped.num_waiting), 0)
        return max(own, int(scraped.num_running))

    @property
    def num_waiting(self) -> int:
        return len(self._queue.waiting) + int(self._backend.metrics.num_waiting)

    @property
    def waiting_prefill_tokens(self) -> int:
        return self._queue.waiting_prefill_tokens

    @property
    def waiting_requests(self) -> Sequence[Request]:
        return self._queue.waiting_requests

    @property
    def outstanding_decode_tokens(self) -> float:
        total = 0.0
        # Every sequence of a call decodes (a call of n=16 is sixteen sequences' work, not one).
        for seq in self._queue.waiting:
            total += seq.sequences * max(seq.request.predicted_output_tokens, 1.0)
        for seq in self._queue.running_seqs:
            total += seq.sequences * max(seq.request.predicted_output_tokens - seq.num_output_tokens, 1.0)
        return total

    @property
    def num_free_kv_blocks(self) -> int:
        return self._queue.num_free_kv_blocks

    @property
    def num_kv_blocks(self) -> int:
        return self._queue.num_kv_blocks

    @property
    def step_predictor(self) -> StepPredictor:
        return self._queue.step_predictor

    @property
    def exported(self) -> Mapping[str, float]:
        if self._exported is None:  # exporters may cost O(batch): only when a router asks
            self._exported = self._live_exported()
            if self._exported is None:
                self._exported = self._queue.export_state()
        return self._exported

    def _live_exported(self) -> dict[str, float] | None:
        """The plugin's state when the backend exports a fresh one (a stale one is not routed on)."""
        metrics = self._backend.metrics
        if metrics.engine_state is None:
            return None
        max_age_s = self._backend.engine_state_max_age_s
        queue = self._queue
        return exported_mapping(
            metrics.engine_state,
            metrics.scraped_s,
            self.snapshot_s,
            max_age_s,
            queue.waiting_requests,
            queue.waiting_prefill_tokens,
        )

    def cached_prefix_tokens(self, request: Request) -> int:
        return self._queue.cached_prefix_tokens(request)
