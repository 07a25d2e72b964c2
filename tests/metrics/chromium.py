"""Drive headless Chromium from the command line (no Python browser bindings needed).

``render`` loads a page with JavaScript and returns the DOM after scripts ran plus every console message;
``screenshot`` writes a PNG. Chromium logs console output (any level) to stderr as ``INFO:CONSOLE`` lines
with ``--enable-logging=stderr``; the report itself logs nothing, so any such line is a finding.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
)
_CONSOLE = re.compile(r":CONSOLE[^\]]*\] (.*)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Rendered:
    dom: str
    console: list[str]


def chromium_or_skip() -> str:
    """The Chromium binary; skips the test when absent unless ``SLOSCHED_REQUIRE_BROWSER=1`` (then fails)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("SLOSCHED_REQUIRE_BROWSER") == "1":
        pytest.fail("SLOSCHED_REQUIRE_BROWSER=1 but no chromium binary is on PATH (apt-get install chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium)")


def _run(binary: str, page: Path, action: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="slosched-chromium-") as profile:
        command = [binary, *_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=5000", *action]
        return subprocess.run(
            [*command, page.resolve().as_uri()], capture_output=True, text=True, timeout=timeout_s, check=False
        )


def render(binary: str, page: Path, timeout_s: float = 90.0, width: int | None = None) -> Rendered:
    """``width``: the window width in CSS pixels (layout checks); None leaves Chromium's default."""
    size = [f"--window-size={width},1000"] if width else []
    done = _run(binary, page, [*size, "--dump-dom"], timeout_s)
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    return Rendered(dom=done.stdout, console=_CONSOLE.findall(done.stderr))


def screenshot(binary: str, page: Path, out: Path, width: int = 1280, height: int = 1800) -> Rendered:
    done = _run(binary, page, [f"--window-size={width},{height}", f"--screenshot={out.resolve()}"], 90.0)
    assert done.returncode == 0 and out.exists(), f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    return Rendered(dom="", console=_CONSOLE.findall(done.stderr))
