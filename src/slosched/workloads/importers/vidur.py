"""Vidur request traces: ``arrived_at`` (seconds), ``num_prefill_tokens``, ``num_decode_tokens``.

Other columns (Vidur writes e.g. ``request_id`` or ``num_total_tokens``) are ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from slosched.workloads.importers.base import TraceRow, csv_rows, seconds, token_count

COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")


@dataclass(slots=True, frozen=True)
class VidurImporter:
    name: str = "vidur"
    summary: str = "Vidur CSV: arrived_at, num_prefill_tokens, num_decode_tokens"

    def rows(self, path: Path, limit: int | None) -> Iterator[TraceRow]:
        for line, row in csv_rows(path, COLUMNS, limit):
            yield TraceRow(
                arrival_s=seconds(row["arrived_at"], path, line, "arrived_at"),
                input_tokens=token_count(row["num_prefill_tokens"], path, line, "num_prefill_tokens"),
                output_tokens=token_count(row["num_decode_tokens"], path, line, "num_decode_tokens"),
                line=line,
                template=self.name,
            )


VIDUR = VidurImporter()
