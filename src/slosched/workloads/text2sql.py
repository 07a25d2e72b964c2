"""CHESS agentic Text-to-SQL workflows (``text2sql-chess``, ``text2sql-chess-hard``), from ``text2sql_chess``
in ``workloads.json`` (statistics of 131 CHESS-on-BIRD query traces, Llama-3.1-70B tokenizer).

One job per arrival, a chain of stages in CHESS's call order::

    IR1 -> [KW, p=0.847] -> IR2..IR4 (..IR5 when KW is absent) -> GEN (2 parallel candidates)
        -> REVISE1..REVISEk -> UT1 -> [GUT, p=0.947] -> UT2 -> [EVAL, m parallel calls, m >= 1] -> UT3

``k`` self-correction rounds come from the empirical pmf (``hard_fraction`` of the jobs draw ``k``
uniformly from 0..10 instead, like the paper's resampled hard traces); ``m`` from the EVAL fan-out pmf
(``m = 0`` drops the EVAL stage). The job spec holds the *realized* stages: a live system learns only
after REVISE r finished whether a round r+1 follows; policies see finished stages only (``JobView``).

Lengths are per-step lognormals clipped at the observed maximum; the second GEN candidate's prompt is
the first's minus 3,866 tokens (exact in the traces); the first IR call has its own output law, later
IR calls emit 4-5 tokens; EVAL emits 22 tokens in ~92 % of calls, else 70-360.

Prefix caching: each query targets one of ``num_databases`` databases (11, BIRD dev); the first
``shared_prefix`` (0.9) of a prompt kind's median length (template, few-shot examples, schema) is shared by
every call of that kind on that database (``prefix_key``). This is a modelling assumption: the statistics
hold no prompt texts, but the artifact's per-step times (a GEN call 18.24 s on an A100 = ~520 decode steps
at its 35 ms) leave no room for an uncached 12k-token prefill (~7.5 s there); ``shared_prefix: 0`` turns
it off.

Parameters (all optional): ``hard_fraction`` (0.0; 1.0 for ``text2sql-chess-hard``), ``max_tokens``
(4096, each call's ``max_output_tokens``), ``tool_s`` (0.0: seconds of SQL execution after GEN, each
REVISE and EVAL stage), ``shared_prefix`` (0.9), ``num_databases`` (11), ``id_prefix`` (the generator
name). Every job's template is ``text2sql-chess``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.workloads._sampling import gc_paused
from slosched.workloads._validation import Params
from slosched.workloads.bundled import workload_section

TEMPLATE = "text2sql-chess"
GEN_SECOND_CANDIDATE_SHORTER = 3866
MAX_REVISE_ROUNDS = 10
_GEN1_INPUT = (9.422, 0.062)
_GEN1_OUTPUT = (6.54, 0.248)
_GEN2_OUTPUT = (6.157, 0.194)
_FIRST_IR_OUTPUT = (2.372, 0.923)
_LATER_IR_OUTPUT = (1.5, 0.1)  # "later IR calls output 4-5 tokens"
_EVAL_SHORT_OUTPUT, _EVAL_SHORT_SHARE, _EVAL_LONG_RANGE = 22, 0.92, (70, 360)


class _Sampler:
    """Draws one call's tokens per step from the json's laws (clipped to ``[1, observed max]``)."""

    def __init__(self, rng: np.random.Generator, max_tokens: int, shared_prefix: float) -> None:
        self.rng = rng
        self.max_tokens = max_tokens
        self.shared_prefix = shared_prefix
        self.database = 0
        self.steps = workload_section("text2sql_chess", "steps")

    def _draw(self, mu: float, sigma: float, cap: float) -> int:
        return int(min(max(round(float(self.rng.lognormal(mu, sigma))), 1), cap))

    def law(self, step: str, side: str) -> tuple[float, float, float]:
        dist = self.steps[step][side]
        return float(dist["mu"]), float(dist["sigma"]), float(dist["max"])

    def _spec(self, key: str, prompt: int, output: int, median_prompt: float) -> CallSpec:
        # The shared part is fixed per (prompt kind, database): template + schema, not the question.
        shared = min(int(self.shared_prefix * median_prompt), prompt - 1) if self.shared_prefix else 0
        return CallSpec(
            input_tokens=prompt,
            output_tokens=min(output, self.max_tokens),
            max_output_tokens=self.max_tokens,
            prefix_key=f"{TEMPLATE}/{key}/db{self.database}" if shared > 0 else None,
            prefix_tokens=max(shared, 0),
        )

    def call(
        self, step: str, output: tuple[float, float] | None = None, input_tokens: int = 0, key: str = ""
    ) -> CallSpec:
        mu, sigma, cap = self.law(step, "input")
        prompt = input_tokens or self._draw(mu, sigma, cap)
        out_mu, out_sigma, out_cap = self.law(step, "output")
        if output is not None:
            out_mu, out_sigma = output
        median = math.exp(_GEN1_INPUT[0]) if key == "GEN1" else math.exp(mu)
        if key == "GEN2":
            median = math.exp(_GEN1_INPUT[0]) - GEN_SECOND_CANDIDATE_SHORTER
        return self._spec(key or step, prompt, self._draw(out_mu, out_sigma, out_cap), median)

    def eval_call(self) -> CallSpec:
        mu, sigma, cap = self.law("EVAL", "input")
        if self.rng.random() < _EVAL_SHORT_SHARE:
            tokens = _EVAL_SHORT_OUTPUT
        else:
            tokens = int(self.rng.integers(_EVAL_LONG_RANGE[0], _EVAL_LONG_RANGE[1] + 1))
        return self._spec("EVAL", self._draw(mu, sigma, cap), tokens, math.exp(mu))

    def gen_calls(self) -> tuple[CallSpec, CallSpec]:
        _, _, cap = self.law("GEN", "input")
        first = self._draw(*_GEN1_INPUT, cap)
        second = max(1, first - GEN_SECOND_CANDIDATE_SHORTER)
        return (
            self.call("GEN", _GEN1_OUTPUT, first, key="GEN1"),
            self.call("GEN", _GEN2_OUTPUT, second, key="GEN2"),
        )


def _pmf(name: str) -> tuple[np.ndarray, np.ndarray]:
    table = workload_section("text2sql_chess", name)
    values = np.array([int(key) for key in table], dtype=np.int64)
    probs = np.array([float(table[key]) for key in table])
    return values, probs / probs.sum()


def _stage(name: str, calls: tuple[CallSpec, ...], tool_s: float = 0.0) -> StageSpec:
    return StageSpec(name=name, calls=calls, tool_duration_s=tool_s)


def chess_stages(sampler: _Sampler, revise_rounds: int, eval_fanout: int, tool_s: float) -> tuple[StageSpec, ...]:
    """The realized chain of one query (see the module docstring for the order)."""
    rng = sampler.rng
    has_kw = bool(rng.random() < 0.847)
    has_gut = bool(rng.random() < 0.947)
    stages = [_stage("IR1", (sampler.call("IR", _FIRST_IR_OUTPUT, key="IR1"),))]
    if has_kw:
        stages.append(_stage("KW", (sampler.call("KW"),)))
    later_ir = 3 if has_kw else 4
    stages += [_stage(f"IR{2 + i}", (sampler.call("IR", _LATER_IR_OUTPUT),)) for i in range(later_ir)]
    stages.append(_stage("GEN", sampler.gen_calls(), tool_s))
    stages += [_stage(f"REVISE{r + 1}", (sampler.call("REVISE"),), tool_s) for r in range(revise_rounds)]
    stages.append(_stage("UT1", (sampler.call("UT"),)))
    if has_gut:
        stages.append(_stage("GUT", (sampler.call("GUT"),)))
    stages.append(_stage("UT2", (sampler.call("UT"),)))
    if eval_fanout > 0:
        stages.append(_stage("EVAL", tuple(sampler.eval_call() for _ in range(eval_fanout)), tool_s))
    stages.append(_stage("UT3", (sampler.call("UT"),)))
    return tuple(stages)


def text2sql_chess(
    name: str, params: Mapping[str, Any], arrivals: np.ndarray, rng: np.random.Generator
) -> list[JobSpec]:
    """One CHESS workflow job per arrival, in arrival order."""
    reader = Params(name, params)
    default_hard = 1.0 if name.endswith("-hard") else 0.0
    hard_fraction = reader.number("hard_fraction", default_hard, strict=False)
    max_tokens = reader.integer("max_tokens", 4096)
    tool_s = reader.number("tool_s", 0.0, strict=False)
    shared_prefix = reader.number("shared_prefix", 0.9, strict=False)
    num_databases = reader.integer("num_databases", 11)
    id_prefix = reader.text("id_prefix", name)
    reader.finish()
    for field, value in (("hard_fraction", hard_fraction), ("shared_prefix", shared_prefix)):
        if value > 1.0:
            raise ConfigError(f"{name}.{field}", f"must be in [0, 1], got {value}")
    count = len(arrivals)
    shape_rng, length_rng = rng.spawn(2)
    revise_values, revise_probs = _pmf("revise_rounds_pmf")
    natural_rounds = shape_rng.choice(revise_values, size=count, p=revise_probs)
    hard_rounds = shape_rng.integers(0, MAX_REVISE_ROUNDS + 1, size=count)
    is_hard = shape_rng.random(count) < hard_fraction
    rounds = np.where(is_hard, hard_rounds, natural_rounds)
    fanout_values, fanout_probs = _pmf("eval_fanout_pmf")
    fanouts = shape_rng.choice(fanout_values, size=count, p=fanout_probs)
    databases = shape_rng.integers(0, num_databases, size=count)
    sampler = _Sampler(length_rng, max_tokens, shared_prefix)
    jobs = []
    with gc_paused():
        for index, arrival in enumerate(arrivals.tolist()):
            sampler.database = int(databases[index])
            stages = chess_stages(sampler, int(rounds[index]), int(fanouts[index]), tool_s)
            jobs.append(JobSpec(f"{id_prefix}-{index}", JobKind.WORKFLOW, float(arrival), stages, template=TEMPLATE))
    return jobs
