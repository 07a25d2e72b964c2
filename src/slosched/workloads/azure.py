"""``azure-conv`` and ``azure-code``: single requests with the lengths of the Azure 2023 traces.

Parameters (all optional):

- ``lengths``: ``"empirical"`` (default) draws whole (prompt, output) rows of the bundled CSV with
  replacement, keeping their correlation; ``"lognormal"`` draws prompt and output independently from the
  fitted ``azure_llm_2023`` lognormals in ``workloads.json``.
- ``max_input_tokens`` (8000), ``max_output_tokens`` (2048): clip the true lengths.
- ``max_tokens`` (2048): the request's ``max_output_tokens``; the true output is clipped to it too, as an
  engine stops there, so ``max_tokens >= output`` always holds.
- ``slo_s`` (none): one end-to-end SLO for every job; none lets the scenario's SLO rule decide.
- ``id_prefix`` (the generator name): job ids are ``f"{id_prefix}-{i}"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from slosched.core.job import JobSpec
from slosched.workloads._sampling import build_single_jobs, to_tokens
from slosched.workloads._validation import Params
from slosched.workloads.bundled import azure_trace, workload_section

_FACT_KEYS = {"azure-conv": "conversation", "azure-code": "code"}


def azure(name: str, params: Mapping[str, Any], arrivals: np.ndarray, rng: np.random.Generator) -> list[JobSpec]:
    """Jobs for ``azure-conv``/``azure-code``; ``jobs[i]`` arrives at ``arrivals[i]``, template = name."""
    reader = Params(name, params)
    lengths = reader.choice("lengths", "empirical", ("empirical", "lognormal"))
    max_input = reader.integer("max_input_tokens", 8000)
    max_output = reader.integer("max_output_tokens", 2048)
    max_tokens = reader.integer("max_tokens", 2048)
    slo_s = reader.optional_number("slo_s")
    id_prefix = reader.text("id_prefix", name)
    reader.finish()

    count = len(arrivals)
    if lengths == "empirical":
        trace = azure_trace(name)
        rows = rng.integers(0, len(trace), size=count)
        prompts, outputs = trace.input_tokens[rows], trace.output_tokens[rows]
    else:
        facts = workload_section("azure_llm_2023", _FACT_KEYS[name])
        prompts = rng.lognormal(facts["in"]["mu"], facts["in"]["sigma"], size=count)
        outputs = rng.lognormal(facts["out"]["mu"], facts["out"]["sigma"], size=count)
    input_tokens = to_tokens(prompts, max_input)
    output_tokens = to_tokens(outputs, min(max_output, max_tokens))
    return build_single_jobs(id_prefix, arrivals, input_tokens, output_tokens, max_tokens, name, slo_s)
