"""The live proxy on `batchgate serve` as users call it: the official `openai` and `anthropic` SDKs
(`chat.completions.create`, `messages.create`, streaming too) against the server over a socket, the
emulator behind it; refusals in each SDK's own error types, never a provider key."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionStreamOptionsParam

from batchgate.errors import ModelRefusedError
from batchgate.server.proxy.live import refusal

from .harness import ALPHA, DENIED, GAMMA, PROVIDER_KEY, Server, client

pytestmark = pytest.mark.integration

HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hi"}]
HI: list[MessageParam] = [{"role": "user", "content": "Say hi"}]


class Clients:
    """The SDK clients a test makes, closed at its end (their connection pools with them)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.made: list[openai.OpenAI | anthropic.Anthropic] = []

    def openai(self, key: str) -> openai.OpenAI:
        self.made.append(c := client(self.server, key))
        return c

    def claude(self, key: str) -> anthropic.Anthropic:
        self.made.append(c := anthropic.Anthropic(base_url=self.server.url, api_key=key, max_retries=0))
        return c


@pytest.fixture
def sdk(server: Server) -> Iterator[Clients]:
    clients = Clients(server)
    try:
        yield clients
    finally:
        for c in clients.made:
            c.close()


def test_openai_sdk_gets_a_chat_completion_routed_by_model(keys: dict[str, str], sdk: Clients) -> None:
    c = sdk.openai(keys["a"])
    for model in (ALPHA, GAMMA):  # an OpenAI-family provider, and an Anthropic-family one translated
        raw = c.chat.completions.with_raw_response.create(model=model, messages=HELLO, max_tokens=5)
        answer = raw.parse()
        assert answer.choices[0].message.content
        assert answer.usage is not None
        assert answer.usage.completion_tokens > 0
        assert float(raw.headers["x-batchgate-queue-ms"]) >= 0.0


def test_anthropic_sdk_gets_a_message(keys: dict[str, str], sdk: Clients) -> None:
    c = sdk.claude(keys["b"])
    for model in (GAMMA, ALPHA):
        message = c.messages.create(model=model, max_tokens=5, system="Be brief.", messages=HI)
        assert message.type == "message"
        assert message.content[0].type == "text"
        assert message.content[0].text
        assert message.usage.output_tokens > 0


def test_both_sdks_stream_the_answer(keys: dict[str, str], sdk: Clients) -> None:
    c = sdk.openai(keys["a"])
    options: ChatCompletionStreamOptionsParam = {"include_usage": True}
    stream = c.chat.completions.create(
        model=ALPHA, messages=HELLO, max_tokens=5, stream=True, stream_options=options
    )
    chunks = list(stream)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text
    assert chunks[-1].usage is not None
    with sdk.claude(keys["a"]).messages.stream(model=GAMMA, max_tokens=5, messages=HI) as events:
        streamed = "".join(events.text_stream)
        final = events.get_final_message()
    assert streamed
    assert final.content[0].type == "text"
    assert final.content[0].text == streamed


def test_a_wrong_key_is_a_401_in_each_sdks_error_type(sdk: Clients) -> None:
    with pytest.raises(openai.AuthenticationError):
        sdk.openai("bg-wrong").chat.completions.create(model=ALPHA, messages=HELLO)
    with pytest.raises(anthropic.AuthenticationError) as caught:
        sdk.claude("bg-wrong").messages.create(model=GAMMA, max_tokens=5, messages=HI)
    assert caught.value.status_code == 401
    assert caught.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]


def test_an_unknown_model_is_a_clear_404(keys: dict[str, str], sdk: Clients) -> None:
    with pytest.raises(openai.NotFoundError, match="m-nope") as caught:
        sdk.openai(keys["a"]).chat.completions.create(model="m-nope", messages=HELLO)
    assert caught.value.code == "model_not_found"
    with pytest.raises(anthropic.NotFoundError, match="m-nope"):
        sdk.claude(keys["a"]).messages.create(model="m-nope", max_tokens=5, messages=HI)


def test_a_model_the_gateways_key_may_not_use_is_the_operators_502_without_the_providers_text() -> None:
    """A 403/404 `model_not_found` speaks of the gateway's key (its project id in OpenAI's text):
    not the client's request, and nothing of the provider's account to tell a tenant."""
    text = "alpha: HTTP 403 invalid_request_error/model_not_found: Project `proj_x1` does not have access"
    error = refusal(ModelRefusedError(text, provider="alpha", status=403))
    assert (error.status, error.code) == (502, "model_refused")
    assert "operator" in error.message
    assert "proj_x1" not in error.message


def test_bad_bodies_are_400s_naming_the_field(server: Server, keys: dict[str, str], sdk: Clients) -> None:
    with pytest.raises(openai.BadRequestError, match="messages"):
        sdk.openai(keys["a"]).chat.completions.create(model=ALPHA, messages=[])
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        sdk.claude(keys["a"]).messages.create(model=GAMMA, max_tokens=0, messages=HI)
    auth = {"Authorization": f"Bearer {keys['a']}"}
    r = httpx.post(server.base_url + "/chat/completions", content=b"{not json", headers=auth)
    assert r.status_code == 400
    assert r.json()["error"]["message"]


def test_a_provider_refusing_the_gateways_key_is_a_502(
    server: Server, keys: dict[str, str], sdk: Clients
) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        sdk.openai(keys["a"]).chat.completions.create(model=DENIED, messages=HELLO, max_tokens=5)
    assert caught.value.status_code == 502
    text = caught.value.response.text
    assert "credentials" in text
    assert PROVIDER_KEY not in text
    assert "another-key" not in text
    with pytest.raises(anthropic.APIStatusError) as refused:
        sdk.claude(keys["a"]).messages.create(model=DENIED, max_tokens=5, messages=HI)
    assert refused.value.status_code == 502
    assert PROVIDER_KEY not in refused.value.response.text
    assert PROVIDER_KEY not in server.log.read_text()
