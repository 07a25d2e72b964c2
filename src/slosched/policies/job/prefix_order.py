"""The order of a relQuery's rows and fields that lets a prefix cache reuse the most (shared by runtimes).

Liu et al. (MLSys'25, "Optimizing LLM Queries in Relational Data Analytics Workloads") reorder a table
before its rows become prompts: fields whose values repeat go first, and rows with equal leading values go
next to each other, so consecutive prompts share long prefixes. This module holds the two decisions on
plain strings, so the table planner (``relquery.order``) and the gateway's relQuery jobs make the same ones:

- ``field_order``: greedy, in the spirit of the paper's Greedy Group Recursion with one field order for the
  whole table. Each next field is the one whose values, within the groups of rows that agree on every field
  already chosen, repeat over the most weight (sum over groups and values of (count - 1) x the value's
  weight: tokens, or characters where no token count is at hand). Fields that never repeat keep their
  given order, last.
- ``row_order``: rows sorted by their field values in the chosen order (ties keep the table's order), so
  rows with equal leading values are adjacent: in sorted order the longest prefix a row shares with any
  earlier row is the one it shares with its predecessor, which an LRU cache holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence


def field_order(values: Sequence[Sequence[str]], weight: Callable[[str], int]) -> list[int]:
    """Field indices in the greedy order; ``values[field][row]`` is the field's rendered text in a row."""
    weights = [{text: weight(text) for text in set(column)} for column in values]
    num_rows = len(values[0]) if values else 0
    chosen: list[int] = []
    groups: list[list[int]] = [list(range(num_rows))] if num_rows > 1 else []
    left = list(range(len(values)))
    while left and groups:
        scores = {field: _repeated_weight(values[field], weights[field], groups) for field in left}
        best = max(left, key=lambda field: (scores[field], -field))
        if scores[best] <= 0:
            break
        chosen.append(best)
        left.remove(best)
        groups = _split(groups, values[best])
    return chosen + left


def row_order(keys: Sequence[tuple[str, ...]]) -> list[int]:
    """Row indices sorted by ``keys[row]`` (each row's field values, leading field first); stable."""
    return sorted(range(len(keys)), key=lambda row: keys[row])


def _repeated_weight(values: Sequence[str], weights: dict[str, int], groups: Sequence[Sequence[int]]) -> int:
    total = 0
    for group in groups:
        counts = Counter(values[row] for row in group)
        total += sum((count - 1) * weights[value] for value, count in counts.items())
    return total


def _split(groups: Sequence[Sequence[int]], values: Sequence[str]) -> list[list[int]]:
    """Each group split by the rows' value of the field just chosen; groups of one row can share no more."""
    split: list[list[int]] = []
    for group in groups:
        by_value: dict[str, list[int]] = {}
        for row in group:
            by_value.setdefault(values[row], []).append(row)
        split.extend(rows for rows in by_value.values() if len(rows) > 1)
    return split
