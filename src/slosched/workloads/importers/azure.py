"""Azure LLM inference traces: ``TIMESTAMP, ContextTokens, GeneratedTokens`` (one request a row).

``azure`` reads the 2023 release (AzureLLMInferenceTrace_{conv,code}.csv), ``azure2024`` the 2024 week-long
release (same columns; datetime stamps with 7 fractional digits and, in some copies, a zone suffix). Both
use :func:`~slosched.workloads.importers.base.timestamp_s`; they differ in name and template only, so a
trace mixing both keeps them apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from slosched.workloads.importers.base import TraceRow, csv_rows, timestamp_s, token_count

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


@dataclass(slots=True, frozen=True)
class AzureImporter:
    name: str
    summary: str

    def rows(self, path: Path, limit: int | None) -> Iterator[TraceRow]:
        for line, row in csv_rows(path, COLUMNS, limit):
            yield TraceRow(
                arrival_s=timestamp_s(row["TIMESTAMP"], path, line, "TIMESTAMP"),
                input_tokens=token_count(row["ContextTokens"], path, line, "ContextTokens"),
                output_tokens=token_count(row["GeneratedTokens"], path, line, "GeneratedTokens"),
                line=line,
                template=self.name,
            )


AZURE_2023 = AzureImporter("azure", "Azure LLM inference 2023 CSV: TIMESTAMP, ContextTokens, GeneratedTokens")
AZURE_2024 = AzureImporter("azure2024", "Azure LLM inference 2024 CSV: same columns, 7-digit fractional stamps")
