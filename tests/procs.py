"""Processes of this machine from ``/proc`` (tests that check nothing outlived a command or a pool)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

# Fields of /proc/PID/stat after the command name: state, parent pid, process group, user and system time.
STATE, PARENT, GROUP, USER_TICKS, SYSTEM_TICKS = 0, 1, 2, 11, 12


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


def group_cpu_s(group: int) -> float:
    """CPU seconds the live processes of process group ``group`` have used (a process's work done, whatever
    else holds the machine's cores: what a test waits on instead of wall time)."""
    ticks = 0
    for pid in live_pids(GROUP, group):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[USER_TICKS]) + int(fields[SYSTEM_TICKS])
    return ticks / os.sysconf("SC_CLK_TCK")
