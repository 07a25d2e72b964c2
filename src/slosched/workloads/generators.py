"""Workload generators registered by name, and ``mix``, a weighted mixture of them.

A generator is ``(params, arrivals, rng) -> list[JobSpec]``. Invariants: it returns exactly one job
(a single request, a workflow such as ``text2sql-chess``, or a relQuery for ``relquery``) per arrival, in arrival order
(``jobs[i].arrival_s == arrivals[i]``); every job passes
``validate_job``; job ids are unique and ``template`` names the task (for output-length predictors); the
same params, arrivals and ``rng`` state give equal jobs. Unknown parameters are rejected with the list
of allowed ones. Names and parameters are documented in ``azure``, ``chat``, ``code`` and ``mix`` below.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.core.job import JobSpec
from slosched.workloads._sampling import check_arrivals
from slosched.workloads._validation import Params
from slosched.workloads.arrivals import ArrivalSpec
from slosched.workloads.azure import azure
from slosched.workloads.chat import chat, flowgpt
from slosched.workloads.code import CODE_MIXES, CODE_TASKS, code
from slosched.workloads.relquery import relquery
from slosched.workloads.text2sql import text2sql_chess

WorkloadGenerator = Callable[[Mapping[str, Any], np.ndarray, np.random.Generator], list[JobSpec]]


def mix(params: Mapping[str, Any], arrivals: np.ndarray, rng: np.random.Generator) -> list[JobSpec]:
    """A weighted mixture: each arrival independently goes to a component with probability
    ``weight / sum(weights)``, and each component generates the jobs for its own arrivals.

    ``components`` maps a generator name to its weight, or to ``{"weight": w, "params": {...}}`` to pass
    that generator its own parameters, e.g. ``{"sharegpt": 0.7, "code-w3": {"weight": 0.3, "params":
    {"slo": "none"}}}``. Jobs keep their component's ids and templates; each component draws its
    lengths from its own child stream of ``rng``.
    """
    reader = Params("mix", params)
    components = _components(reader.raw("components"))
    reader.finish()
    choice_rng, *component_rngs = rng.spawn(1 + len(components))
    weights = np.array([weight for _, weight, _ in components])
    which = choice_rng.choice(len(components), size=len(arrivals), p=weights / weights.sum())
    jobs: list[JobSpec | None] = [None] * len(arrivals)
    for index, (name, _, sub_params) in enumerate(components):
        slots = np.flatnonzero(which == index)
        made = GENERATORS[name](sub_params, arrivals[slots], component_rngs[index])
        for slot, job in zip(slots.tolist(), made, strict=True):
            jobs[slot] = job
    result = [job for job in jobs if job is not None]
    if len({job.id for job in result}) != len(result):
        raise ConfigError("mix.components", "job ids collide; give components distinct id_prefix params")
    return result


def _components(raw: Any) -> list[tuple[str, float, Mapping[str, Any]]]:
    """``(name, weight, params)`` per component, checked: known names, finite weights > 0."""
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError("mix.components", "expected a non-empty mapping of generator name -> weight")
    parsed: list[tuple[str, float, Mapping[str, Any]]] = []
    for name, spec in raw.items():
        where = f"mix.components.{name}"
        if name not in GENERATORS:
            raise UnknownNameError("mix.components", str(name), list(GENERATORS))
        sub_params: Mapping[str, Any] = {}
        if isinstance(spec, Mapping):
            extra = set(spec) - {"weight", "params"}
            if extra:
                raise ConfigError(where, f"unknown {sorted(extra)}; allowed: params, weight")
            weight, sub_params = spec.get("weight"), spec.get("params") or {}
        else:
            weight = spec
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise ConfigError(f"{where}.weight", f"expected a number > 0, got {weight!r}")
        if not math.isfinite(weight) or weight <= 0:
            raise ConfigError(f"{where}.weight", f"must be a finite number > 0, got {weight}")
        parsed.append((str(name), float(weight), sub_params))
    return parsed


def _builtin_generators() -> dict[str, WorkloadGenerator]:
    generators: dict[str, WorkloadGenerator] = {name: partial(azure, name) for name in ("azure-conv", "azure-code")}
    generators["flowgpt"] = flowgpt
    generators.update({name: partial(chat, name) for name in ("coding", "sharegpt", "summarization")})
    generators.update({name: partial(code, name) for name in (*CODE_TASKS, *CODE_MIXES)})
    generators.update({name: partial(text2sql_chess, name) for name in ("text2sql-chess", "text2sql-chess-hard")})
    generators["relquery"] = relquery
    generators["mix"] = mix
    return generators


# Read-only: a registry that any caller could change would make runs depend on import order.
GENERATORS: Mapping[str, WorkloadGenerator] = MappingProxyType(_builtin_generators())


def generator_names() -> list[str]:
    return sorted(GENERATORS)


def get_generator(name: str) -> WorkloadGenerator:
    """The generator registered as ``name``; ``UnknownNameError`` lists the known names otherwise."""
    generator = GENERATORS.get(name)
    if generator is None:
        raise UnknownNameError("workload", name, list(GENERATORS))
    return generator


def generate_jobs(
    name: str, params: Mapping[str, Any] | None, arrivals: np.ndarray, rng: np.random.Generator
) -> list[JobSpec]:
    """Run generator ``name`` on checked ``arrivals`` (finite, >= 0, non-decreasing)."""
    return get_generator(name)(params or {}, check_arrivals(arrivals), rng)


def make_workload(
    name: str,
    arrivals: ArrivalSpec | Mapping[str, Any],
    num_jobs: int,
    params: Mapping[str, Any] | None = None,
    seed: int | np.random.Generator = 0,
) -> list[JobSpec]:
    """``num_jobs`` jobs of workload ``name`` arriving by ``arrivals``, deterministic in ``seed``.

    Arrival times and lengths use independent child streams of the seed, so changing the arrival
    process (or its rate) leaves every job's lengths unchanged.
    """
    spec = arrivals if isinstance(arrivals, ArrivalSpec) else ArrivalSpec.from_mapping(arrivals)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    arrival_rng, length_rng = rng.spawn(2)
    return generate_jobs(name, params, spec.sample(num_jobs, arrival_rng), length_rng)
