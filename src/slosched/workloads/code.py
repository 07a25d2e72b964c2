"""SABER's code-assistant tasks: ``code-qna``, ``code-generation``, ``code-summary``,
``code-translation``, and their mixes ``code-w1`` (W1_heavy), ``code-w2`` (W2_light), ``code-w3``
(W3_balanced), from ``code_assistant`` in ``workloads.json``.

Prompt and output lengths are lognormal with the json's ``mu``/``sigma`` (the paper gives means only;
the sigmas are assumptions recorded in the json). In a mix each job's task is drawn independently with
the mix's weights. A job's template is its task's generator name (``"code-qna"``, ...), so per-template
output predictors learn per task.

Parameters (all optional):

- ``slo``: ``"paper"`` (default) gives each job its task's ``slo_s`` from the json times ``slo_scale``
  (default 1.0); ``"none"`` leaves ``slo_s`` None for the scenario's SLO rule.
- ``max_input_tokens`` (8000): prompts are clipped to it.
- ``max_tokens`` (2048): each request's ``max_output_tokens``; true outputs are clipped to it.
- ``id_prefix`` (the generator name): job ids are ``f"{id_prefix}-{i}"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from slosched.core.job import JobSpec
from slosched.workloads._sampling import build_single_jobs, to_tokens
from slosched.workloads._validation import Params
from slosched.workloads.bundled import workload_section

# Generator name -> task key in workloads.json.
CODE_TASKS = {
    "code-qna": "code_qna",
    "code-generation": "code_generation",
    "code-summary": "code_summary",
    "code-translation": "code_translation",
}
# Generator name -> mix key in workloads.json.
CODE_MIXES = {"code-w1": "W1_heavy", "code-w2": "W2_light", "code-w3": "W3_balanced"}


def task_weights(name: str) -> dict[str, float]:
    """Task generator name -> probability, for a task (one task, weight 1) or a mix."""
    if name in CODE_TASKS:
        return {name: 1.0}
    mix = workload_section("code_assistant", "mixes", CODE_MIXES[name])
    by_key = {key: task for task, key in CODE_TASKS.items()}
    total = sum(mix.values())
    return {by_key[key]: weight / total for key, weight in mix.items()}


def _tokens(rng: np.random.Generator, dist: Mapping[str, float], size: int, cap: int) -> np.ndarray:
    return to_tokens(rng.lognormal(dist["mu"], dist["sigma"], size), cap)


def code(name: str, params: Mapping[str, Any], arrivals: np.ndarray, rng: np.random.Generator) -> list[JobSpec]:
    """Jobs for a code task or mix; ``jobs[i]`` arrives at ``arrivals[i]``."""
    reader = Params(name, params)
    slo_rule = reader.choice("slo", "paper", ("paper", "none"))
    slo_scale = reader.number("slo_scale", 1.0)
    max_input = reader.integer("max_input_tokens", 8000)
    max_tokens = reader.integer("max_tokens", 2048)
    id_prefix = reader.text("id_prefix", name)
    reader.finish()

    count = len(arrivals)
    weights = task_weights(name)
    tasks = list(weights)
    if len(tasks) > 1:
        which = rng.choice(len(tasks), size=count, p=list(weights.values()))
    else:
        which = np.zeros(count, dtype=np.int64)
    input_tokens = np.empty(count, dtype=np.int64)
    output_tokens = np.empty(count, dtype=np.int64)
    slo_by_task: list[float | None] = []
    facts = workload_section("code_assistant", "tasks")
    for index, task in enumerate(tasks):
        fact = facts[CODE_TASKS[task]]
        rows = np.flatnonzero(which == index)
        input_tokens[rows] = _tokens(rng, fact["in"], len(rows), max_input)
        output_tokens[rows] = _tokens(rng, fact["out"], len(rows), max_tokens)
        slo_by_task.append(float(fact["slo_s"]) * slo_scale if slo_rule == "paper" else None)
    which_list = which.tolist()
    templates = [tasks[index] for index in which_list]
    slos = [slo_by_task[index] for index in which_list]
    return build_single_jobs(id_prefix, arrivals, input_tokens, output_tokens, max_tokens, templates, slos)
