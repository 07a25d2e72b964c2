"""Plan a relQuery over a real table: render the template per row, count tokens, build the job.

A plan keeps the prefix structure: the template's literal text before the first placeholder is shared
by every row (``template_tokens``), the rest of each rendered prompt is the row's own (``row_tokens``).
``to_job`` turns the plan into the simulator's relQuery job; the true output length of a row is unknown
before running it, so the job assumes ``output_tokens`` per row (default: the limit, a worst case).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.job import JobSpec
from slosched.relquery.source import TableRef, read_rows
from slosched.relquery.template import PromptTemplate
from slosched.relquery.tokens import count_tokens
from slosched.workloads.relquery import relquery_job


@dataclass(frozen=True, slots=True)
class RelQueryPlan:
    """Invariants: ``len(prompts) == len(row_tokens) >= 1``; every row's ``template_tokens + row_tokens +
    max_output_tokens`` fits the model length the plan was checked against."""

    source: str
    template: PromptTemplate
    max_output_tokens: int
    template_tokens: int
    row_tokens: tuple[int, ...]
    prompts: tuple[str, ...]
    slo_s: float | None = None

    @property
    def num_rows(self) -> int:
        return len(self.row_tokens)

    @property
    def input_tokens(self) -> int:
        return self.num_rows * self.template_tokens + sum(self.row_tokens)

    @property
    def shared_share(self) -> float:
        """Share of all prompt tokens that is template text (what a prefix cache can reuse)."""
        return self.num_rows * self.template_tokens / self.input_tokens if self.input_tokens else 0.0

    def to_job(self, job_id: str = "relquery", arrival_s: float = 0.0, output_tokens: int | None = None) -> JobSpec:
        out = self.max_output_tokens if output_tokens is None else output_tokens
        if not 1 <= out <= self.max_output_tokens:
            raise ConfigError("output_tokens", f"must be in [1, {self.max_output_tokens}], got {out}")
        # The engine computes at least the last prompt token, so a row's own part is never empty.
        rows = [(max(1, tokens), out) for tokens in self.row_tokens]
        return relquery_job(
            job_id, arrival_s, self.template_tokens, rows, self.max_output_tokens, self.slo_s, "relquery"
        )

    def summary(self) -> dict[str, Any]:
        rows = self.row_tokens
        return {
            "source": self.source,
            "columns": list(self.template.columns),
            "num_rows": self.num_rows,
            "template_tokens": self.template_tokens,
            "row_tokens_mean": sum(rows) / len(rows),
            "row_tokens_max": max(rows),
            "input_tokens": self.input_tokens,
            "max_output_tokens": self.max_output_tokens,
            "shared_share": self.shared_share,
        }


def plan_relquery(
    table: str | TableRef,
    template: str,
    max_output_tokens: int,
    where: str | None = None,
    slo_s: float | None = None,
    max_rows: int | None = None,
    max_model_len: int = 4096,
) -> RelQueryPlan:
    """Read the rows ``template`` needs from ``table`` and plan one call per row.

    Raises ``ConfigError`` for a bad template, a missing column, an empty result (naming the filter) and a
    row whose prompt plus ``max_output_tokens`` exceeds ``max_model_len`` (naming the row).
    """
    if max_output_tokens < 1:
        raise ConfigError("max_tokens", f"must be >= 1, got {max_output_tokens}")
    if slo_s is not None and not slo_s > 0:
        raise ConfigError("slo_s", f"must be > 0, got {slo_s}")
    ref = table if isinstance(table, TableRef) else TableRef.parse(table)
    parsed = PromptTemplate.parse(template)
    rows = read_rows(ref, parsed.columns, where, max_rows)
    if not rows.rows:
        condition = f" matching {where!r}" if where else ""
        raise ConfigError("table", f"{str(ref)!r} has no rows{condition}; a relQuery needs at least one")
    template_tokens = count_tokens(parsed.prefix)
    prompts: list[str] = []
    row_tokens: list[int] = []
    for index, record in enumerate(rows.records()):
        prompt = parsed.render(record)
        own = count_tokens(prompt[len(parsed.prefix) :])
        total = template_tokens + own + max_output_tokens
        if total > max_model_len:
            raise ConfigError(
                f"row {index}",
                f"prompt of {template_tokens + own} tokens + max_tokens {max_output_tokens} exceeds the model "
                f"length {max_model_len}; shorten the template, lower max_tokens or filter the row out",
            )
        prompts.append(prompt)
        row_tokens.append(own)
    return RelQueryPlan(str(ref), parsed, max_output_tokens, template_tokens, tuple(row_tokens), tuple(prompts), slo_s)
