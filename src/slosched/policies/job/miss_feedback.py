"""How strict job-level admission's demand test is, learned from the workflows it admitted (``critical-path``'s
``miss_target``).

The demand test (``demand.py``) prices work at the cluster's belief throughput: the sum of the instances' peak
prefill rates and the decode rates at the batch each can hold. Near capacity that is the right price: on
Text-to-SQL at 1.2x the strongest baseline's capacity it relegates no workflow and attainment is the best
measured. Under overload the engines run far below it (at 3x, seed 1: 600-830 output and 1,600-2,200 uncached
prompt tokens a second against the 16,600 and 8,600 it assumes), the test keeps admitting, and about a third
of the workflows it admits run past their deadline with stages still to go, at a median 4x their SLO, while
their calls take the batch slots of the ones that could still make it. No fixed price fits both: pricing
prompts in full (the test before its cache credit) met more jobs at 3x and fewer at 1.2x, and pricing decode at
the calls' real context lost 5% of mixed's jobs at 1x.

So the price carries a scale learned from what the test admitted: each workflow it admitted is resolved once,
as *late* when one of its stages is released after its deadline (or the engine's triage finds it hopeless), as
*on time* when its last expected stage is released before it. A late one multiplies the scale by ``1 + STEP``,
an on-time one divides it by ``(1 + STEP) ** (target / (1 - target))``, never below 1: the scale settles where
``target`` of the admitted workflows are late, and stays at 1 wherever fewer are (near capacity, where the
late ones are the unlucky output lengths that no admission rule can tell apart). Only what the runtime shows
the policy is read: releases and their times, no true lengths. Jobs of one stage (single calls, relQueries)
never resolve here: they are never judged by the demand test's later-stage bookings, and the engine's
triage handles them.
"""

from __future__ import annotations

import math

STEP = 0.1  # the scale's growth per late workflow (the decrease per on-time one follows from the target)
MAX_SCALE = 64.0  # a bound, so that a run of late workflows after a burst cannot shut admission for long


class MissFeedback:
    """The demand test's learned scale (module doc). ``target`` None: always 1."""

    def __init__(self, target: float | None) -> None:
        self.target = target
        self.scale = 1.0
        self._open: dict[str, float] = {}  # admitted workflows not resolved yet, by deadline
        self._pruned_size = 0
        self.late = self.on_time = 0
        self._up = math.log1p(STEP)
        self._down = 0.0 if target is None else self._up * target / (1.0 - target)

    def admitted(self, job_id: str, deadline_s: float, now_s: float) -> None:
        """``job_id`` was admitted at its arrival with stages still expected after the released one. A workflow
        that ends before the stages its template expects never resolves; the open set forgets those past their
        deadline once it has doubled since it last did (O(1) per admission, as ``RelegatedJobs``)."""
        if self.target is None:
            return
        self._open[job_id] = deadline_s
        if len(self._open) > 2 * self._pruned_size + 64:
            self._open = {name: due for name, due in self._open.items() if due >= now_s}
            self._pruned_size = len(self._open)

    def resolved(self, job_id: str, late: bool) -> None:
        """An admitted ``job_id`` ran past its deadline (``late``) or released its last stage in time; later
        calls for the same job change nothing."""
        if self._open.pop(job_id, None) is None:
            return
        if late:
            self.late += 1
            self.scale = min(self.scale * math.exp(self._up), MAX_SCALE)
        else:
            self.on_time += 1
            self.scale = max(self.scale * math.exp(-self._down), 1.0)
