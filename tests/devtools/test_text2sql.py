"""The Text-to-SQL workflow runner: SQL extraction, SQLite execution, checks and vote, and the whole
pipeline through a real gateway in front of a scripted OpenAI-compatible backend (the tiny random model
writes garbage SQL, so the answers are scripted per prompt: broken first, fixed after a revision prompt)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from slosched.client.sdk import AsyncClient, WorkflowRunner
from slosched.core.errors import ConfigError
from slosched.devtools.stub import serve_app
from slosched.devtools.text2sql_runner import Text2SQLResult, Text2SQLRunner
from slosched.devtools.text2sql_sql import create_sample_database
from slosched.gateway.http.app import Gateway
from slosched.gateway.ops.config import parse_config
from tests.gateway.helpers import stub_config

GERMANY = "SELECT COUNT(*) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.country = 'Germany'"
QUESTION = "How many orders did customers from Germany place?"
Script = Callable[[str, dict[str, Any]], str]


class ScriptedLLM:
    """An OpenAI-compatible chat backend whose answer is ``script(last user message, body)``; ``status``
    other than 200 makes every generation fail."""

    def __init__(self, script: Script, status: int = 200) -> None:
        self.script, self.status = script, status
        self.prompts: list[str] = []

    def app(self) -> Starlette:
        async def chat(request: Request) -> Response:
            body = json.loads(await request.body())
            prompt = body["messages"][-1]["content"]
            self.prompts.append(prompt)
            if self.status != 200:
                return JSONResponse({"error": {"message": "scripted failure"}}, status_code=self.status)
            text = self.script(prompt, body)
            usage = {"prompt_tokens": len(prompt) // 4, "completion_tokens": max(len(text) // 4, 1)}
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            return JSONResponse({"id": "s", "object": "chat.completion", "choices": [choice], "usage": usage})

        async def completions(request: Request) -> Response:  # what a trace replay sends: token ids, fixed length
            tokens = int(json.loads(await request.body())["max_tokens"])
            choice = {"index": 0, "text": "x" * tokens, "finish_reason": "length"}
            return JSONResponse({"id": "s", "choices": [choice], "usage": {"completion_tokens": tokens}})

        async def ok(request: Request) -> Response:
            return PlainTextResponse("ok" if request.url.path == "/health" else "")

        return Starlette(
            routes=[
                Route("/v1/chat/completions", chat, methods=["POST"]),
                Route("/v1/completions", completions, methods=["POST"]),
                Route("/health", ok),
                Route("/metrics", ok),
            ]
        )


@contextlib.asynccontextmanager
async def scripted_gateway(llm: ScriptedLLM) -> AsyncIterator[AsyncClient]:
    async with contextlib.AsyncExitStack() as stack:
        backend = await stack.enter_async_context(serve_app(llm.app()))
        gateway = Gateway(parse_config(stub_config([backend], max_attempts=1)))
        url = await stack.enter_async_context(serve_app(gateway.app, lifespan="on"))
        yield await stack.enter_async_context(AsyncClient(url, timeout_s=30))


@pytest.fixture(scope="module")
def shop_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_sample_database(tmp_path_factory.mktemp("t2s") / "shop.db")


def run_question(llm: ScriptedLLM, db: Path, question: str = QUESTION, **options: Any) -> Text2SQLResult:
    run_options = {key: options.pop(key) for key in ("reference_sql", "slo_s", "checks") if key in options}

    async def scenario() -> Text2SQLResult:
        async with scripted_gateway(llm) as client:
            return await Text2SQLRunner(client, db, **options).run(question, **run_options)

    return asyncio.run(scenario())


def fixing_script(prompt: str, body: dict[str, Any]) -> str:
    """Candidate 0: broken SQL, fixed when the prompt carries the error; 1: right (prose around it);
    2: runs but answers a different question. The unit-test prompt gets a JSON answer."""
    if '"columns"' in prompt:
        return 'Expected: {"columns": 1, "non_empty": true}'
    if "Error:" in prompt:
        assert "syntax error" in prompt
        return f"Sorry, fixed:\n```sql\n{GERMANY};\n```"
    return {
        0: "```sql\nSELEC COUNT(*) FROM orders\n```",
        1: f"Sure! {GERMANY}; hope it helps",
        2: "SELECT COUNT(*) FROM orders",
    }[body["seed"]]


def test_pipeline_revises_tests_picks_and_replays(shop_db: Path) -> None:
    llm = ScriptedLLM(fixing_script)

    async def scenario() -> None:
        async with scripted_gateway(llm) as client:
            result = await Text2SQLRunner(client, shop_db, candidates=3, max_revisions=2).run(
                QUESTION, reference_sql=GERMANY, slo_s=30
            )
            state = await client.job(result.job_id)
            replayed = await WorkflowRunner(client).replay([result.to_job_spec()])
        assert result.status == "ok", result.reason
        assert result.rows == ((50,),) and result.sql == GERMANY
        assert (result.chosen, result.votes) == (0, 2)  # 0 (after its revision) and 1 agree; ties by order
        first, second = result.candidates[0].attempts
        assert first.stage == "generate" and first.error is not None and "syntax error" in first.error
        assert second.stage == "revise-1" and second.error is None and second.rows == 1
        assert len(result.candidates[1].attempts) == 1 and result.candidates[1].passed
        assert not result.candidates[2].passed and "differs from the reference" in result.candidates[2].failures[0]
        assert result.llm_calls == 5 == len(llm.prompts)  # 3 generations + 1 revision + 1 unit-test call
        assert [stage["name"] for stage in state["stages"]] == ["generate", "revise-1", "unit-tests"]
        assert state["status"] == result.job_status == "completed" and result.slo_met
        assert result.job_latency_s is not None and 0 < result.job_latency_s <= result.latency_s
        assert replayed[0].status == "completed"  # the recorded run replays as a workflow trace
        assert json.dumps(result.as_dict())

    asyncio.run(scenario())


def test_no_candidate_ever_valid_is_a_result_not_an_exception(shop_db: Path) -> None:
    llm = ScriptedLLM(lambda prompt, body: "I cannot answer that.")
    result = run_question(llm, shop_db, candidates=2, max_revisions=2)
    assert result.status == "no_valid_sql" and "no valid SQL" in result.reason
    assert result.sql is None and result.rows == ()
    assert result.llm_calls == 6 == len(llm.prompts)  # 2 candidates x (1 generation + 2 revisions)
    assert "no SQL query" in llm.prompts[-1]  # the revision prompt says what was wrong
    assert result.job_status == "completed"


def test_sqlite_timeout_is_revised(shop_db: Path) -> None:
    endless = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r"

    def script(prompt: str, body: dict[str, Any]) -> str:
        return GERMANY if "timed out" in prompt else endless

    result = run_question(
        ScriptedLLM(script), shop_db, candidates=1, max_revisions=1, llm_tests=False, sql_timeout_s=0.2
    )
    assert result.status == "ok" and result.rows == ((50,),)
    first = result.candidates[0].attempts[0]
    assert first.sql == endless and first.error == "query timed out after 0.2 s"
    assert 0.2 <= first.exec_s < 1.5


def test_model_written_unit_tests_steer_the_pick_and_are_dropped_when_they_reject_all(shop_db: Path) -> None:
    by_country = "SELECT country, COUNT(*) FROM customers GROUP BY country"

    def script(columns: int) -> Script:
        def answer(prompt: str, body: dict[str, Any]) -> str:
            if '"columns"' in prompt:
                return json.dumps({"columns": columns, "non_empty": True})
            return "SELECT COUNT(*) FROM customers" if body["seed"] == 0 else by_country

        return answer

    steered = run_question(ScriptedLLM(script(1)), shop_db, candidates=3, max_revisions=0)
    assert steered.status == "ok" and steered.chosen == 0 and steered.rows == ((24,),)  # beats the 2-vote group
    assert "model-written test" in steered.candidates[1].failures[0]
    ignored = run_question(ScriptedLLM(script(5)), shop_db, candidates=3, max_revisions=0)
    assert ignored.status == "ok" and ignored.chosen == 1 and ignored.votes == 2
    assert "rejected every candidate" in ignored.reason


def test_tests_failed_and_failed_calls_are_statuses(shop_db: Path) -> None:
    wrong = run_question(
        ScriptedLLM(lambda p, b: "SELECT 1"),
        shop_db,
        candidates=2,
        max_revisions=0,
        llm_tests=False,
        reference_sql=GERMANY,
    )
    assert wrong.status == "tests_failed" and wrong.sql is None and not any(c.passed for c in wrong.candidates)
    broken = run_question(ScriptedLLM(lambda p, b: "", status=500), shop_db, candidates=2)
    assert broken.status == "failed" and broken.job_status == "failed" and broken.llm_calls == 2


def test_bad_configuration_names_the_field_and_no_gateway_is_a_status(shop_db: Path, tmp_path: Path) -> None:
    client = AsyncClient("http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="candidates"):
        Text2SQLRunner(client, shop_db, candidates=0)
    with pytest.raises(ConfigError, match="db_path"):
        Text2SQLRunner(client, tmp_path / "missing.db")
    runner = Text2SQLRunner(client, shop_db)
    with pytest.raises(ConfigError, match="reference_sql"):
        asyncio.run(runner.run("q", reference_sql="SELECT nope FROM nowhere"))
    unreachable = asyncio.run(runner.run("q"))  # nothing listens on port 9
    assert unreachable.status == "rejected" and "ConnectError" in unreachable.reason and unreachable.llm_calls == 0
    asyncio.run(client.aclose())
