"""The official OpenAI Python client as a client of the gateway (docs/serving.md): completions, chat and
streams of both, SLO headers through ``extra_headers``, the API key as its bearer token, and the
gateway's OpenAI-style errors raised as the client's own exception types."""

from __future__ import annotations

import asyncio

import pytest

from slosched.contract import HEADER_DEADLINE_MS, HEADER_TTFT_MS
from tests.gateway.helpers import background_gateway

openai = pytest.importorskip("openai")

_TENANTS = {"acme": {"api_keys": ["sk-acme"]}}
_SLO = {HEADER_DEADLINE_MS: "30000", HEADER_TTFT_MS: "10000"}


def test_completions_chat_and_streams_through_the_openai_client() -> None:
    with background_gateway(num_stubs=2, tenants=_TENANTS) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-acme", max_retries=0)
        text = client.completions.create(model="tiny", prompt="hello", max_tokens=5, extra_headers=_SLO)
        assert text.choices[0].text == "x " * 5 and text.usage is not None and text.usage.completion_tokens == 5
        chat = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=3, extra_headers=_SLO
        )
        assert chat.choices[0].message.content == "x " * 3
        messages = [{"role": "user", "content": "hi"}]
        stream = client.chat.completions.create(
            model="tiny", messages=messages, max_tokens=4, stream=True, extra_headers=_SLO
        )
        parts = [chunk.choices[0].delta.content for chunk in stream if chunk.choices]
        assert "".join(part or "" for part in parts) == "x " * 4
        streamed = client.completions.create(model="tiny", prompt="hello", max_tokens=6, stream=True)
        assert "".join(chunk.choices[0].text for chunk in streamed if chunk.choices) == "x " * 6
        assert [model.id for model in client.models.list()] == ["tiny"]
        client.close()


def test_embeddings_through_the_openai_client_and_the_sdk() -> None:
    from slosched.client.sdk import AsyncClient, Client

    with background_gateway(num_stubs=2, tenants=_TENANTS) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-acme", max_retries=0)
        result = client.embeddings.create(model="tiny", input=["alpha", "beta gamma"], extra_headers=_SLO)
        assert [item.embedding for item in result.data] == [[0.5, -0.5, 5.0], [0.5, -0.5, 10.0]]  # base64, decoded
        client.close()
        with Client(url, api_key="sk-acme") as sdk:
            answer = sdk.embeddings(["alpha"], model="tiny", encoding_format="float", headers=_SLO)
            assert answer["data"][0]["embedding"] == [0.5, -0.5, 5.0]

        async def embed() -> dict[str, object]:
            async with AsyncClient(url, api_key="sk-acme") as sdk:
                return await sdk.embeddings("alpha beta", encoding_format="float")

        assert asyncio.run(embed())["data"] == [{"object": "embedding", "index": 0, "embedding": [0.5, -0.5, 10.0]}]


def test_gateway_errors_raise_the_clients_exception_types() -> None:
    with background_gateway(num_stubs=1, tenants=_TENANTS) as url:
        wrong_key = openai.OpenAI(base_url=url + "/v1", api_key="sk-wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            wrong_key.completions.create(model="tiny", prompt="hello", max_tokens=2)
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-acme", max_retries=0)
        with pytest.raises(openai.NotFoundError, match="not served"):
            client.completions.create(model="no-such-model", prompt="hello", max_tokens=2)
        with pytest.raises(openai.BadRequestError, match="x-slo-deadline-ms"):
            client.completions.create(
                model="tiny", prompt="hi", max_tokens=2, extra_headers={HEADER_DEADLINE_MS: "soon"}
            )
        wrong_key.close()
        client.close()


def test_async_openai_client_streams() -> None:
    with background_gateway(num_stubs=1) as url:

        async def run() -> str:
            async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0) as client:
                stream = await client.completions.create(model="tiny", prompt="hi", max_tokens=3, stream=True)
                return "".join([chunk.choices[0].text async for chunk in stream if chunk.choices])

        assert asyncio.run(run()) == "x " * 3


def test_responses_and_their_follow_ups_through_the_openai_client() -> None:
    """The Responses API (``client.responses``): a response, a streamed follow-up that continues it on the
    backend that stored it, a read and a cancel there; another tenant's id is the client's ``NotFoundError``."""
    tenants = {**_TENANTS, "other": {"api_keys": ["sk-other"]}}
    with background_gateway(num_stubs=2, tenants=tenants) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-acme", max_retries=0)
        first = client.responses.create(model="tiny", input="hello", max_output_tokens=5, extra_headers=_SLO)
        assert first.output_text == "x " * 5 and first.usage is not None and first.usage.output_tokens == 5
        stream = client.responses.create(model="tiny", input="more", previous_response_id=first.id, stream=True)
        events = list(stream)
        assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "x " * 8
        assert events[-1].type == "response.completed"
        assert client.responses.retrieve(first.id).id == first.id
        assert client.responses.cancel(events[-1].response.id).status == "cancelled"
        other = openai.OpenAI(base_url=url + "/v1", api_key="sk-other", max_retries=0)
        with pytest.raises(openai.NotFoundError, match="previous_response_id"):
            other.responses.create(model="tiny", input="x", previous_response_id=first.id)
        with pytest.raises(openai.BadRequestError, match="background"):
            client.responses.create(model="tiny", input="x", background=True)
        client.close()
        other.close()
