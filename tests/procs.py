"""Processes of this machine from ``/proc`` (tests that check nothing outlived a command or a pool)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

# Fields of /proc/PID/stat after the command name: state, parent pid, process group.
STATE, PARENT, GROUP = 0, 1, 2


def live_pids(field: int, value: int) -> Iterator[int]:
    """Pids of live (not zombie) processes whose stat ``field`` (PARENT or GROUP) equals ``value``."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended while we looked
            if int(fields[field]) == value and fields[STATE] != "Z":
                yield int(entry.name)
