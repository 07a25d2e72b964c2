"""Engine presets that are plain (ordering, admission, batching) triples, in one table.

Naming of preset files: this file holds every preset that is only a triple of registered parts (any other
triple needs no preset at all: write it ``ORDERING/ADMISSION/BATCHING``, see ``spec.py``);
``<design>_presets.py`` (``relserve_presets.py``, ``saber_presets.py``) hold presets whose parts share state
or take fixed parameters, which a triple of names cannot express. Parameters of a triple preset go to its
batching part (``token_budget``).

- ``fcfs``: FCFS + prefill-first steps (vLLM v0).
- ``chunked-fcfs``: FCFS + chunked prefill (Sarathi / vLLM v1; ``token_budget`` defaults to the instance's
  max batched tokens).
- ``static-priority``: shortest estimated work first, fixed at arrival, with chunked prefill.
- ``urgency`` (Hexgen-Text2SQL): urgency ordering, eager admission, prefill-first steps. It differs from
  ``fcfs`` (the vLLM baseline) only in the ordering, so ``*+fcfs`` vs ``*+urgency`` isolates the queue
  discipline.
- ``lens`` (NexusSched): FCFS ordering, no admission gate, LENS batching. LENS builds its batch greedily in
  FCFS order (running first, then waiting), which is exactly what the mechanism does under FCFS ordering, so
  the plan's token budget and running cap reproduce the batch LENS predicted (parameters: ``lens_batching``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from slosched.policies.engine.base import ADMISSIONS, BATCHINGS, ENGINE_PRESETS, ORDERINGS, EnginePolicy
from slosched.policies.registry import Factory, PolicyContext

# name -> (ordering, admission, batching)
TRIPLES: Final[Mapping[str, tuple[str, str, str]]] = {
    "fcfs": ("fcfs", "always", "prefill-first"),
    "chunked-fcfs": ("fcfs", "always", "chunked"),
    "static-priority": ("static-priority", "always", "chunked"),
    "urgency": ("urgency", "always", "prefill-first"),
    "lens": ("fcfs", "always", "lens"),
}


def compose(
    name: str, ordering: str, admission: str, batching: str, params: Mapping[str, Any], context: PolicyContext
) -> EnginePolicy:
    return EnginePolicy(
        name=name,
        ordering=ORDERINGS.build(ordering, {}, context),
        admission=ADMISSIONS.build(admission, {}, context),
        batching=BATCHINGS.build(batching, params, context),
    )


def _triple_factory(name: str, ordering: str, admission: str, batching: str) -> Factory[EnginePolicy]:
    def build(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
        return compose(name, ordering, admission, batching, params, context)

    return build


for _name, (_ordering, _admission, _batching) in TRIPLES.items():
    ENGINE_PRESETS.register(_name)(_triple_factory(_name, _ordering, _admission, _batching))
