"""A Text-to-SQL workflow run through the gateway's job API against a real SQLite database.

One question is one gateway job (``POST /v1/jobs`` with the SLO, so its deadline drives every call's
budget), whose stages are posted as the pipeline goes:

1. ``generate``: K parallel chat calls (schema + question; ``seed`` = candidate index, for diversity);
2. each candidate's SQL (``extract_sql``) runs in SQLite (read-only, timeout, row cap) in worker threads;
3. ``revise-1`` .. ``revise-N``: one call per candidate that still errors, with the SQL and the error in
   the prompt (no more rounds once every candidate runs, or once the SLO has passed);
4. ``unit-tests``: one call asking the model for expected result properties (JSON), checked together with
   the caller's ``Checks`` and, when given, equality with ``reference_sql``'s result;
5. pick: majority vote on result sets among candidates passing the tests (ties by candidate order).

Invariant: ``run`` answers every question with a ``Text2SQLResult`` — a pipeline that finds no SQL, a
rejected job or a failed call is a status (``no_valid_sql``, ``tests_failed``, ``rejected``, ``failed``),
never an exception; the gateway job always ends in one terminal state (the runner completes it).
``Text2SQLResult.to_job_spec`` records the run as a workflow trace that ``WorkflowRunner.replay`` replays.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from slosched.client.sdk import AsyncClient, GatewayError
from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.devtools.text2sql_sql import (
    Checks,
    ExecResult,
    describe_schema,
    execute_sql,
    extract_sql,
    parse_llm_checks,
    reference_checks,
    vote,
)

SYSTEM_PROMPT = "You are an expert SQLite developer. Answer with exactly one SQLite SELECT query in a ```sql block."
TESTS_PROMPT = (
    'Describe the result a correct query returns, as JSON with the keys "columns" (number of columns) and '
    '"non_empty" (true when at least one row must come back). Answer with the JSON object only.'
)


@dataclass(slots=True)
class Attempt:
    """One LLM answer for a candidate and what its SQL did in SQLite."""

    stage: str
    text: str | None
    sql: str | None
    error: str | None
    rows: int = 0
    exec_s: float = 0.0


@dataclass(slots=True)
class Candidate:
    """A candidate's history; ``result`` is its last successful execution (None while it errors)."""

    index: int
    attempts: list[Attempt] = field(default_factory=list)
    result: ExecResult | None = None
    failures: list[str] = field(default_factory=list)
    passed: bool = False

    @property
    def sql(self) -> str | None:
        return self.result.sql if self.result is not None else None

    def last_error(self) -> tuple[str | None, str]:
        """(last SQL tried or None, its error) for the revision prompt."""
        last = self.attempts[-1]
        if last.sql is None:
            return None, "the answer contained no SQL query:\n" + (last.text or "")[:500]
        return last.sql, last.error or ""


@dataclass(slots=True)
class StageTrace:
    """What a stage cost, for replay: (prompt tokens, output tokens) per call and the SQLite time after it."""

    name: str
    calls: list[tuple[int, int]] = field(default_factory=list)
    tool_s: float = 0.0


@dataclass(slots=True)
class Text2SQLResult:
    """The answer to one question. ``status``: ok | no_valid_sql | tests_failed | rejected | failed."""

    question: str
    status: str
    reason: str = ""
    sql: str | None = None
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    votes: int = 0
    chosen: int | None = None
    candidates: list[Candidate] = field(default_factory=list)
    llm_calls: int = 0
    llm_checks: Checks | None = None
    job_id: str = ""
    job_status: str = ""
    latency_s: float = 0.0
    job_latency_s: float | None = None
    slo_s: float | None = None
    slo_met: bool | None = None
    stages: list[StageTrace] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able summary (rows as lists, per-candidate attempts)."""
        return {
            "question": self.question,
            "status": self.status,
            "reason": self.reason,
            "sql": self.sql,
            "columns": list(self.columns),
            "rows": [list(row) for row in self.rows],
            "votes": self.votes,
            "chosen": self.chosen,
            "llm_calls": self.llm_calls,
            "job_id": self.job_id,
            "job_status": self.job_status,
            "latency_s": self.latency_s,
            "job_latency_s": self.job_latency_s,
            "slo_s": self.slo_s,
            "slo_met": self.slo_met,
            "candidates": [
                {
                    "index": c.index,
                    "sql": c.sql,
                    "passed": c.passed,
                    "failures": c.failures,
                    "attempts": [vars_of(a) for a in c.attempts],
                }
                for c in self.candidates
            ],
        }

    def to_job_spec(self, job_id: str | None = None, arrival_s: float = 0.0) -> JobSpec:
        """This run as a workflow trace (recorded token counts; SQLite time as tool steps), the input of
        ``WorkflowRunner.replay`` and ``trace_io.save_jobs``. Needs at least one recorded LLM call."""
        stages: list[StageSpec] = []
        for trace in self.stages:
            stages.append(StageSpec(trace.name, tuple(CallSpec(max(p, 1), max(o, 1)) for p, o in trace.calls)))
            if trace.tool_s > 0:  # its own stage: the simulator and the replay agree a tool step comes after
                stages.append(StageSpec(f"{trace.name}-sqlite", tool_duration_s=trace.tool_s))
        if not stages:
            raise ConfigError("to_job_spec", "the run recorded no stage (it was rejected before any call)")
        return JobSpec(
            job_id or self.job_id or "text2sql",
            JobKind.WORKFLOW,
            arrival_s,
            tuple(stages),
            slo_s=self.slo_s,
            template="text2sql",
        )


def vars_of(attempt: Attempt) -> dict[str, Any]:
    return {
        "stage": attempt.stage,
        "text": attempt.text,
        "sql": attempt.sql,
        "error": attempt.error,
        "rows": attempt.rows,
        "exec_s": attempt.exec_s,
    }


class _JobEnded(Exception):
    """The gateway ended the job (a call failed) or refused a stage: the run stops with this status."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


