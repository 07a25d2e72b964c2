"""Admission ``saber-speed`` (alias ``saber``): admit a request only if the predicted per-request speed
still meets every deadline (DESIGN 4.4). No fixed concurrency cap: the speed model decides how many run together.

With L requests running (plus those admitted earlier in this pass), a *high*-tier request (required
speed <= f(1)) is admitted iff ``f(L+1) >= its required speed`` and ``f(L+1) >= the required speed of
every running request that can still make its deadline``; running requests that cannot (required speed
above f(1), or deadline passed) are lost causes and constrain nobody. Which high requests a pass asks
about follows ``scan`` (see :mod:`slosched.policies.engine.ordering.saber_speed_math`): by default every one of the
first ``window`` (Algorithm 1), a deferred one staying queued while the scan goes on; with ``"first"``
the first deferred high request ends the high queue's turn. A *low*-tier (demoted) request is served
best effort, only when no high request is left waiting after the pass, and only if it does not push a
running request below its requirement.

The ordering ``saber-tiers`` must come with it (it puts high before low and draws the window); the preset
``saber`` composes the two with one speed model.
"""

from __future__ import annotations

from slosched.core.views import EngineView, SeqView
from slosched.perf.speed_models import AnySpeedModel
from slosched.policies.engine.admission.admission_pass import AdmissionPass
from slosched.policies.engine.base import ADMISSIONS
from slosched.policies.engine.ordering.saber_speed_math import SaberParams, required_speed, speed_model
from slosched.policies.registry import PolicyContext


class SaberAdmission:
    time_invariant = False

    def __init__(self, model: AnySpeedModel, demand: str, window: int = 5, scan: str = "random") -> None:
        self.model = model
        self.max_speed = model.speed(1.0)
        self.demand = demand
        self.window = window
        self.scan = scan
        self._pass = AdmissionPass()

    def running_requirement(self, engine: EngineView) -> float:
        """Largest required speed among running requests that can still meet their deadline."""
        now = engine.now_s
        needed = 0.0
        for seq in engine.running_seqs:
            need = required_speed(seq, now, self.demand)
            if need <= self.max_speed and need > needed:
                needed = need
        return needed

    def admit(self, seq: SeqView, engine: EngineView) -> bool:
        state = self._pass
        if state.begin_if_new(seq, engine):
            state.max_required = self.running_requirement(engine) if engine.num_running else 0.0
        need = required_speed(seq, engine.now_s, self.demand)
        next_speed = self.model.speed(engine.num_running + state.admitted + 1.0)
        if need <= self.max_speed:
            state.high_seen += 1
            if self._high_turn_over(state) or next_speed < need or next_speed < state.max_required:
                state.high_blocked = True
                return False
            state.max_required = max(state.max_required, need)
        elif state.high_blocked or next_speed < state.max_required:
            return False
        state.admitted += 1
        return True

    def _high_turn_over(self, state: AdmissionPass) -> bool:
        """Whether the high request being asked (the ``high_seen``-th of this pass) is out of its turn."""
        if self.scan == "first":
            return state.high_blocked
        return state.high_seen > self.window


def saber_admission(params: SaberParams, model: AnySpeedModel | None = None) -> SaberAdmission:
    """The admission ``params`` describe (``model``: a speed model already built from them, to share)."""
    speed = model if model is not None else speed_model(params)
    return SaberAdmission(speed, params.demand, params.window, params.scan)


@ADMISSIONS.register("saber-speed", params=SaberParams)
def build(params: SaberParams, context: PolicyContext) -> SaberAdmission:
    return saber_admission(params)
