"""Command lines of shell blocks, one step each, and what the docs test does with each step.

``slosched`` commands are parsed by the CLI's own parser (typer's click: a renamed command or option fails)
and then run in process, on a smaller workload where they simulate one, unless they run for minutes or
need what a test machine lacks (vLLM, a GPU, a cluster): those are parsed only, with the reason. ``make``
targets are dry-run (``make -n``) and the ``slosched`` commands in their recipes parsed; ``pip install``
arguments are checked against pyproject.toml; ``python -m MODULE ARGS`` is parsed by the module's argparse
parser without running it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shlex
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn
from unittest import mock

import typer
from packaging.requirements import Requirement
from typer.core import TyperGroup

from slosched.cli.main import app, run
from tests.docs.blocks import REPO, BlockError

# Commands parsed only: they run for minutes or need a server, an engine, a GPU or a cluster.
PARSE_ONLY = {
    ("sweep",): "capacity searches run for minutes, --quick included",
    ("bench",): "a benchmark runs for a minute or more, --quick included",
    ("native", "build"): "compiles the simulator with mypyc",
    ("up",): "starts vLLM servers (make vllm-venv)",
    ("serve",): "a server: a page's server block starts one",
    ("picker",): "a gRPC server in front of a cluster's pods",
    ("profile",): "measures a running engine",
}
# Commands that simulate a scenario's workload run on this many jobs (the docs' files have thousands).
REDUCED = {("simulate",), ("compare",), ("trace", "dump"), ("demo",)}
SMALLER = ("--set", "workload.num_jobs=60")
OPERATORS = ("&&", ";")


@dataclass(frozen=True, slots=True)
class Step:
    argv: tuple[str, ...]
    treatment: str  # "run", "run on 60 jobs", "parse only (why)", "make -n", "pip", "python -m"

    def describe(self) -> str:
        return f"{shlex.join(self.argv)}  ->  {self.treatment}"


def words(line: str, keep_quotes: bool = False) -> list[str]:
    """Shell words and operators of one command line (``&&``, ``|`` stand alone), comments dropped; quotes
    kept on the words with ``keep_quotes``. ValueError when a quote does not close on the line."""
    lexer = shlex.shlex(line, posix=not keep_quotes, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def cli_path(args: list[str]) -> tuple[str, ...]:
    """Parse ``slosched ARGS`` with the CLI's own parser, running nothing (eager options such as
    ``--version`` excepted); returns the command path, e.g. ``("trace", "dump")``."""
    command = typer.main.get_command(app)
    try:
        context = command.make_context("slosched", list(args))
    except typer.Exit as done:  # an eager option (--version) did its work while parsing
        assert done.exit_code == 0, f"slosched {shlex.join(args)} exited {done.exit_code} while parsing"
        return ()
    path: list[str] = []
    while isinstance(command, TyperGroup):
        # typer's group keeps the subcommand and its arguments where click's protected args live.
        rest = [*context._protected_args, *context.args]
        if not rest:
            break
        name, sub, rest = command.resolve_command(context, rest)
        assert name is not None and sub is not None
        path.append(name)
        command, context = sub, sub.make_context(name, rest, parent=context)
    return tuple(path)


def plan(lines: list[str]) -> list[Step]:
    """One step per command of the lines (``&&`` and ``;`` separate commands). After a ``pip install`` of a
    local package the block's ``slosched`` commands are parsed only: the test does not install it."""
    steps: list[Step] = []
    installed = False
    for line in lines:
        tokens = words(line)
        commands: list[list[str]] = [[]]
        for token in tokens:
            if token in OPERATORS:
                commands.append([])
            else:
                commands[-1].append(token)
        for argv in filter(None, commands):
            step = _step(argv, installed)
            installed = installed or (step.treatment == "pip" and any(_is_path(arg) for arg in argv))
            steps.append(step)
    return steps


def _step(argv: list[str], installed: bool) -> Step:
    word = Path(argv[0]).name
    if word == "slosched":
        path = cli_path(argv[1:])
        if installed:
            return Step(tuple(argv), "parse only (needs the package the block installs)")
        if path == ("bench",) and "list" in argv:
            return Step(tuple(argv), "run")
        if path in PARSE_ONLY:
            return Step(tuple(argv), f"parse only ({PARSE_ONLY[path]})")
        if path in REDUCED:
            return Step((*argv, *SMALLER), "run on 60 jobs")
        return Step(tuple(argv), "run")
    if word == "make":
        return Step(tuple(argv), "make -n")
    if word in ("pip", "pip3") and argv[1:2] == ["install"]:
        return Step(tuple(argv), "pip")
    if word in ("python", "python3") and argv[1:2] == ["-m"]:
        return Step(tuple(argv), "python -m")
    raise BlockError(f"no treatment for the command {shlex.join(argv)!r} (slosched, make, pip install, python -m)")


