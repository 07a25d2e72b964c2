"""Admission ``prefix-wait``: a call whose shareable prefix another call is computing right now waits for it
(SGLang's in-batch prefix caching); every other call joins as capacity allows.

SGLang's radix cache holds a prefix only once a prefill has computed it, so calls admitted together that
share an uncached prefix (the rows of one relQuery) each compute it; its scheduler holds the followers back.
vLLM v1, and the simulator after it (``sim/kv.py``), caches a block when a step is scheduled to compute it,
so calls admitted after a leader in the same step already share what that step computes for it; what they
still lack is a prefix longer than the leader's chunk (a long template under a small token budget), which
the leader computes in later steps. Either way the first such call leads, and a follower waits while a
leader is still prefilling the part it lacks (not yet in the cache), then finds it cached. The part a
follower lacks decides who leads it: the calls of its prefix key while the key's own blocks are missing,
else those of its key and group (``PrefixId``).

A follower waits at most for its leader's prefill; a leader that leaves the running set (preempted, or
finished) leads nobody. Calls without a shareable prefix, or with it all cached, are never held. In the
runtimes whose requests carry no prefix identity (the gateway's, the plugin's) the rule holds nobody.

The ``slosched`` stack's ``triage`` admission applies the same rule (its ``prefix_wait`` key); this admission
is the rule alone, for baselines (``ORDERING/prefix-wait/BATCHING``).
"""

from __future__ import annotations

from slosched.core.request import Request
from slosched.core.views import EngineView, SeqView
from slosched.policies.engine.admission.admission_pass import AdmissionPass
from slosched.policies.engine.base import ADMISSIONS
from slosched.policies.registry import NoParams, PolicyContext

LeaderKey = tuple[int, int]  # (prefix key, group key); group 0: the key's own blocks


class PrefixWait:
    """The rule, with the leaders of the current admission pass."""

    def __init__(self) -> None:
        self._pass = AdmissionPass()
        self._leaders: set[LeaderKey] | None = None  # built on first need in a pass (most passes need none)
        # What each prefix lacks, once per pass: the cache does not change within a pass, and a lookup walks
        # the prefix's blocks (hundreds for a long shared prompt) for every waiting call it is asked about.
        self._missing: dict[tuple[int, int, int, int], LeaderKey | None] = {}

    def holds(self, seq: SeqView, engine: EngineView) -> bool:
        """Whether ``seq`` should wait for a leader; a call let through with a missing prefix leads it.

        A call of a prefix no call is prefilling is let through without a cache lookup. A follower that lacks
        part of a prefix a same-key call is prefilling (or was let through in this pass) waits: that call
        lacked it too when it was admitted (the blocks are not cached yet, and it holds a block it hit), so it
        is computing it."""
        if self._pass.begin_if_new(seq, engine):
            self._leaders = None
            self._missing.clear()
        request = seq.request
        prefix = request.prefix
        if prefix.shared_blocks + prefix.group_blocks == 0:
            return False
        if self._leaders is None:
            self._leaders = {key for running in engine.running_seqs if _prefilling(running) for key in _keys(running)}
        keys = _keys(seq)
        if not any(key in self._leaders for key in keys):
            self._leaders.update(keys)
            return False
        identity = (prefix.shared_key, prefix.shared_blocks, prefix.group_key, prefix.group_blocks)
        if identity not in self._missing:
            self._missing[identity] = _missing_key(request, engine)
        missing = self._missing[identity]
        if missing is not None and missing in self._leaders:
            return True
        self._leaders.update(keys)
        return False


def _prefilling(seq: SeqView) -> bool:
    return seq.num_computed_tokens < seq.num_prompt_tokens


def _keys(seq: SeqView) -> list[LeaderKey]:
    prefix = seq.request.prefix
    keys: list[LeaderKey] = []
    if prefix.shared_blocks:
        keys.append((prefix.shared_key, 0))
    if prefix.group_blocks:
        keys.append((prefix.shared_key, prefix.group_key))
    return keys


def _missing_key(request: Request, engine: EngineView) -> LeaderKey | None:
    """Who could compute the first shareable block ``request`` lacks (None: it lacks none)."""
    prefix = request.prefix
    # A preempted call's own blocks may count too; only the shareable ones matter here.
    cached = engine.cached_prefix_tokens(request) // engine.spec.block_size
    if cached < prefix.shared_blocks:
        return (prefix.shared_key, 0)
    if cached < prefix.shared_blocks + prefix.group_blocks:
        return (prefix.shared_key, prefix.group_key)
    return None


class PrefixWaitAdmission:
    time_invariant = True

    def __init__(self) -> None:
        self.rule = PrefixWait()

    def admit(self, seq: SeqView, engine: EngineView) -> bool:
        return not self.rule.holds(seq, engine)


@ADMISSIONS.register("prefix-wait", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> PrefixWaitAdmission:
    return PrefixWaitAdmission()
