"""The gateway's metric names, after vLLM's, and the deprecated names they replace.

The gateway exports under a ``slosched:`` prefix, as vLLM does under ``vllm:`` and the plugin under
``slosched:engine_*``: where the quantity is vLLM's the rest of the name is vLLM's
(``vllm:e2e_request_latency_seconds`` -> ``slosched:e2e_request_latency_seconds``), and the model label is
``model_name`` (vLLM's and llm-d's EPP's). The names used before (``slosched_request_latency_seconds{model}``,
...) are still exported for one release, copied from the new families at scrape time by
``DeprecatedAliases`` (so the hot path observes each value once), with ``model`` for ``model_name``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

# Family name (counters without ``_total``) -> its deprecated name. Docs: docs/serving.md, "Metrics".
DEPRECATED_NAMES: dict[str, str] = {
    "slosched:e2e_request_latency_seconds": "slosched_request_latency_seconds",
    "slosched:time_to_first_token_seconds": "slosched_ttft_seconds",
    "slosched:request_time_per_output_token_seconds": "slosched_tpot_seconds",
    "slosched:request_queue_time_seconds": "slosched_queue_seconds",
    "slosched:prompt_tokens": "slosched_prompt_tokens",
    "slosched:generation_tokens": "slosched_generation_tokens",
    "slosched:num_requests_waiting": "slosched_queue_length",
    "slosched:num_requests_running": "slosched_in_flight",
    "slosched:backend_up": "slosched_backend_up",
    "slosched:concurrency_window": "slosched_concurrency_window",
    "slosched:backend_ejected": "slosched_backend_ejected",
    "slosched:backend_ejections": "slosched_backend_ejections",
    "slosched:tenant_num_requests_waiting": "slosched_tenant_queue_length",
    "slosched:routed": "slosched_routed",
    "slosched:requests": "slosched_requests",
    "slosched:requests_accepted": "slosched_requests_accepted",
    "slosched:admission_rejections": "slosched_admission_rejections",
    "slosched:retries": "slosched_retries",
    "slosched:slo": "slosched_slo",
    "slosched:job_slo": "slosched_job_slo",
    "slosched:jobs": "slosched_jobs",
    "slosched:job_latency_seconds": "slosched_job_latency_seconds",
}
# Families added after the rename: never exported under an old name, so they have no alias.
NAMES_WITHOUT_ALIAS = ("slosched:prefix_index_queries", "slosched:prefix_index_hits")
MODEL_LABEL = "model_name"
_DEPRECATED_LABELS = {MODEL_LABEL: "model"}


class DeprecatedAliases(Collector):
    """Every family of ``families()`` named in ``DEPRECATED_NAMES`` again under its old name and labels,
    its help saying which name replaces it."""

    def __init__(self, families: Callable[[], Iterable[Metric]]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        aliases = []
        for family in self._families():
            old = DEPRECATED_NAMES.get(family.name)
            if old is None:
                continue
            alias = Metric(old, f"deprecated, use {family.name}: {family.documentation}", family.type)
            for sample in family.samples:
                labels = {_DEPRECATED_LABELS.get(key, key): value for key, value in sample.labels.items()}
                suffix = sample.name[len(family.name) :]
                alias.add_sample(old + suffix, labels, sample.value, sample.timestamp, sample.exemplar)
            aliases.append(alias)
        return aliases
