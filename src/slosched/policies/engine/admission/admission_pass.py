"""Per-pass bookkeeping shared by the admissions that count what one pass admitted (``triage``,
``static-concurrency``, ``saber-speed``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from slosched.core.views import EngineView, SeqView


@dataclass(slots=True)
class AdmissionPass:
    """Bookkeeping of one admission pass (one engine step's loop over the waiting queue).

    The engine mechanism asks admission for waiting requests in ordering order starting at the head of
    the queue, and only moves admitted requests to the running set after the loop; so within a pass the
    engine's ``num_running`` does not yet count this pass's admissions, and this object does.
    Invariant: ``admitted`` counts requests admitted since the head was last asked, ``high_seen`` the
    high-tier requests asked since then (so it is the window position of the next high request).
    """

    now_s: float = -math.inf
    admitted: int = 0
    high_seen: int = 0
    max_required: float = 0.0  # largest feasible required speed among running + admitted this pass
    high_blocked: bool = False  # a high-tier request was deferred: the high queue is not empty

    def begin_if_new(self, seq: SeqView, engine: EngineView) -> bool:
        """Start a new pass when ``seq`` is the head of the waiting queue or time moved on."""
        waiting = engine.waiting
        if engine.now_s != self.now_s or (waiting and waiting[0] is seq):
            self.now_s = engine.now_s
            self.admitted = 0
            self.high_seen = 0
            self.max_required = 0.0
            self.high_blocked = False
            return True
        return False
