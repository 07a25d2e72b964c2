"""Runtime control without restarting vLLM: a JSON file the engine polls.

The document holds any keys of the plugin config (``config.py``: policy keys, ``bypass``, ``drain``,
``export_interval_s``, ``step_log_file``, ...) plus an optional ``version`` echoed in the state export as
``plugin.control_version`` (so a writer can see when its change took effect). It is merged over the
start-up configuration, not over the previous control document: deleting a key (or the file) reverts to
the start-up value. An invalid document is rejected as a whole; the engine keeps its current settings and
reports the error in ``plugin.control_error``. The engine polls the file's modification stamp at most every
``control_poll_s`` from its scheduling loop (so a change applies at the next step; an idle engine applies
it when the next request arrives). Writers should use ``write_control`` (atomic replace).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slosched.core.errors import ConfigError
from slosched.vllm_ext.config import PluginConfig, config_from_mapping, load_json_object
from slosched.vllm_ext.state_export import write_atomic


@dataclass(slots=True, frozen=True)
class ControlUpdate:
    """A parsed control document: the effective config, or the reason it was rejected."""

    config: PluginConfig | None
    version: Any
    error: str = ""


class ControlFile:
    """Polls one control file; ``poll`` returns an update only when the file changed."""

    __slots__ = ("_last_poll_s", "_stamp", "path", "poll_s")

    def __init__(self, path: Path, poll_s: float) -> None:
        self.path = path
        self.poll_s = poll_s
        self._stamp: tuple[int, int] | None = None
        self._last_poll_s = float("-inf")

    def poll(self, now_s: float, startup: PluginConfig) -> ControlUpdate | None:
        if now_s - self._last_poll_s < self.poll_s:
            return None
        self._last_poll_s = now_s
        try:
            stat = os.stat(self.path)
            stamp: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            stamp = None
        if stamp == self._stamp:
            return None
        self._stamp = stamp
        if stamp is None:
            return ControlUpdate(startup, None)  # file removed: back to the start-up configuration
        return parse_control(self.path, startup)


def parse_control(path: Path, startup: PluginConfig) -> ControlUpdate:
    try:
        data = load_json_object(path.read_text(), f"control file {path}")
        version = data.pop("version", None)
        return ControlUpdate(config_from_mapping(data, startup), version)
    except (ConfigError, OSError) as error:
        return ControlUpdate(None, None, str(error))


def write_control(path: Path, document: Mapping[str, Any]) -> None:
    """Atomically replace the control file (the engine never reads half a document)."""
    json.dumps(document)  # fail here, in the writer, on values JSON cannot hold
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, document)