class Text2SQLRunner:
    """Runs Text-to-SQL questions against ``db_path`` through a gateway (see the module docstring).

    ``candidates`` K >= 1 parallel generations, ``max_revisions`` N >= 0 revision rounds, ``llm_tests``
    adds the model-written unit-test stage (advisory: dropped when it rejects every candidate that passes
    the caller's checks), ``sql_timeout_s`` / ``max_rows`` bound each execution.
    """

    def __init__(
        self,
        client: AsyncClient,
        db_path: str | Path,
        candidates: int = 3,
        max_revisions: int = 2,
        *,
        llm_tests: bool = True,
        max_tokens: int = 256,
        temperature: float = 0.7,
        sql_timeout_s: float = 2.0,
        max_rows: int = 1000,
        model: str | None = None,
    ) -> None:
        for name, value, low in (
            ("candidates", candidates, 1),
            ("max_revisions", max_revisions, 0),
            ("max_tokens", max_tokens, 1),
            ("max_rows", max_rows, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(name, f"expected an integer >= {low}, got {value!r}")
        if not sql_timeout_s > 0:
            raise ConfigError("sql_timeout_s", f"expected a number > 0, got {sql_timeout_s!r}")
        self.db_path = Path(db_path)
        if not self.db_path.is_file():
            raise ConfigError("db_path", f"no SQLite database at {self.db_path}")
        self.client = client
        self.candidates, self.max_revisions, self.llm_tests = candidates, max_revisions, llm_tests
        self.max_tokens, self.temperature, self.model = max_tokens, temperature, model
        self.sql_timeout_s, self.max_rows = sql_timeout_s, max_rows
        self.schema = describe_schema(self.db_path)

    async def run(
        self,
        question: str,
        reference_sql: str | None = None,
        slo_s: float | None = None,
        checks: Checks | None = None,
        tenant: str = "default",
    ) -> Text2SQLResult:
        """Answer ``question``; ``reference_sql`` (its result must be matched) and ``checks`` are the unit
        tests the caller supplies. Raises ConfigError only for a reference query that does not run."""
        if reference_sql is not None:
            checks = await asyncio.to_thread(
                reference_checks, self.db_path, reference_sql, self.sql_timeout_s, self.max_rows, checks
            )
        result = Text2SQLResult(question, status="running", slo_s=slo_s)
        begin = time.monotonic()
        try:
            created = await self.client.create_job("workflow", slo_s, template="text2sql", tenant=tenant)
        except (GatewayError, httpx.HTTPError) as error:  # refused, or the gateway cannot be reached
            result.status, result.reason = "rejected", f"{type(error).__name__}: {error}"
            result.latency_s = time.monotonic() - begin
            return result
        result.job_id = created["id"]
        try:
            await self._pipeline(result, checks or Checks(), begin)
        except _JobEnded as ended:
            result.status, result.reason = ended.status, ended.reason
        await self._finish_job(result, begin)
        return result

    async def _pipeline(self, result: Text2SQLResult, checks: Checks, begin: float) -> None:
        result.candidates = [Candidate(index) for index in range(self.candidates)]
        question = result.question
        bodies = [self._body(self._generate_messages(question), seed=index) for index in range(self.candidates)]
        await self._attempt_stage(result, "generate", result.candidates, bodies)
        for round_index in range(1, self.max_revisions + 1):
            failing = [c for c in result.candidates if c.result is None]
            if not failing:
                break
            if result.slo_s is not None and time.monotonic() - begin > result.slo_s:
                _note(result, f"revisions stopped after round {round_index - 1}: the SLO has passed")
                break
            bodies = [
                self._body(self._revise_messages(question, c), seed=c.index + round_index * self.candidates)
                for c in failing
            ]
            await self._attempt_stage(result, f"revise-{round_index}", failing, bodies)
        runnable = [c for c in result.candidates if c.result is not None]
        if not runnable:
            rounds = len(result.candidates[0].attempts) - 1
            result.status = "no_valid_sql"
            _note(result, f"no valid SQL: none of {self.candidates} candidate(s) ran after {rounds} revision round(s)")
            return
        if self.llm_tests:
            texts = await self._stage(result, "unit-tests", [self._body(self._tests_messages(question), seed=0)])
            result.llm_checks = parse_llm_checks(texts[0])
        self._judge(result, runnable, checks)

    async def _attempt_stage(
        self, result: Text2SQLResult, name: str, candidates: list[Candidate], bodies: list[dict[str, Any]]
    ) -> None:
        """Post one stage (a call per candidate), then run every extracted query in parallel threads."""
        texts = await self._stage(result, name, bodies)
        sqls = [extract_sql(text) for text in texts]
        executions = await asyncio.gather(
            *(
                asyncio.to_thread(execute_sql, self.db_path, sql, self.sql_timeout_s, self.max_rows)
                for sql in sqls
                if sql is not None
            )
        )
        by_sql = iter(executions)
        for candidate, text, sql in zip(candidates, texts, sqls, strict=True):
            if sql is None:
                candidate.attempts.append(Attempt(name, text, None, "no SQL query in the answer"))
                continue
            executed = next(by_sql)
            candidate.attempts.append(Attempt(name, text, sql, executed.error, len(executed.rows), executed.elapsed_s))
            if executed.ok:
                candidate.result = executed
        result.stages[-1].tool_s = max((execution.elapsed_s for execution in executions), default=0.0)

    async def _stage(self, result: Text2SQLResult, name: str, bodies: list[dict[str, Any]]) -> list[str | None]:
        """Post a stage of calls; their texts in order. A failed call ends the job (``_JobEnded``)."""
        result.llm_calls += len(bodies)
        try:
            answer = await self.client.run_stage(result.job_id, name, bodies)
        except (GatewayError, httpx.HTTPError) as error:
            raise _JobEnded("failed", f"stage {name!r}: {error}") from error
        calls = answer["results"]
        result.stages.append(
            StageTrace(name, [(int(c.get("prompt_tokens") or 1), int(c.get("output_tokens") or 1)) for c in calls])
        )
        if answer["job"]["status"] != "running":
            raise _JobEnded("failed", answer["job"]["reason"] or f"stage {name!r} failed")
        return [call.get("text") for call in calls]

    def _judge(self, result: Text2SQLResult, runnable: list[Candidate], checks: Checks) -> None:
        """Unit tests, then the vote among the candidates passing them."""
        ran = [(candidate, candidate.result) for candidate in runnable if candidate.result is not None]
        for candidate, executed in ran:
            candidate.failures = checks.failures(executed)
        passing = [(c, executed) for c, executed in ran if not c.failures]
        llm = result.llm_checks
        if llm is not None and passing:
            advised = [(c, executed) for c, executed in passing if not llm.failures(executed)]
            if advised:
                for candidate, executed in passing:
                    candidate.failures = [f"model-written test: {text}" for text in llm.failures(executed)]
                passing = advised
            else:
                _note(result, "the model-written unit tests rejected every candidate; they were ignored")
        for candidate, _ in passing:
            candidate.passed = True
        chosen = vote([(candidate.index, executed) for candidate, executed in passing])
        if chosen is None:
            result.status = "tests_failed"
            _note(result, f"{len(ran)} candidate(s) ran but none passed the unit tests")
            return
        index, votes = chosen
        picked = result.candidates[index].result
        assert picked is not None  # vote returns the index of a candidate that ran
        result.status, result.chosen, result.votes = "ok", index, votes
        result.sql, result.columns, result.rows = picked.sql, picked.columns, picked.rows

    async def _finish_job(self, result: Text2SQLResult, begin: float) -> None:
        """Complete the gateway job (unless it already ended) and read its gateway-side latency."""
        try:
            state = await self.client.job(result.job_id)
            if state["status"] == "running":
                state = await self.client.complete_job(result.job_id)
        except (GatewayError, httpx.HTTPError) as error:
            _note(result, f"job bookkeeping: {error}")
            state = {"status": "unknown", "latency_s": None, "slo_met": None}
        result.job_status = str(state["status"])
        result.job_latency_s = state.get("latency_s")
        result.latency_s = time.monotonic() - begin
        met = state.get("slo_met")
        result.slo_met = None if met is None else bool(met)

    def _body(self, messages: list[dict[str, str]], seed: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": seed,
        }
        if self.model is not None:
            body["model"] = self.model
        return body

    def _context(self, question: str) -> str:
        return f"Database schema (SQLite):\n{self.schema}\n\nQuestion: {question}\n"

    def _generate_messages(self, question: str) -> list[dict[str, str]]:
        ask = "\nWrite one SQLite query that answers the question."
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": self._context(question) + ask},
        ]

    def _revise_messages(self, question: str, candidate: Candidate) -> list[dict[str, str]]:
        sql, error = candidate.last_error()
        tried = f"This query failed:\n```sql\n{sql}\n```\n" if sql is not None else ""
        text = f"{self._context(question)}\n{tried}Error: {error}\n\nWrite a corrected SQLite query."
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text}]

    def _tests_messages(self, question: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": self._context(question) + "\n" + TESTS_PROMPT}]


def _note(result: Text2SQLResult, text: str) -> None:
    result.reason = f"{result.reason}; {text}" if result.reason else text
