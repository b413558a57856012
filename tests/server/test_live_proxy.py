"""The live proxy on `batchgate serve` as users call it: the official `openai` and `anthropic` SDKs
(`chat.completions.create`, `messages.create`, streaming too) against the server over a socket, the
emulator behind it; refusals in each SDK's own error types, never a provider key."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionStreamOptionsParam

from .harness import ALPHA, DENIED, GAMMA, PROVIDER_KEY, Server, client

pytestmark = pytest.mark.integration

HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hi"}]
HI: list[MessageParam] = [{"role": "user", "content": "Say hi"}]


def claude(server: Server, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0)


def test_openai_sdk_gets_a_chat_completion_routed_by_model(server: Server, keys: dict[str, str]) -> None:
    c = client(server, keys["a"])
    for model in (ALPHA, GAMMA):  # an OpenAI-family provider, and an Anthropic-family one translated
        raw = c.chat.completions.with_raw_response.create(model=model, messages=HELLO, max_tokens=5)
        answer = raw.parse()
        assert answer.choices[0].message.content
        assert answer.usage is not None
        assert answer.usage.completion_tokens > 0
        assert float(raw.headers["x-batchgate-queue-ms"]) >= 0.0


def test_anthropic_sdk_gets_a_message(server: Server, keys: dict[str, str]) -> None:
    c = claude(server, keys["b"])
    for model in (GAMMA, ALPHA):
        message = c.messages.create(model=model, max_tokens=5, system="Be brief.", messages=HI)
        assert message.type == "message"
        assert message.content[0].type == "text"
        assert message.content[0].text
        assert message.usage.output_tokens > 0


def test_both_sdks_stream_the_answer(server: Server, keys: dict[str, str]) -> None:
    c = client(server, keys["a"])
    options: ChatCompletionStreamOptionsParam = {"include_usage": True}
    stream = c.chat.completions.create(
        model=ALPHA, messages=HELLO, max_tokens=5, stream=True, stream_options=options
    )
    chunks = list(stream)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text
    assert chunks[-1].usage is not None
    with claude(server, keys["a"]).messages.stream(model=GAMMA, max_tokens=5, messages=HI) as events:
        streamed = "".join(events.text_stream)
        final = events.get_final_message()
    assert streamed
    assert final.content[0].type == "text"
    assert final.content[0].text == streamed


def test_a_wrong_key_is_a_401_in_each_sdks_error_type(server: Server) -> None:
    with pytest.raises(openai.AuthenticationError):
        client(server, "bg-wrong").chat.completions.create(model=ALPHA, messages=HELLO)
    with pytest.raises(anthropic.AuthenticationError) as caught:
        claude(server, "bg-wrong").messages.create(model=GAMMA, max_tokens=5, messages=HI)
    assert caught.value.status_code == 401
    assert caught.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]


def test_an_unknown_model_is_a_clear_404(server: Server, keys: dict[str, str]) -> None:
    with pytest.raises(openai.NotFoundError, match="m-nope") as caught:
        client(server, keys["a"]).chat.completions.create(model="m-nope", messages=HELLO)
    assert caught.value.code == "model_not_found"
    with pytest.raises(anthropic.NotFoundError, match="m-nope"):
        claude(server, keys["a"]).messages.create(model="m-nope", max_tokens=5, messages=HI)


def test_bad_bodies_are_400s_naming_the_field(server: Server, keys: dict[str, str]) -> None:
    with pytest.raises(openai.BadRequestError, match="messages"):
        client(server, keys["a"]).chat.completions.create(model=ALPHA, messages=[])
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        claude(server, keys["a"]).messages.create(model=GAMMA, max_tokens=0, messages=HI)
    auth = {"Authorization": f"Bearer {keys['a']}"}
    r = httpx.post(server.base_url + "/chat/completions", content=b"{not json", headers=auth)
    assert r.status_code == 400
    assert r.json()["error"]["message"]


def test_a_provider_refusing_the_gateways_key_is_a_502(server: Server, keys: dict[str, str]) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        client(server, keys["a"]).chat.completions.create(model=DENIED, messages=HELLO, max_tokens=5)
    assert caught.value.status_code == 502
    text = caught.value.response.text
    assert "credentials" in text
    assert PROVIDER_KEY not in text
    assert "another-key" not in text
    with pytest.raises(anthropic.APIStatusError) as refused:
        claude(server, keys["a"]).messages.create(model=DENIED, max_tokens=5, messages=HI)
    assert refused.value.status_code == 502
    assert PROVIDER_KEY not in refused.value.response.text
    assert PROVIDER_KEY not in server.log.read_text()
