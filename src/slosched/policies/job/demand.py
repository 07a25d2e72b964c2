"""The work a job finds ahead of it, earliest deadline first (job-level admission, ``critical-path``'s
``backlog`` setting, with ``backlog.py``'s per-call latency test).

The per-call test asks whether the released stage, behind what is queued now, and the stages after it can
each make it. It cannot see the stages of jobs already admitted that are not released yet (a CHESS
workflow between two stages, or in a tool call, queues nothing), so under overload it keeps admitting jobs
whose later stages then meet the earlier jobs' later stages: everyone is late together (the stack's
collapse on Text-to-SQL at 2x). This module adds the processor-demand test of EDF scheduling: a job can
make its deadline only if the cluster can do, before it, the work of every admitted job with an earlier
deadline (queued now, or still expected from its template: ``CommittedWork``) plus the job's own remaining
work. An engine ordering by least slack serves those jobs first, so their work is in the way; waiting work
with a later deadline, or relegated to best effort, is not (what already runs is: it holds its slot).

Work is costed at cluster throughput, not latency: prompt tokens at the sum of the instances' peak prefill
rates (PRISM's ``Pmax``), output tokens at the sum of their decode rates at the batch each can hold
(``decode_tokens_per_s``). Both are belief (views, fitted step models, predicted outputs); prefill and
decode share each GPU, so their times add.

Prompt tokens a prefix cache holds cost no prefill, so they are not counted: a waiting call's cached prefix
on its instance, a released call's on the instance that holds most of it (where the stack's router keeps
it), and a job's stages not released yet at the share its released stage finds uncached (a workflow's
stages share its context). Counted in full, the test relegated Text-to-SQL workflows the cluster could
serve: its calls find seven eighths of their prompt cached in steady state, and near capacity (1.2x the
strongest baseline's, seed 1) prefill alone looked like 100 s of work ahead of every arrival; 64 of 400
workflows were relegated at arrival and attainment fell to 0.65 against 0.88 without the test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.routers.deadline_completion import DECODE_REF_CONTEXT
from slosched.policies.job.bands import BandOf, served_before
from slosched.policies.job.expiring import ExpiringEntries


@dataclass(frozen=True, slots=True)
class Work:
    """Prompt and (predicted) output tokens still to process."""

    prompt_tokens: float = 0.0
    output_tokens: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(self.prompt_tokens + other.prompt_tokens, self.output_tokens + other.output_tokens)

    def with_prompt_share(self, share: float) -> Work:
        """This work with only ``share`` of its prompt tokens left to compute (the rest found cached)."""
        return Work(self.prompt_tokens * share, self.output_tokens)


def uncached_prompt_tokens(request: Request, views: Sequence[InstanceView]) -> int:
    """``request``'s prompt tokens that no instance's prefix cache holds now (the most any one holds is
    credited: the stack's router sends a call where its prefix is)."""
    return request.prompt_tokens - max((view.cached_prefix_tokens(request) for view in views), default=0)


def calls_work(requests: Sequence[Request], views: Sequence[InstanceView] = ()) -> Work:
    """The released calls' work: their prompts (less what the instances on ``views`` hold cached) and predicted
    outputs (at least one token each)."""
    return Work(
        float(sum(uncached_prompt_tokens(r, views) for r in requests)),
        float(sum(max(r.predicted_output_tokens, 1.0) for r in requests)),
    )


def uncached_share(requests: Sequence[Request], released: Work) -> float:
    """The share of the ``requests``' prompt tokens left to compute in their ``released`` work (1 without
    prompt tokens): the best guess of the share the job's later stages will find uncached."""
    prompt = sum(r.prompt_tokens for r in requests)
    return released.prompt_tokens / prompt if prompt > 0 else 1.0


@dataclass(slots=True)
class _Commitment:
    deadline_s: float
    work: Work
    band: float = 0.0


class CommittedWork:
    """The expected work of admitted jobs' stages not released yet, by job (updated at each release)."""

    def __init__(self) -> None:
        self._jobs: dict[str, _Commitment] = {}

    def __len__(self) -> int:
        return len(self._jobs)

    def record(self, job_id: str, deadline_s: float, later: Work, band: float = 0.0) -> None:
        """``job_id`` (of tenant band ``band``) was admitted (or kept) with ``later`` still expected after the
        released stage."""
        if later.prompt_tokens + later.output_tokens <= 0.0 or not math.isfinite(deadline_s):
            self._jobs.pop(job_id, None)
        else:
            self._jobs[job_id] = _Commitment(deadline_s, later, band)

    def forget(self, job_id: str) -> None:
        """``job_id`` was relegated: its later work delays nobody that can still count."""
        self._jobs.pop(job_id, None)

    def ahead_of(self, job_id: str, deadline_s: float, now_s: float, band: float = 0.0) -> Work:
        """The committed work of other jobs due no later than ``deadline_s``, of band ``band`` or below (a
        higher band's stages wait behind the job's). Jobs past their deadline are dropped first: they can no
        longer count, and the engine serves them after every job that can."""
        expired = [name for name, held in self._jobs.items() if held.deadline_s < now_s]
        for name in expired:
            del self._jobs[name]
        prompt = output = 0.0
        for name, held in self._jobs.items():
            if held.deadline_s <= deadline_s and held.band <= band and name != job_id:
                prompt += held.work.prompt_tokens
                output += held.work.output_tokens
        return Work(prompt, output)


class RelegatedJobs:
    """Jobs relegated when judged through the backlog, by deadline: their later stages stay relegated (an
    admission decided once per job, not re-opened by a quieter moment). A job is forgotten once its
    deadline passed, when the time test alone finds it hopeless anyway (``expiring.py``)."""

    def __init__(self) -> None:
        self._jobs: ExpiringEntries[None] = ExpiringEntries()

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def add(self, job_id: str, deadline_s: float, now_s: float) -> None:
        self._jobs.put(job_id, None, deadline_s, now_s)


def decode_tokens_per_s(view: InstanceView) -> float:
    """Output tokens per second ``view``'s instance reaches at the largest batch its KV cache holds at the
    reference context (at most ``max_running``), by its belief step model.

    An upper bound, on purpose: on Text-to-SQL at 2x the strongest baseline's capacity it is 15x what the cluster
    decodes (its calls hold 6-12k tokens of context, not 512). Costed at the operating point instead (the running
    batch at the KV in use while calls wait, about a third above what is achieved), the test relegated jobs the
    cluster would have finished: relQueries met 0.417 -> 0.351 and mixed 0.796 -> 0.754 of their jobs at 2x, with
    Text-to-SQL within noise (one-off probes, 5 seeds, self-tuning off, not a bench's output; 2026-12-05)."""
    blocks = view.num_kv_blocks
    kv_batch = blocks * view.spec.block_size // DECODE_REF_CONTEXT if blocks > 0 else view.spec.max_running
    batch = max(1, min(view.spec.max_running, kv_batch))
    step_s = view.step_predictor.predict_s(0, 0, batch, batch * DECODE_REF_CONTEXT)
    return batch / step_s if step_s > 0 else math.inf


def queued_work(
    views: Sequence[InstanceView], deadline_s: float, band_of: BandOf | None = None, band: float = 0.0
) -> Work:
    """Work queued on the instances that an EDF engine serves before a job due at ``deadline_s``: waiting
    calls that can still count and are due no later (their prompts less the prefix cached where they wait),
    and the predicted output still to come of every running call (what is running holds its slot until it
    ends). With tenant bands (``bands.py``), a job of ``band`` also meets every waiting call of a lower band,
    and none of a higher one."""
    prompt = output = 0.0
    for view in views:
        not_ahead_output = 0.0
        for request in view.waiting_requests:
            # Without bands (the usual case) nothing is asked per call beyond the deadline.
            first = None if band_of is None else served_before(request.tenant, band, band_of)
            if request.best_effort or first is False or (first is None and request.deadline_s > deadline_s):
                not_ahead_output += max(request.predicted_output_tokens, 1.0)
            else:
                prompt += request.prompt_tokens - view.cached_prefix_tokens(request)
        output += max(view.outstanding_decode_tokens - not_ahead_output, 0.0)
    return Work(prompt, output)


def demand_s(work: Work, views: Sequence[InstanceView], peak_prefill_tokens_per_s: Sequence[float]) -> float:
    """Seconds the whole cluster needs for ``work`` at its throughput (module doc); inf without views."""
    prefill_rate = sum(peak_prefill_tokens_per_s)
    decode_rate = sum(decode_tokens_per_s(view) for view in views)
    if prefill_rate <= 0 or decode_rate <= 0:
        return math.inf
    return work.prompt_tokens / prefill_rate + work.output_tokens / decode_rate
