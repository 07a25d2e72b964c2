"""``--where``: a row filter over the table's columns, parsed and rebuilt, never passed to DuckDB as text.

The grammar is a small boolean language (no functions, no subqueries, no statements)::

    expr      := and_expr (OR and_expr)*
    and_expr  := not_expr (AND not_expr)*
    not_expr  := NOT not_expr | '(' expr ')' | predicate
    predicate := operand [ cmp operand | [NOT] IN '(' literal, ... ')' | [NOT] BETWEEN operand AND operand
                         | [NOT] LIKE|ILIKE 'pattern' | IS [NOT] NULL ]
    operand   := column | "quoted column" | number | 'string' | TRUE | FALSE | NULL
    cmp       := = | == | != | <> | < | <= | > | >=

Columns must exist in the table; literals become bound parameters. So the SQL DuckDB runs is built only
from quoted column names, fixed keywords and ``?`` placeholders, whatever the input was.

Hand-written, not a library (issue 23). The filter already runs inside DuckDB (the SQL built here, with
bound parameters); what is hand-written is the parsing. sqlglot (30.x) parsing the same text costs x4.0
this whole compile (``slosched bench libs``, row ``where``, two runs of 9 interleaved rounds each, 2-core
machine) and its import adds 110-190 ms to ``slosched relquery``'s start, which runs this once; and the
library's tree would still need a walk of about this size that admits only columns, literals and the
allowed operators and rebuilds the SQL with placeholders, while the errors here name the character where
the filter went wrong (the tests pin them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slosched.core.errors import ConfigError

FIELD = "--where"
MAX_LENGTH = 4096
MAX_DEPTH = 32
ALLOWED = (
    "allowed: column comparisons (= != <> < <= > >=), AND/OR/NOT, parentheses, IN (...), BETWEEN ... AND ..., "
    "LIKE/ILIKE 'pattern', IS [NOT] NULL, numbers, 'strings', TRUE/FALSE/NULL"
)
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
    | (?P<string>'(?:[^']|'')*')
    | (?P<quoted>"(?:[^"]|"")+")
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,|-)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "BETWEEN", "LIKE", "ILIKE", "IS", "NULL", "TRUE", "FALSE"}
_COMPARISONS = {"=": "=", "==": "=", "!=": "<>", "<>": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


@dataclass(frozen=True, slots=True)
class WhereClause:
    """SQL over quoted columns with ``?`` placeholders, and the values bound to them, in order."""

    sql: str
    params: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # number, string, quoted, word, op, end
    text: str
    position: int


def _short(text: str) -> str:
    return text if len(text) <= 64 else text[:61] + "..."


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.lastgroup is None:
            bad = text[position:].lstrip()[:1]
            raise ConfigError(FIELD, f"unexpected {bad!r} at character {position + 1}; {ALLOWED}")
        tokens.append(_Token(match.lastgroup, match.group(match.lastgroup), match.start(match.lastgroup)))
        position = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str, columns: Sequence[str]) -> None:
        self.tokens = _tokenize(text)
        self.index = 0
        self.columns = list(columns)
        self.params: list[Any] = []
        self.depth = 0

    # --- tokens ----------------------------------------------------------------------------------------
    def peek(self, offset: int = 0) -> _Token:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def keyword(self, *names: str) -> bool:
        token = self.peek()
        return token.kind == "word" and token.text.upper() in names

    def take(self) -> _Token:
        token = self.peek()
        self.index += 1
        return token

    def expect_keyword(self, name: str) -> None:
        if not self.keyword(name):
            self.fail(f"expected {name}")
        self.take()

    def expect_op(self, op: str) -> None:
        if self.peek().kind != "op" or self.peek().text != op:
            self.fail(f"expected {op!r}")
        self.take()

    def fail(self, message: str) -> None:
        token = self.peek()
        found = "the end" if token.kind == "end" else repr(_short(token.text))
        raise ConfigError(FIELD, f"{message} at character {token.position + 1}, found {found}; {ALLOWED}")

    # --- grammar ---------------------------------------------------------------------------------------
    def expr(self) -> str:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail(f"nested deeper than {MAX_DEPTH} levels")
        parts = [self.and_expr()]
        while self.keyword("OR"):
            self.take()
            parts.append(self.and_expr())
        self.depth -= 1
        return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"

    def and_expr(self) -> str:
        parts = [self.not_expr()]
        while self.keyword("AND"):
            self.take()
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")"

    def not_expr(self) -> str:
        if self.keyword("NOT"):
            self.take()
            self.depth += 1
            if self.depth > MAX_DEPTH:
                self.fail(f"nested deeper than {MAX_DEPTH} levels")
            inner = self.not_expr()
            self.depth -= 1
            return f"(NOT {inner})"
        if self.peek().kind == "op" and self.peek().text == "(":
            self.take()
            inner = self.expr()
            self.expect_op(")")
            return inner
        return self.predicate()

    def predicate(self) -> str:
        left = self.operand()
        token = self.peek()
        if token.kind == "op" and token.text in _COMPARISONS:
            self.take()
            return f"({left} {_COMPARISONS[token.text]} {self.operand()})"
        negated = self.keyword("NOT") and self.peek(1).kind == "word"
        if negated:
            self.take()
        prefix = "NOT " if negated else ""
        if self.keyword("IN"):
            self.take()
            self.expect_op("(")
            values = [self.literal()]
            while self.peek().kind == "op" and self.peek().text == ",":
                self.take()
                values.append(self.literal())
            self.expect_op(")")
            return f"({left} {prefix}IN ({', '.join(values)}))"
        if self.keyword("BETWEEN"):
            self.take()
            low = self.operand()
            self.expect_keyword("AND")
            return f"({left} {prefix}BETWEEN {low} AND {self.operand()})"
        if self.keyword("LIKE", "ILIKE"):
            word = self.take().text.upper()
            if self.peek().kind != "string":
                self.fail(f"{word} takes a 'quoted pattern'")
            return f"({left} {prefix}{word} {self.literal()})"
        if negated:
            self.fail("expected IN, BETWEEN or LIKE after NOT")
        if self.keyword("IS"):
            self.take()
            is_not = self.keyword("NOT")
            if is_not:
                self.take()
            self.expect_keyword("NULL")
            return f"({left} IS {'NOT ' if is_not else ''}NULL)"
        return left  # a bare boolean column or literal

    def operand(self) -> str:
        token = self.peek()
        if token.kind == "quoted" or (token.kind == "word" and token.text.upper() not in _KEYWORDS):
            return self.column()
        return self.literal()

    def column(self) -> str:
        token = self.take()
        name = token.text[1:-1].replace('""', '"') if token.kind == "quoted" else token.text
        if self.peek().kind == "op" and self.peek().text == "(":
            raise ConfigError(FIELD, f"function calls are not allowed ({_short(name)!r}(...)); {ALLOWED}")
        if name not in self.columns:
            raise ConfigError(
                FIELD, f"unknown column {_short(name)!r}; the table has: {', '.join(self.columns)}; {ALLOWED}"
            )
        return '"' + name.replace('"', '""') + '"'

    def literal(self) -> str:
        token = self.take()
        sign = ""
        if token.kind == "op" and token.text == "-" and self.peek().kind == "number":
            sign, token = "-", self.take()
        if token.kind == "number":
            text = sign + token.text
            self.params.append(float(text) if any(c in text for c in ".eE") else int(text))
            return "?"
        if token.kind == "string":
            self.params.append(token.text[1:-1].replace("''", "'"))
            return "?"
        if token.kind == "word" and token.text.upper() in ("TRUE", "FALSE", "NULL"):
            return token.text.upper()
        self.index -= 1
        self.fail("expected a column or a literal")
        raise AssertionError  # fail() always raises


def compile_where(text: str, columns: Sequence[str]) -> WhereClause:
    """Parse ``text`` against ``columns``; raises ``ConfigError`` naming ``--where`` and what is allowed."""
    if len(text) > MAX_LENGTH:
        raise ConfigError(FIELD, f"at most {MAX_LENGTH} characters, got {len(text)}")
    parser = _Parser(text, columns)
    if parser.peek().kind == "end":
        raise ConfigError(FIELD, f"is empty; {ALLOWED}")
    sql = parser.expr()
    if parser.peek().kind != "end":
        parser.fail("unexpected text after the filter")
    return WhereClause(sql, tuple(parser.params))
