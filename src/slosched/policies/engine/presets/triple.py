"""What the presets that are only a triple of registered parts share: ``compose``.

A preset names a combination of parts worth a name (a baseline, a paper's design); each preset is one file
named after it (``fcfs.py``, ``chunked_fcfs.py``, ...). Any other triple needs no preset: write it
``ORDERING/ADMISSION/BATCHING`` (see ``engine/spec.py``). A triple preset's parameters are its batching
part's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.policies.engine.base import ADMISSIONS, BATCHINGS, ORDERINGS, EnginePolicy
from slosched.policies.registry import PolicyContext


def compose(
    name: str, ordering: str, admission: str, batching: str, params: Mapping[str, Any] | Any, context: PolicyContext
) -> EnginePolicy:
    """The parts by name, default parameters for ordering and admission, ``params`` for batching (built in
    that order)."""
    return EnginePolicy(
        name=name,
        ordering=ORDERINGS.build(ordering, {}, context),
        admission=ADMISSIONS.build(admission, {}, context),
        batching=BATCHINGS.build(batching, params, context),
    )
