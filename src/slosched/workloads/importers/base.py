"""What every trace importer shares: the row it yields, its protocol, and CSV reading with errors that
name the file, the line and the column.

Invariants: a row has ``input_tokens >= 0`` and ``output_tokens >= 0`` (rows with zeros are dropped later,
counted, not silently); ``arrival_s`` is in the trace's own clock (only differences matter); every bad
value raises :class:`ConfigError` whose field is ``"FILE line N, column C"``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from slosched.core.errors import ConfigError

MAX_ECHO = 64  # never echo more of a user's value than this
_EPOCH = datetime(2020, 1, 1, tzinfo=UTC)


@dataclass(slots=True, frozen=True)
class TraceRow:
    """One request read from a trace. ``line`` is where it came from (for error messages)."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    line: int
    template: str = ""
    tenant: str = "default"
    prefix_key: str | None = None
    prefix_tokens: int = 0
    session_id: str | None = None


class TraceImporter(Protocol):
    """A trace format: ``rows`` yields at most ``limit`` rows (None: all) in file order."""

    @property
    def name(self) -> str: ...

    @property
    def summary(self) -> str: ...

    def rows(self, path: Path, limit: int | None) -> Iterator[TraceRow]: ...


def show(value: object) -> str:
    """``repr`` of a user value, truncated so an error never echoes a huge cell."""
    text = repr(value)
    return text if len(text) <= MAX_ECHO else text[: MAX_ECHO - 3] + "..."


def where(path: Path, line: int, column: str | None = None) -> str:
    return f"{path} line {line}" + (f", column {column}" if column else "")


def csv_rows(path: Path, columns: Sequence[str], limit: int | None) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) of a CSV file with a header; every name in ``columns`` must be in the header."""
    try:
        stream = open(path, encoding="utf-8-sig", newline="")  # noqa: SIM115 - closed in the finally below
    except OSError as error:
        raise ConfigError(str(path), f"cannot read: {error.strerror or error}") from None
    try:
        reader = csv.reader(stream)
        header = [name.strip() for name in next(reader, [])]
        missing = [name for name in columns if name not in header]
        if missing:
            found = ", ".join(header)[:200] or "(empty file)"
            raise ConfigError(where(path, 1, missing[0]), f"missing column; the header has: {found}")
        index = {name: header.index(name) for name in columns}
        count = 0
        for cells in reader:
            if limit is not None and count >= limit:
                return
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) < len(header):
                absent = header[len(cells)]
                raise ConfigError(where(path, reader.line_num, absent), f"row has {len(cells)} of {len(header)} cells")
            yield reader.line_num, {name: cells[i].strip() for name, i in index.items()}
            count += 1
    except csv.Error as error:
        raise ConfigError(where(path, reader.line_num), f"bad CSV: {error}") from None
    except UnicodeDecodeError:
        raise ConfigError(str(path), "not UTF-8 text") from None
    finally:
        stream.close()


def token_count(value: str, path: Path, line: int, column: str) -> int:
    """A token count cell: an integer >= 0 (``"12.0"`` is accepted, ``"12.5"`` is not)."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0 or number != int(number):
        raise ConfigError(where(path, line, column), f"expected an integer >= 0, got {show(value)}")
    return int(number)


def seconds(value: str, path: Path, line: int, column: str, scale: float = 1.0) -> float:
    """A time cell as a finite number, times ``scale`` (1e-3 for milliseconds)."""
    try:
        number = float(value) * scale
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise ConfigError(where(path, line, column), f"expected a number, got {show(value)}")
    return number


def timestamp_s(value: str, path: Path, line: int, column: str) -> float:
    """A datetime cell (``2023-11-16 18:17:03.9799600``, 7 fractional digits allowed, optional zone) as
    seconds since 2020-01-01 UTC; without a zone it is read as UTC, since only differences matter."""
    text = value.strip().replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    fraction = 0.0
    if dot:
        digits = rest[: len(rest) - len(rest.lstrip("0123456789"))]
        # datetime keeps 6 fractional digits; Azure writes 7, so the fraction is added separately.
        fraction = float(f"0.{digits}") if digits else 0.0
        text = head + rest[len(digits) :]
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            where(path, line, column), f"expected a datetime like 2023-11-16 18:17:03.97, got {show(value)}"
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    # Seconds since 2020 rather than 1970 keep float64 steps near 3e-8 s, below the 7th fractional digit.
    return (stamp - _EPOCH).total_seconds() + fraction
