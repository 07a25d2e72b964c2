"""How fast admitted workflows move now: their stages' realized time over each stage's predicted time alone
(job-level admission's pace test, ``critical-path``'s ``pace_factor`` setting).

The per-call test (``backlog.py``) costs a new workflow's released stage through the queues it meets and
assumes its later stages wait as long; the demand test (``demand.py``) costs the work due before it at the
cluster's throughput. Neither sees what a workflow's chain of dependent calls really takes while it shares
every batch with the other admitted jobs: on Text-to-SQL at 3x the strongest baseline's capacity (seed 1,
400 workflows) the admitted jobs took a median 1.85x what the per-call test predicted at their arrival, and
57 of 152 missed. The pace is that ratio measured rather than modelled: each admitted stage's time from its
release to its job's next release (tool time included: the deadline counts it too) over the stage's least
time alone, the median over the most recent stages of the same template. A new workflow is relegated when
its least time alone at that pace, times ``pace_factor``, would not fit the time it has. Under overload the
factor is scaled up while too many of the workflows it admitted are demoted mid-way (``admission_feedback.py``).

0.9 by default (``pace_factor: null`` turns it off). On Text-to-SQL (5 seeds x 400 workflows) it lifted the
goodput at 2x and 3x the strongest baseline's capacity by 1-5%, and on mixed at 3x the jobs met from 0.49 to
0.68; at and just above the stack's own capacity it costs nothing (docs/stack.md). It shipped off at first:
there it cost 5-12% of the workflows met, because two workflows relegated while the warm-up was congested
lingered through the whole measured window, and the router's PRISM load and KV factors, which counted
relegated calls waiting, kept the A100 they starved on at under half its calls. The router now costs every
factor as a call that can still count meets it (``deadline_completion.py``'s ``factor_columns``).

- Per template: a template's stages carry its own tool time and fan-out, and a job whose template has no
  measured stages yet (a relQuery, a single call: they have no next release) is never judged by it.
- Only samples younger than the job's SLO count, and only with at least ``MIN_SAMPLES`` of them: stages
  measured under a load that has passed say nothing of the queue a new job meets, and a period in which
  every arrival is relegated, producing no samples, must not freeze the pace that caused it.
- The median, not the ratio of sums: long stages wait longest and the ratio of sums weighs them, so it
  overstates the pace a whole job meets: on Text-to-SQL at the strongest baseline's capacity it cut the
  jobs met from 0.91 to 0.70 (5 seeds x 400 workflows; the median: 0.91, as without the test).

Observations only: release times the runtime reports and the policy's own predictions; the same in the
simulator and the gateway (the plugin in each engine has no job layer: the gateway in front of it decides).
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

from slosched.policies.job.expiring import ExpiringEntries

MIN_SAMPLES = 16  # fewer stages measured within the horizon: no pace (the test admits)
RECENT_SAMPLES = 64  # per template: the most recent stages the median is taken over


@dataclass(slots=True)
class _OpenStage:
    template: str
    released_s: float
    alone_s: float


@dataclass(slots=True)
class StagePace:
    """Admitted stages open since their release, and per template the recent (time measured, ratio) samples."""

    _open: ExpiringEntries[_OpenStage] = field(default_factory=ExpiringEntries)  # until the job's deadline
    _samples: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)

    def released(self, job_id: str, template: str, now_s: float, alone_s: float, deadline_s: float) -> None:
        """An admitted job's stage was released at ``now_s``; ``alone_s``: its least time alone."""
        if alone_s > 0:  # a job that finished leaves its last stage open: forgotten past its deadline
            self._open.put(job_id, _OpenStage(template, now_s, alone_s), deadline_s, now_s)

    def next_released(self, job_id: str, now_s: float) -> None:
        """``job_id``'s next stage is released: its open stage, if any, becomes a sample."""
        stage = self._open.pop(job_id)
        if stage is None:
            return
        samples = self._samples.setdefault(stage.template, deque(maxlen=RECENT_SAMPLES))
        samples.append((now_s, (now_s - stage.released_s) / stage.alone_s))

    def pace(self, template: str, now_s: float, horizon_s: float) -> float | None:
        """The median ratio of ``template``'s stages measured within ``horizon_s`` of ``now_s``; None with
        fewer than ``MIN_SAMPLES`` of them."""
        recent = [ratio for measured_s, ratio in self._samples.get(template, ()) if now_s - measured_s <= horizon_s]
        if len(recent) < MIN_SAMPLES:
            return None
        return statistics.median(recent)
