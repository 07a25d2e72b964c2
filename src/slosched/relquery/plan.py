"""Plan a relQuery over a real table: render the template per row, count tokens, build the job.

A plan keeps the prefix structure: the template's literal text before the first placeholder is shared
by every row (``template_tokens``), the rest of each rendered prompt is the row's own (``row_tokens``), of
which its *lead* (the first field's value and the text up to the next field) is shared with the rows whose
lead is the same. ``order`` (``relquery.order``) sends the rows, and lays out the fields, so that rows
share long prefixes: ``table`` as read, ``rows`` sorted, ``fields`` repeated fields first, then sorted.
``to_job`` turns the plan into the simulator's relQuery job, rows in the plan's order, each row's lead a
prefix group when another row has the same; the true output length of a row is unknown before running it,
so the job assumes ``output_tokens`` per row (default: the limit, a worst case).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.job import JobSpec
from slosched.relquery.order import adjacent_shared_tokens, check_order, fields_template, row_order
from slosched.relquery.source import TableRef, read_rows
from slosched.relquery.template import PromptTemplate
from slosched.relquery.tokens import count_tokens
from slosched.workloads.relquery import relquery_job


@dataclass(frozen=True, slots=True)
class RelQueryPlan:
    """Invariants: ``len(prompts) == len(row_tokens) >= 1``, and ``table_rows`` and ``leads`` are as long
    (``table_rows`` a permutation of the table's row positions); every row's ``template_tokens +
    row_tokens + max_output_tokens`` fits the model length the plan was checked against."""

    source: str
    template: PromptTemplate
    max_output_tokens: int
    template_tokens: int
    row_tokens: tuple[int, ...]
    prompts: tuple[str, ...]
    slo_s: float | None = None
    order: str = "table"
    table_rows: tuple[int, ...] = ()  # the table row each prompt renders, in the order they are sent
    leads: tuple[tuple[str, int], ...] = ()  # per prompt: its lead's text and tokens

    @property
    def adjacent_shared_tokens(self) -> int:
        """Prompt tokens each row shares with the row sent before it, summed (the paper's prefix hits)."""
        return sum(adjacent_shared_tokens(self.prompts))

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
            job_id,
            arrival_s,
            self.template_tokens,
            rows,
            self.max_output_tokens,
            self.slo_s,
            "relquery",
            self.groups(),
        )

    def groups(self) -> list[tuple[str, int] | None]:
        """Per row: its prefix group (lead text, tokens the engine can reuse) when another row has the same
        lead, else None. The lead stops one token short of a row's end (the engine computes that one)."""
        if not self.leads:
            return [None] * self.num_rows
        counts: dict[str, int] = {}
        for lead, _ in self.leads:
            counts[lead] = counts.get(lead, 0) + 1
        return [
            (lead, min(tokens, own - 1)) if counts[lead] > 1 and min(tokens, own - 1) > 0 else None
            for (lead, tokens), own in zip(self.leads, self.row_tokens, strict=True)
        ]

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
            "order": self.order,
            "adjacent_shared_share": self.adjacent_shared_tokens / self.input_tokens if self.input_tokens else 0.0,
        }


def plan_relquery(
    table: str | TableRef,
    template: str,
    max_output_tokens: int,
    where: str | None = None,
    slo_s: float | None = None,
    max_rows: int | None = None,
    max_model_len: int = 4096,
    order: str = "table",
) -> RelQueryPlan:
    """Read the rows ``template`` needs from ``table`` and plan one call per row, sent in ``order``.

    Raises ``ConfigError`` for a bad template, a missing column, an empty result (naming the filter), a row
    whose prompt plus ``max_output_tokens`` exceeds ``max_model_len`` (naming the table row), an unknown
    order, and ``fields`` on a template not in record form.
    """
    if max_output_tokens < 1:
        raise ConfigError("max_tokens", f"must be >= 1, got {max_output_tokens}")
    if slo_s is not None and not slo_s > 0:
        raise ConfigError("slo_s", f"must be > 0, got {slo_s}")
    check_order(order)
    ref = table if isinstance(table, TableRef) else TableRef.parse(table)
    parsed = PromptTemplate.parse(template)
    rows = read_rows(ref, parsed.columns, where, max_rows)
    if not rows.rows:
        condition = f" matching {where!r}" if where else ""
        raise ConfigError("table", f"{str(ref)!r} has no rows{condition}; a relQuery needs at least one")
    return plan_records(str(ref), parsed, rows.records(), max_output_tokens, slo_s, max_model_len, order)


def plan_records(
    source: str,
    template: PromptTemplate,
    records: list[dict[str, Any]],
    max_output_tokens: int,
    slo_s: float | None = None,
    max_model_len: int = 4096,
    order: str = "table",
) -> RelQueryPlan:
    """Plan one call per record (rows already read, each holding the template's columns), sent in ``order``."""
    check_order(order)
    if order == "fields":
        template = fields_template(template, records)
    template_tokens = count_tokens(template.prefix)
    prompts: list[str] = []
    row_tokens: list[int] = []
    for index, record in enumerate(records):
        prompt = template.render(record)
        own = count_tokens(prompt[len(template.prefix) :])
        total = template_tokens + own + max_output_tokens
        if total > max_model_len:
            raise ConfigError(
                f"row {index}",
                f"prompt of {template_tokens + own} tokens + max_tokens {max_output_tokens} exceeds the model "
                f"length {max_model_len}; shorten the template, lower max_tokens or filter the row out",
            )
        prompts.append(prompt)
        row_tokens.append(own)
    sent = list(range(len(prompts))) if order == "table" else row_order(prompts)
    leads = group_leads(template, records)
    return RelQueryPlan(
        source,
        template,
        max_output_tokens,
        template_tokens,
        tuple(row_tokens[index] for index in sent),
        tuple(prompts[index] for index in sent),
        slo_s,
        order,
        tuple(sent),
        tuple((leads[index], count_tokens(template.prefix + leads[index]) - template_tokens) for index in sent),
    )


def group_leads(template: PromptTemplate, records: list[dict[str, Any]]) -> list[str]:
    """Each row's lead at the one depth (number of leading fields) whose repeated leads save the most tokens:
    the prefix groups the simulator models (one level below the template; sharing deeper or shallower than
    that depth is not counted, so the simulated reuse is a lower bound)."""
    best: list[str] = [""] * len(records)
    best_saved = 0
    for depth in range(1, len(template.columns) + 1):
        leads = [template.lead(record, depth) for record in records]
        counts: dict[str, int] = {}
        for lead in leads:
            counts[lead] = counts.get(lead, 0) + 1
        saved = sum((count - 1) * count_tokens(lead) for lead, count in counts.items())
        if saved > best_saved:
            best, best_saved = leads, saved
    return best
