"""The code blocks of README.md and docs/**/*.md, read with markdown-it-py, and what the docs test does with
each (docs/architecture.md, "Docs that run").

A block is classified by its language and by the ``<!-- docs-test: ... -->`` comment right before it; a block
this module cannot place is an error naming the block and the ways to mark it, so no new block escapes.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parents[2]

ANNOTATION = re.compile(r"<!--\s*docs-test:(?P<body>.*?)-->", re.S)
# Annotation kinds: the block is not run (output, layout), checked another way (usage, server, file), skipped
# with a reason, or a YAML block whose kind its keys cannot tell.
NOT_RUN = ("output", "layout")
YAML_KINDS = ("scenario", "gateway", "picker", "hardware")
KINDS = (*NOT_RUN, "usage", "server", "file", "skip", *YAML_KINDS)
SHELL_LANGUAGES = ("bash", "sh", "shell", "console")
# Untagged blocks run when every command line starts with one of these (a pip of a virtualenv included).
COMMAND_WORDS = ("slosched", "make", "curl", "pip", "python")


class BlockError(Exception):
    """A block (or an annotation) the docs test does not know what to do with."""


@dataclass(frozen=True, slots=True)
class Annotation:
    kind: str
    argument: str = ""  # a skip's reason, a file's name


@dataclass(frozen=True, slots=True)
class DocBlock:
    page: str  # relative to the repository
    line: int  # the opening fence's line, 1-based
    language: str  # the info string's first word, lower case; "" untagged
    text: str
    annotation: Annotation | None

    @property
    def id(self) -> str:
        return f"{self.page}:L{self.line}"


def parse_annotation(body: str, where: str) -> Annotation:
    """``output``, ``skip (REASON)``, ``file NAME``, ...: one kind, its argument where it takes one."""
    kind, _, argument = body.strip().partition(" ")
    argument = argument.strip()
    if kind not in KINDS:
        raise BlockError(f"{where}: unknown docs-test annotation {kind!r}; known: {', '.join(KINDS)}")
    if kind == "skip":
        if not (argument.startswith("(") and argument.endswith(")") and argument[1:-1].strip()):
            raise BlockError(f"{where}: a skip needs its reason: <!-- docs-test: skip (why it cannot run) -->")
        return Annotation(kind, argument[1:-1].strip())
    if kind == "file":
        if not argument or len(argument.split()) != 1:
            raise BlockError(f"{where}: name the file: <!-- docs-test: file NAME -->")
        return Annotation(kind, argument)
    if argument:
        raise BlockError(f"{where}: annotation {kind!r} takes no argument, got {argument!r}")
    return Annotation(kind)


def blocks_of(page: str, text: str) -> list[DocBlock]:
    """Every fenced and indented code block of one page, with its annotation; an annotation that does not
    sit right before a block is an error (it would check nothing)."""
    tokens = MarkdownIt("commonmark").parse(text)
    blocks: list[DocBlock] = []
    for index, token in enumerate(tokens):
        match = ANNOTATION.search(token.content) if token.type == "html_block" else None
        if match is not None:
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            if following is None or following.type not in ("fence", "code_block"):
                raise BlockError(f"{page}:L{token.map[0] + 1 if token.map else 0}: annotation without a block after it")
        if token.type not in ("fence", "code_block"):
            continue
        line = token.map[0] + 1 if token.map else 0
        before = tokens[index - 1] if index else None
        found = ANNOTATION.search(before.content) if before is not None and before.type == "html_block" else None
        annotation = parse_annotation(found.group("body"), f"{page}:L{line}") if found else None
        language = token.info.split()[0].lower() if token.info.strip() else ""
        blocks.append(DocBlock(page, line, language, token.content, annotation))
    return blocks


def doc_pages(root: Path = REPO) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def all_blocks(root: Path = REPO) -> list[DocBlock]:
    return [block for path in doc_pages(root) for block in blocks_of(str(path.relative_to(root)), path.read_text())]


def logical_lines(block: DocBlock) -> list[str]:
    """The block's command lines: continuation lines joined, blank and comment-only lines dropped; in a
    ``console`` block only the ``$ `` lines (the rest is output)."""
    lines = block.text.splitlines()
    if block.language == "console":  # a command's continuation lines follow its `$ ` line
        kept: list[str] = []
        for line in lines:
            if line.startswith("$ ") or (kept and kept[-1].endswith("\\")):
                kept.append(line.removeprefix("$ "))
        lines = kept
    joined = re.sub(r"\s*\\\n\s*", " ", "\n".join(lines))
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def first_word(line: str) -> str:
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # a quote spanning lines: the shell reads it, and so does the bash run
        words = line.split()
    return Path(words[0]).name if words else ""


def is_command_block(block: DocBlock) -> bool:
    lines = logical_lines(block)
    return bool(lines) and all(first_word(line) in COMMAND_WORDS for line in lines)


def classify(block: DocBlock) -> str:
    """What the test does with the block: ``shell``, ``server``, ``usage``, ``yaml``, ``python``, ``json``,
    ``toml``, or a kind it does not run (``output``, ``layout``, ``skip``). Raises ``BlockError``."""
    kind = block.annotation.kind if block.annotation is not None else None
    if kind in (*NOT_RUN, "skip", "usage"):
        return kind
    shell = block.language in SHELL_LANGUAGES or (block.language == "" and is_command_block(block))
    if kind == "server":
        if not shell:
            raise BlockError(f"{block.id}: a server block holds shell commands (```bash)")
        return "server"
    if block.language in ("yaml", "yml"):
        return "yaml"
    if kind in YAML_KINDS:
        raise BlockError(f"{block.id}: annotation {kind!r} is for ```yaml blocks")
    if kind == "file" and block.language not in ("json", "toml"):
        raise BlockError(f"{block.id}: a file block is YAML, JSON or TOML")
    if block.language in ("python", "py", "json", "toml"):
        return "python" if block.language == "py" else block.language
    if shell:
        return "shell"
    raise BlockError(
        f"{block.id}: cannot tell what this {block.language or 'untagged'} block is. Tag commands ```bash, or "
        "put one of these right before it: <!-- docs-test: output -->, <!-- docs-test: layout -->, "
        "<!-- docs-test: usage -->, <!-- docs-test: skip (reason) --> (docs/architecture.md, 'Docs that run')"
    )
