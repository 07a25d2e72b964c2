"""Every code block of README.md and docs/**/*.md, run or checked (docs/architecture.md, "Docs that run").

One test per block, named ``PAGE:LLINE``; what it did with the block is printed (``pytest -rA`` or ``-s``
shows it): each command's treatment (run, run on a smaller workload, parsed only and why, ``make -n``, pip
arguments checked), the kind a YAML block was validated as, or why a block is not run.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from slosched.cli.main import run
from slosched.perf.profile_fit import PARAMS, MeasuredProfile
from tests.docs.blocks import REPO, BlockError, DocBlock, all_blocks, classify, logical_lines
from tests.docs.commands import check_usage, cli_path, execute, plan, words
from tests.docs.data_blocks import check_json, check_toml, check_yaml
from tests.docs.live import (
    PageServer,
    documented_ports,
    environment,
    needs_bash,
    run_bash,
    run_python,
    shims,
    start_server,
)

BLOCKS = all_blocks()
FILES = {
    block.annotation.argument: block.text for block in BLOCKS if block.annotation and block.annotation.kind == "file"
}
SERVERS = {block.page: block for block in BLOCKS if block.annotation and block.annotation.kind == "server"}


def _require(tool: str) -> None:
    """curl, jq and bash come with `make servers`; without them the live blocks skip, unless
    SLOSCHED_REQUIRE_SERVERS=1 (make test), where they fail."""
    if shutil.which(tool) is None:
        message = f"{tool} is not installed (make servers installs it)"
        if os.environ.get("SLOSCHED_REQUIRE_SERVERS") == "1":
            pytest.fail(message)
        pytest.skip(message)


def _profile(folder: Path) -> None:
    costs = tuple(1e-4 for _ in PARAMS)  # flat costs: any profile will do to check a scenario that names one
    MeasuredProfile(costs, costs, costs, num_steps=len(PARAMS), residual_rel_std=0.0).save(folder / "engine.json")


def _demo_report(folder: Path) -> None:
    code = run(["simulate", "examples/demo.yaml", "--report", "reports/demo", "--set", "workload.num_jobs=30"])
    assert code == 0, "the stand-in for `make demo`'s report failed"


# Inputs the docs name as a reader's own files or another command's output, made when a block names them.
PLACEHOLDERS: dict[str, Callable[[Path], object]] = {
    "BurstGPT.csv": lambda folder: shutil.copy(
        REPO / "src/slosched/workloads/data/samples/burstgpt.csv", folder / "BurstGPT.csv"
    ),
    "engine.json": _profile,
    "reports/demo/requests.parquet": _demo_report,
}


@pytest.fixture(scope="session")
def docs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What every block finds in its folder: the repository's examples/ and src/, and the `file` blocks."""
    folder = tmp_path_factory.mktemp("docs")
    for name in ("examples", "src"):
        (folder / name).symlink_to(REPO / name)
    for name, text in FILES.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture(scope="session")
def shell_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return environment(shims(tmp_path_factory.mktemp("shims")))


class Servers:
    """Each page's server block, started on first use and stopped at the end of the session."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder, self.env = folder, env
        self.running: dict[str, PageServer] = {}
        self.failed: dict[str, str] = {}  # a server that did not start is not tried again by each block

    def of(self, page: str) -> PageServer:
        assert page not in self.failed, f"the server block of {page} did not start: {self.failed[page]}"
        if page not in self.running:
            assert page in SERVERS, f"{page}: a block runs against a server, but the page has no server block"
            folder = self.folder / page.replace("/", "_")
            folder.mkdir()
            try:
                self.running[page] = start_server(SERVERS[page], FILES, folder, self.env)
            except Exception as error:
                self.failed[page] = str(error)[:600]
                raise
        return self.running[page]


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory, shell_env: dict[str, str]) -> Iterator[Servers]:
    pool = Servers(tmp_path_factory.mktemp("servers"), shell_env)
    yield pool
    for running in pool.running.values():
        running.stop()


@pytest.fixture
def workdir(docs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh folder per block holding what docs_dir holds; the current directory while the block runs.
    SLOSCHED_HARDWARE is restored afterwards (a `--hardware` command sets it for its process)."""
    for entry in docs_dir.iterdir():
        (tmp_path / entry.name).symlink_to(entry)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLOSCHED_HARDWARE", raising=False)
    return tmp_path


def _against_server(block: DocBlock, servers: Servers) -> tuple[str, str]:
    """The block's text with the page server's ports, and a note; the text as is when it names none."""
    server = SERVERS.get(block.page)
    if server is None or not any(port in block.text for port in documented_ports(server, FILES)):
        return block.text, ""
    return servers.of(block.page).substitute(block.text), f" against the server block of {block.page}"


def _shell(block: DocBlock, workdir: Path, env: dict[str, str], servers: Servers) -> None:
    lines = logical_lines(block)
    if not needs_bash(lines):
        for step in plan(lines):
            print(step.describe())
            execute(step)
        return
    for tool in ("bash", "curl", "jq"):
        if tool == "bash" or re.search(rf"\b{tool}\b", block.text):
            _require(tool)
    text, note = _against_server(block, servers)
    print(f"bash{note}:\n{run_bash(text, workdir, env)[-600:]}")


def _is_live(block: DocBlock) -> bool:
    """Blocks that start processes (servers, bash, Python): `slow`, so `make test-fast` leaves them out."""
    try:
        kind = classify(block)
    except BlockError:  # the test itself reports it
        return False
    return kind in ("server", "python") or (kind == "shell" and needs_bash(logical_lines(block)))


@pytest.mark.parametrize(
    "block", [pytest.param(b, id=b.id, marks=[pytest.mark.slow] if _is_live(b) else []) for b in BLOCKS]
)
def test_doc_block(block: DocBlock, workdir: Path, shell_env: dict[str, str], servers: Servers) -> None:
    kind = classify(block)
    if kind in ("output", "layout", "skip"):
        reason = block.annotation.argument if block.annotation is not None else ""
        pytest.skip(f"{kind}: not run" + (f" ({reason})" if reason else ""))
    for name, make in PLACEHOLDERS.items():
        if name in block.text:
            make(workdir)
    if kind == "usage":
        print(f"usage: options {check_usage(block.text)} exist")
    elif kind == "yaml":
        print(f"YAML checked as {check_yaml(block, workdir)}")
    elif kind == "json":
        print(check_json(block))
    elif kind == "toml":
        print(check_toml(block))
    elif kind == "server":
        for line in logical_lines(block):
            if line.startswith("slosched "):
                cli_path(words(line)[1:])
        print(f"server: started, ports {servers.of(block.page).ports}")
    elif kind == "python":
        text, note = _against_server(block, servers)
        print(f"python{note}:\n{run_python(text, workdir, shell_env)[-600:]}")
    else:
        _shell(block, workdir, shell_env, servers)
