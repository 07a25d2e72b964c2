"""The official Anthropic Python client as a client of the gateway (docs/serving.md): a message, a message
stream, the SLO headers through ``extra_headers``, the API key as ``x-api-key``, and the gateway's errors
raised as the client's own exception types."""

from __future__ import annotations

import pytest

from slosched.contract import HEADER_DEADLINE_MS
from tests.gateway.helpers import background_gateway

anthropic = pytest.importorskip("anthropic")

_TENANTS = {"acme": {"api_keys": ["sk-acme"]}}
_SLO = {HEADER_DEADLINE_MS: "30000"}
_HELLO = [{"role": "user", "content": "hello"}]


def test_messages_and_message_streams_through_the_anthropic_client() -> None:
    with background_gateway(num_stubs=2, tenants=_TENANTS) as url:
        client = anthropic.Anthropic(base_url=url, api_key="sk-acme", max_retries=0)
        message = client.messages.create(
            model="tiny", max_tokens=5, system="be brief", messages=_HELLO, extra_headers=_SLO
        )
        assert message.content[0].text == "x " * 5 and message.usage.output_tokens == 5
        stream = client.messages.create(model="tiny", max_tokens=4, messages=_HELLO, stream=True, extra_headers=_SLO)
        events = list(stream)
        text = "".join(event.delta.text for event in events if event.type == "content_block_delta")
        assert text == "x " * 4 and events[-1].type == "message_stop"
        with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
            client.messages.create(model="tiny", max_tokens=0, messages=_HELLO)
        with pytest.raises(anthropic.NotFoundError, match="not served"):
            client.messages.create(model="nope", max_tokens=4, messages=_HELLO)
        with pytest.raises(anthropic.AuthenticationError):
            anthropic.Anthropic(base_url=url, api_key="sk-wrong", max_retries=0).messages.create(
                model="tiny", max_tokens=4, messages=_HELLO
            )
        client.close()