def execute(step: Step) -> None:
    """Carry out one step in the current directory; AssertionError (or the CLI's own error) when it fails."""
    if step.treatment.startswith("run"):
        # In-process: a command may make state process-wide (``--hardware`` sets $SLOSCHED_HARDWARE, which
        # later tests would inherit), so the environment is restored after it.
        saved = dict(os.environ)
        try:
            code = run(list(step.argv[1:]))
        finally:
            os.environ.clear()
            os.environ.update(saved)
        assert code == 0, f"{shlex.join(step.argv)} exited {code}"
    elif step.treatment == "make -n":
        make_dry_run(list(step.argv[1:]))
    elif step.treatment == "pip":
        check_pip(list(step.argv[2:]))
    elif step.treatment == "python -m":
        parse_module_args(step.argv[2], list(step.argv[3:]))


def make_dry_run(targets: list[str]) -> list[tuple[str, ...]]:
    """``make -n TARGET``: the target exists and its recipe expands; the ``slosched`` commands of the recipe
    (and of what it depends on) parse. Returns their command paths."""
    # Not a sub-make of a `make test` running this: its flags (jobserver descriptors) are not ours.
    env = {key: value for key, value in os.environ.items() if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    command = ["make", "-n", "-C", str(REPO), *targets]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, f"make -n {' '.join(targets)}: {done.stderr.strip()[-400:]}"
    parsed = []
    for line in done.stdout.splitlines():
        if line.startswith(".venv/bin/slosched "):
            tokens = words(line)
            end = next((i for i, token in enumerate(tokens) if set(token) <= set("|&;")), len(tokens))
            parsed.append(cli_path(tokens[1:end]))
    return parsed


def _is_path(argument: str) -> bool:
    return argument == "." or "/" in argument


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def check_pip(arguments: list[str]) -> None:
    """``pip install`` arguments: a local path holds a package; ``slosched[EXTRAS]`` names extras that exist;
    another requirement is one pyproject.toml declares, with the same version bounds."""
    project = _pyproject()["project"]
    declared = [Requirement(text) for text in project["dependencies"]]
    declared += [Requirement(text) for texts in project["optional-dependencies"].values() for text in texts]
    for argument in arguments:
        if argument.startswith("-"):
            continue
        if _is_path(argument):
            folder = REPO / argument
            assert (folder / "pyproject.toml").is_file(), f"pip install {argument}: no pyproject.toml there"
            continue
        requirement = Requirement(argument)
        if requirement.name == project["name"]:
            unknown = requirement.extras - set(project["optional-dependencies"])
            assert not unknown, f"pip install {argument}: no extra {sorted(unknown)} in pyproject.toml"
            continue
        same = [item for item in declared if item.name == requirement.name]
        assert any(item.specifier == requirement.specifier for item in same), (
            f"pip install {argument}: pyproject.toml declares {[str(item) for item in same] or 'no such package'}"
        )


class _Parsed(Exception):
    """Raised in place of the module's work once its arguments parsed."""


def parse_module_args(module: str, arguments: list[str]) -> None:
    """``python -m MODULE ARGS``: the module's ``main(argv)`` parses ARGS with its argparse parser and is
    stopped right after, before any work (a bad option exits 2 here)."""
    target = importlib.import_module(module)
    assert callable(getattr(target, "main", None)), f"python -m {module}: no main(argv) to parse the arguments with"
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        original(self, *args, **kwargs)
        raise _Parsed

    try:
        with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_then_stop):
            target.main(arguments)
    except _Parsed:
        return
    except SystemExit as exit_:
        raise AssertionError(f"python -m {module} {shlex.join(arguments)}: its parser exited {exit_.code}") from None
    raise AssertionError(f"python -m {module}: main() returned without parsing arguments")


def check_usage(text: str) -> list[str]:
    """A synopsis (``slosched CMD ... [--opt X] ...``): the command resolves and every ``--option`` it names
    is one of the command's options. Returns the options checked."""
    line = " ".join(text.replace("\\\n", " ").split())
    parts = line.split()
    assert parts[:1] == ["slosched"], f"a usage block starts with `slosched`: {line[:60]!r}"
    command = typer.main.get_command(app)
    path: list[str] = []
    for word in parts[1:]:
        if not isinstance(command, TyperGroup):
            break
        sub = command.commands.get(word)
        assert sub is not None, f"slosched {' '.join(path)}: no command {word!r}"
        path.append(word)
        command = sub
    options = sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line)))
    known = {option for param in command.params for option in (*param.opts, *param.secondary_opts)}
    missing = [option for option in options if option not in known]
    assert not missing, f"slosched {' '.join(path)} has no option {missing}; it has {sorted(known)}"
    return options
