"""Order a relQuery's rows, and the fields of its prompt, so that consecutive rows share long prefixes.

A prefix cache reuses the KV blocks of a prompt's leading tokens. Every row of a relQuery shares the
template's text before its first placeholder; beyond it, two rows share a prefix only where their leading
fields hold the same values. Liu et al. (MLSys'25, "Optimizing LLM Queries in Relational Data Analytics
Workloads") reorder both: fields whose values repeat go first, and rows with equal leading values run next
to each other. Three orders:

- ``table``: rows and fields as given (no reordering).
- ``rows``: rows sorted by their rendered prompt. Sorting maximises the tokens each row shares with the
  row before it (in sorted order the longest prefix a row shares with any earlier row is the one it shares
  with its predecessor), so an LRU cache that holds the last few rows hits everything shareable.
- ``fields``: first the fields, then the rows. Only for a template in *record form*: after its instruction,
  one line per placeholder (``Review: {review}``), so that moving a line changes no meaning. Field lines
  are ordered by ``policies.job.prefix_order.field_order`` weighed in tokens (the gateway's relQuery jobs
  make the same decision).

Reuse is measured as the paper counts it: the tokens each row shares with the row before it in the order
sent (``adjacent_shared_tokens``), over all prompt tokens.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slosched.core.errors import ConfigError
from slosched.policies.job import prefix_order
from slosched.relquery.template import PromptTemplate
from slosched.relquery.tokens import count_tokens

ORDERS = ("table", "rows", "fields")


@dataclass(frozen=True, slots=True)
class RecordLayout:
    """A record-form template cut into its instruction, one line per field, and what follows them."""

    head: str  # the instruction, up to and including the newline before the first field line
    lines: tuple[str, ...]  # template text of each field line, without its newline
    tail: str  # the text after the last field line (its newline included)

    def template(self, order: Sequence[int]) -> PromptTemplate:
        return PromptTemplate.parse(self.head + "\n".join(self.lines[index] for index in order) + self.tail)


def record_layout(template: PromptTemplate) -> RecordLayout | None:
    """The template's record form, or None: after the instruction, a contiguous block of lines holding one
    placeholder each (the lines after the block hold none)."""
    lines = template.text.split("\n")
    holders = [_placeholders(line) for line in lines]
    first = next((index for index, count in enumerate(holders) if count), None)
    if first is None or first == 0:
        return None  # no instruction line of its own: the first field's label is the only shared text
    last = max(index for index, count in enumerate(holders) if count)
    if any(count != 1 for count in holders[first : last + 1]):
        return None
    head = "\n".join(lines[:first]) + "\n"
    tail = "".join("\n" + line for line in lines[last + 1 :])
    return RecordLayout(head, tuple(lines[first : last + 1]), tail)


def field_order(layout: RecordLayout, records: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of ``layout.lines`` in the greedy order (``prefix_order.field_order``, weighed in tokens)."""
    lines = [PromptTemplate.parse(line) for line in layout.lines]
    return prefix_order.field_order([[line.render(record) for record in records] for line in lines], count_tokens)


def row_order(prompts: Sequence[str]) -> list[int]:
    """Row indices with the prompts in sorted order (ties keep the table's order)."""
    return prefix_order.row_order([(prompt,) for prompt in prompts])


def shared_tokens(first: str, second: str) -> int:
    """Tokens of the longest common prefix of two prompts, cut where both still agree on whole words."""
    length = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        length += 1
    if length == len(first) == len(second):
        return count_tokens(first)
    common = first[:length]
    cut = max(common.rfind(" "), common.rfind("\n"))
    return count_tokens(common[: cut + 1]) if cut >= 0 else 0


def adjacent_shared_tokens(prompts: Sequence[str]) -> list[int]:
    """Per prompt, the tokens it shares with the one sent just before it (0 for the first)."""
    return [0] + [shared_tokens(prompts[index - 1], prompts[index]) for index in range(1, len(prompts))]


def check_order(order: str) -> str:
    if order not in ORDERS:
        raise ConfigError("order", f"unknown order {order!r}; allowed: {', '.join(ORDERS)}")
    return order


def fields_template(template: PromptTemplate, records: Sequence[Mapping[str, Any]]) -> PromptTemplate:
    """The template with its field lines in the greedy order; ``ConfigError`` unless it is in record form."""
    layout = record_layout(template)
    if layout is None:
        raise ConfigError(
            "order",
            "'fields' needs a template in record form: an instruction line, then one line per placeholder "
            "(e.g. 'Is the review positive?\\nTitle: {title}\\nReview: {review}'); use 'rows' for this template",
        )
    return layout.template(field_order(layout, records))


def _placeholders(line: str) -> int:
    try:
        return sum(1 for _, field, _, _ in string.Formatter().parse(line) if field is not None)
    except ValueError:  # a brace pair split over two lines: not a record line
        return -1
