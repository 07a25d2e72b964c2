"""Results of a run: one record per request and per job (dataclasses, never sentinels)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from slosched.core.job import JobKind
from slosched.core.request import Outcome


@dataclass(slots=True)
class RequestRecord:
    id: str
    job_id: str
    stage: str
    instance: str
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    outcome: Outcome
    reason: str = ""
    first_scheduled_s: float = math.nan
    first_token_s: float = math.nan
    finish_s: float = math.nan
    cached_tokens: int = 0
    num_preemptions: int = 0
    deadline_s: float = math.inf
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None

    @property
    def token_slos_met(self) -> bool:
        """TTFT and TPOT within their SLOs (True when the request has none)."""
        if self.outcome is not Outcome.COMPLETED:
            return False
        if self.ttft_slo_s is not None and self.ttft_s > self.ttft_slo_s:
            return False
        return self.tpot_slo_s is None or self.tpot_s <= self.tpot_slo_s

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def latency_s(self) -> float:
        return self.finish_s - self.arrival_s

    @property
    def queueing_s(self) -> float:
        return self.first_scheduled_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        if self.output_tokens <= 1:
            return 0.0
        return (self.finish_s - self.first_token_s) / (self.output_tokens - 1)


@dataclass(slots=True)
class JobRecord:
    """``no_contention_s``: the job's latency alone on the fastest instance (noise-free truth)."""

    id: str
    kind: JobKind
    template: str
    arrival_s: float
    outcome: Outcome
    num_requests: int
    slo_s: float
    no_contention_s: float
    finish_s: float = math.nan
    reason: str = ""
    first_prefill_s: float = math.nan
    last_prefill_s: float = math.nan
    tenant: str = "default"

    @property
    def latency_s(self) -> float:
        return self.finish_s - self.arrival_s

    @property
    def deadline_met(self) -> bool:
        return self.outcome is Outcome.COMPLETED and self.latency_s <= self.slo_s * (1 + 1e-12)


@dataclass(slots=True)
class InstanceStats:
    name: str
    num_steps: int = 0
    busy_s: float = 0.0
    prefix_query_tokens: int = 0
    prefix_hit_tokens: int = 0
    num_preemptions: int = 0
    peak_kv_blocks_used: int = 0


@dataclass(slots=True)
class InstanceSeries:
    """An instance's state sampled every ``interval_s`` of simulated time (``times_s[k]``): requests
    waiting and running, KV blocks in use (of ``num_kv_blocks``) and the cumulative busy time, whose
    differences over the sampling interval give the utilisation. All lists have one entry per sample."""

    name: str
    num_kv_blocks: int
    interval_s: float
    times_s: list[float] = field(default_factory=list)
    num_waiting: list[int] = field(default_factory=list)
    num_running: list[int] = field(default_factory=list)
    kv_used_blocks: list[int] = field(default_factory=list)
    busy_s: list[float] = field(default_factory=list)


@dataclass(slots=True)
class RunResult:
    policy: str
    seed: int
    end_s: float
    requests: list[RequestRecord] = field(default_factory=list)
    jobs: list[JobRecord] = field(default_factory=list)
    instances: list[InstanceStats] = field(default_factory=list)
    num_events: int = 0
    series: list[InstanceSeries] = field(default_factory=list)
