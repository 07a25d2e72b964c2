"""BurstGPT: ``Timestamp`` (seconds from the trace start), ``Model``, ``Request tokens``, ``Response tokens``,
``Total tokens``, ``Log Type``.

The template is ``burstgpt/<Model>`` (ChatGPT and GPT-4 have different output laws, which is what a
predictor should learn apart) and the tenant is the log type (``Conversation log`` -> ``conversation``,
``API log`` -> ``api``). ``Total tokens`` is redundant and not read. Failed requests (``Response tokens``
0) are dropped by the common zero-token rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from slosched.workloads.importers.base import TraceRow, csv_rows, seconds, token_count

COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Log Type")


def _tenant(log_type: str) -> str:
    text = log_type.strip().lower().removesuffix(" log").strip()
    return text.replace(" ", "-") or "default"


@dataclass(slots=True, frozen=True)
class BurstGptImporter:
    name: str = "burstgpt"
    summary: str = "BurstGPT CSV: Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type"

    def rows(self, path: Path, limit: int | None) -> Iterator[TraceRow]:
        for line, row in csv_rows(path, COLUMNS, limit):
            model = row["Model"] or "unknown"
            yield TraceRow(
                arrival_s=seconds(row["Timestamp"], path, line, "Timestamp"),
                input_tokens=token_count(row["Request tokens"], path, line, "Request tokens"),
                output_tokens=token_count(row["Response tokens"], path, line, "Response tokens"),
                line=line,
                template=f"burstgpt/{model[:64]}",
                tenant=_tenant(row["Log Type"]),
            )


BURSTGPT = BurstGptImporter()
