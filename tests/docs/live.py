"""Blocks run as a reader runs them: bash and Python blocks in a fresh folder with ``slosched``, ``python`` and
a strict ``curl`` first on PATH, against the page's server block when they name its ports.

A server block's lines are long-running commands (stub backends, ``slosched serve``); they are started in
the background on free ports (every port the block and the files it names mention is moved, and so is every
block run against it) and stopped by PID at the end of the session.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from slosched.devtools.stub import free_port
from tests.docs.blocks import DocBlock, logical_lines
from tests.docs.commands import words

# Ports as the docs write them: `--port 8001`, `port: 8080`, `host:8080`.
PORT = re.compile(r"(?:--port[ =]|port:\s*|:)(\d{4,5})\b")
TIMEOUT_S = 120.0


def shims(folder: Path) -> Path:
    """``slosched`` and ``python`` of this interpreter, and a ``curl`` that fails on an HTTP error status
    (exit 22, the body still shown) and says why: a doc's request that the gateway refuses fails its block."""
    curl = shutil.which("curl") or "curl"
    scripts = {
        "slosched": f'#!/bin/sh\nexec "{sys.executable}" -m slosched.cli "$@"\n',
        "python": f'#!/bin/sh\nexec "{sys.executable}" "$@"\n',
        "curl": f'#!/bin/sh\nexec "{curl}" --fail-with-body --show-error "$@"\n',
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, script in scripts.items():
        path = folder / name
        path.write_text(script)
        path.chmod(0o755)
    return folder


def environment(shim_folder: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{shim_folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def needs_bash(lines: list[str]) -> bool:
    """A block runs through bash when it uses the shell (variables, substitutions, pipes, redirections,
    background jobs) or calls curl; otherwise its commands are steps (``commands.plan``)."""
    for line in lines:
        try:
            tokens = words(line)
            raw = words(line, keep_quotes=True)
        except ValueError:  # a quote spanning lines
            return True
        expands = any(re.search(r"\$[({A-Za-z_]|`", token) for token in raw if not token.startswith("'"))
        operator = any(set(token) <= set("|&;<>") and token not in ("&&", ";") for token in tokens)
        if expands or operator or re.match(r"[A-Za-z_]\w*=", tokens[0]) or Path(tokens[0]).name == "curl":
            return True
    return False


def _check(done: subprocess.CompletedProcess[str], what: str) -> str:
    output = (done.stdout + done.stderr).strip()
    assert done.returncode == 0, f"{what} exited {done.returncode}:\n{output[-1500:]}"
    return output


def run_bash(text: str, cwd: Path, env: dict[str, str]) -> str:
    script = f"set -euo pipefail\n{text}"
    done = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    return _check(done, "the block (bash)")


def run_python(text: str, cwd: Path, env: dict[str, str]) -> str:
    (cwd / "block.py").write_text(text)
    done = subprocess.run(
        [sys.executable, "block.py"], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    return _check(done, "the block (python)")


def documented_ports(server: DocBlock, files: dict[str, str]) -> list[str]:
    """The ports a server block and the files it names listen on or reach."""
    texts = [server.text, *(text for name, text in files.items() if name in server.text)]
    return sorted({port for text in texts for port in PORT.findall(text)})


@dataclass
class PageServer:
    """A page's server block, running: ``ports`` maps each documented port to the one used here."""

    ports: dict[str, str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def substitute(self, text: str) -> str:
        return PORT.sub(lambda m: m.group(0).replace(m.group(1), self.ports.get(m.group(1), m.group(1))), text)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def start_server(server: DocBlock, files: dict[str, str], folder: Path, env: dict[str, str]) -> PageServer:
    """Start every line of ``server`` in the background in ``folder`` (the files it names written there,
    ports moved) and wait until each port answers ``/health``."""
    running = PageServer({port: str(free_port()) for port in documented_ports(server, files)})
    for name, text in files.items():
        if name in server.text:
            (folder / name).write_text(running.substitute(text))
    try:
        for index, line in enumerate(logical_lines(server)):
            argv = [word for word in words(running.substitute(line)) if word != "&"]
            log = folder / f"server-{index}.log"
            with log.open("wb") as sink:
                running.processes.append(
                    subprocess.Popen(argv, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=sink)
                )
            running.logs.append(log)
        _wait_healthy(running)
    except BaseException:
        running.stop()
        raise
    return running


def _wait_healthy(running: PageServer, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    waiting = set(running.ports.values())
    while waiting and time.monotonic() < deadline:
        exited = [
            log for process, log in zip(running.processes, running.logs, strict=True) if process.poll() is not None
        ]
        assert not exited, f"a server line exited: {exited[0].read_text()[-800:]}"
        for port in sorted(waiting):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    waiting.discard(port)
        time.sleep(0.1)
    tails = " | ".join(log.read_text()[-300:] for log in running.logs)
    assert not waiting, f"ports {sorted(waiting)} not healthy in {timeout_s:g} s: {tails}"
