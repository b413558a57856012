"""The live proxy never drops a field: a request holding one its route's target cannot carry is
answered 400 naming the field and the target (in each SDK's error type) before anything is sent;
Anthropic params reach an Anthropic target whole (`top_k`, tools) and answer."""

from __future__ import annotations

import anthropic
import openai
import pytest
from anthropic.types import MessageParam, ToolParam

from .harness import ALPHA, GAMMA, Server, client

pytestmark = pytest.mark.integration

HI: list[MessageParam] = [{"role": "user", "content": "Say hi"}]
TOOL: ToolParam = {"name": "get", "input_schema": {"type": "object", "properties": {}}}


def test_a_field_the_target_cannot_carry_is_a_400_naming_it(keys: dict[str, str], server: Server) -> None:
    with anthropic.Anthropic(base_url=server.url, api_key=keys["b"], max_retries=0) as claude:
        with pytest.raises(anthropic.BadRequestError, match="top_k") as caught:
            claude.messages.create(model=ALPHA, max_tokens=5, messages=HI, extra_body={"top_k": 5})
        assert "target" in str(caught.value)
        top_k = {"top_k": 5}  # not in every SDK's signature
        message = claude.messages.create(
            model=GAMMA, max_tokens=5, messages=HI, tools=[TOOL], extra_body=top_k
        )
        assert message.type == "message"
    with client(server, keys["a"]) as c, pytest.raises(openai.BadRequestError, match="seed"):
        c.chat.completions.create(model=GAMMA, messages=[{"role": "user", "content": "hi"}], seed=1)
