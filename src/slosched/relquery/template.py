"""Prompt templates with ``{column}`` placeholders, applied to every row of a table.

The literal text before the first placeholder is the *shared prefix*: identical for every row, so a
prefix cache can reuse its KV blocks across the rows of one relQuery. ``{{`` and ``}}`` are literal
braces. Placeholders are plain column names (no format specs, conversions, indexing or positional
fields), so a template can never run code or reach attributes.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slosched.core.errors import ConfigError


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """Invariants: ``columns`` is non-empty, in order of first appearance, without repeats; ``prefix`` is
    the rendered literal text before the first placeholder."""

    text: str
    columns: tuple[str, ...]
    prefix: str

    @classmethod
    def parse(cls, text: str) -> PromptTemplate:
        if not isinstance(text, str) or not text.strip():
            raise ConfigError("template", "expected a non-empty string with {column} placeholders")
        try:
            parts = list(string.Formatter().parse(text))
        except ValueError as error:
            raise ConfigError("template", f"malformed braces: {error} (write {{{{ or }}}} for a brace)") from None
        columns: list[str] = []
        prefix: list[str] = []
        seen_field = False
        for literal, field, spec, conversion in parts:
            if not seen_field:
                prefix.append(literal)
            if field is None:
                continue
            seen_field = True
            if not field.strip() or field.isdigit() or spec or conversion or any(c in field for c in ".[]"):
                raise ConfigError(
                    "template",
                    f"placeholder {{{field}{'!' + conversion if conversion else ''}}} must be "
                    "a plain column name such as {title}",
                )
            if field not in columns:
                columns.append(field)
        if not columns:
            raise ConfigError("template", "has no {column} placeholder; a relQuery needs at least one")
        return cls(text=text, columns=tuple(columns), prefix="".join(prefix))

    def render(self, row: Mapping[str, Any]) -> str:
        """The prompt for one row; NULL values render as an empty string."""
        missing = [column for column in self.columns if column not in row]
        if missing:
            raise ConfigError("template", f"row lacks columns {missing}")
        return self.text.format_map({column: _text(row[column]) for column in self.columns})

    def lead(self, row: Mapping[str, Any], depth: int = 1) -> str:
        """The rendered text right after the shared prefix, up to the placeholder after the first ``depth``:
        those fields' values and the literals after them. Rows with equal leads share their prompts this far."""
        parts = list(string.Formatter().parse(self.text))
        pieces: list[str] = []
        for index in range(min(depth, len(parts))):
            field = parts[index][1]
            if field is None:  # the template's trailing literal: nothing follows it
                break
            following = parts[index + 1][0] if index + 1 < len(parts) else ""
            pieces.append(_text(row[field]) + following)  # the parser has already turned {{ and }} into braces
        return "".join(pieces)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
