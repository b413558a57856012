"""`kind: gemini` over real sockets against the emulated Gemini wire: chat and embeddings through
AI Studio's and Vertex AI's paths, its key and errors, the 429's RetryInfo read as the retry hint,
and a body with every carried field accepted by an emulator that refuses unknown fields."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from google.oauth2.credentials import Credentials

from batchgate.clock import LoopClock
from batchgate.config import ProviderConfig, Secret, TimeoutConfig
from batchgate.config.schema import VertexTarget
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.endpoints import ENDPOINT_KEY
from batchgate.errors import AuthenticationError, BadRequestError, QuotaExhaustedError, RateLimitError
from batchgate.policy.hints import parse_retry_hint
from batchgate.providers import make_chat_client
from batchgate.providers.gemini import GeminiClient
from batchgate.providers.gemini_auth import VertexToken
from batchgate.providers.gemini_translate import CARRIED
from loopback import serving
from transports import chat_transport, each_transport  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("each_transport")]

KEY = "gemini-key-0123456789"
MODEL = "gemini-2.5-flash"
TIMEOUTS = TimeoutConfig(connect=2.0, total=10.0)
BODY: dict[str, Any] = {
    "model": MODEL,
    "messages": [
        {"role": "system", "content": "Answer with one word."},
        {"role": "user", "content": "Classify the sentiment: I loved it, wonderful"},
    ],
    "max_tokens": 8,
}


@asynccontextmanager
async def gemini(api_key: str | None = KEY, **provider: Any) -> AsyncIterator[tuple[Emulator, GeminiClient]]:
    spec = {
        "name": "gem",
        "family": "gemini",
        "api_key": KEY,
        "limits": {"rpm": 100000, "tpm": 10**8},
        "latency": {"ttft_p50_ms": 0, "per_token_ms": 0},
        **provider,
    }
    emu = Emulator(emulator_config_from_dict({"seed": 1, "providers": [spec]}))
    async with emu, chat_transport() as transport:
        config = ProviderConfig(
            name="gem",
            kind="gemini",
            base_url=emu.base_url("gem"),
            api_key=Secret(api_key) if api_key else None,
        )
        client = make_chat_client(config, transport, TIMEOUTS)
        assert isinstance(client, GeminiClient)
        yield emu, client


async def test_chat_answers_in_openai_shape() -> None:
    async with gemini() as (emu, client):
        answer = await client.send(dict(BODY), model=MODEL)
    body = answer.body
    assert body["object"] == "chat.completion"
    assert body["model"] == MODEL
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "positive"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert answer.usage.prompt_tokens > 0
    assert answer.usage.completion_tokens == 2  # ceil(len("positive") / 4)
    assert emu.stats()["providers"]["gem"]["completed"] == 1


async def test_a_forced_tool_is_answered_as_a_tool_call() -> None:
    tools = [{"type": "function", "function": {"name": "label", "parameters": {"type": "object"}}}]
    async with gemini() as (_, client):
        answer = await client.send({**BODY, "tools": tools, "tool_choice": "required"}, model=MODEL)
    choice = answer.body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "label", "arguments": "{}"}


async def test_n_candidates_are_n_choices() -> None:
    async with gemini() as (_, client):
        answer = await client.send({**BODY, "n": 3}, model=MODEL)
    assert [c["index"] for c in answer.body["choices"]] == [0, 1, 2]


async def test_embeddings_one_text_and_a_list() -> None:
    async with gemini() as (_, client):
        one = await client.send(
            {"model": "e", "input": "hello", "dimensions": 16, ENDPOINT_KEY: "embeddings"},
            model="text-embedding-004",
        )
        many = await client.send(
            {"model": "e", "input": ["a", "b", "c"], ENDPOINT_KEY: "embeddings"}, model="text-embedding-004"
        )
    assert len(one.body["data"]) == 1
    assert len(one.body["data"][0]["embedding"]) == 16
    assert [d["index"] for d in many.body["data"]] == [0, 1, 2]
    assert len(many.body["data"][2]["embedding"]) == 768


async def test_a_wrong_key_and_no_key_are_authentication_errors() -> None:
    async with gemini(api_key="wrong") as (_, client):
        with pytest.raises(AuthenticationError, match="INVALID_ARGUMENT"):
            await client.send(dict(BODY), model=MODEL)
    async with gemini(api_key=None) as (_, client):
        with pytest.raises(AuthenticationError, match="PERMISSION_DENIED"):
            await client.send(dict(BODY), model=MODEL)


async def test_a_429_retry_delay_in_the_body_is_the_retry_hint() -> None:
    async with gemini(limits={"rpm": 1}) as (_, client):
        await client.send(dict(BODY), model=MODEL)
        with pytest.raises(RateLimitError, match="RESOURCE_EXHAUSTED") as caught:
            await client.send(dict(BODY), model=MODEL)
    assert isinstance(caught.value.body, dict)
    details = caught.value.body["error"]["details"]
    assert any(d["@type"].endswith("google.rpc.RetryInfo") for d in details)
    hint = parse_retry_hint(caught.value.headers, 0.0, max_hint=120.0)
    assert hint is not None
    assert hint > 0


async def test_a_day_quota_used_up_is_quota_exhausted() -> None:
    """The emulator's `insufficient_quota` fault plays Gemini's RPD: no retry helps today."""
    async with gemini(faults={"insufficient_quota": 1.0}) as (_, client):
        with pytest.raises(QuotaExhaustedError, match="RESOURCE_EXHAUSTED"):
            await client.send(dict(BODY), model=MODEL)


async def test_every_carried_field_reaches_a_strict_emulator() -> None:
    """0 fields dropped: a body holding every carried field is translated into fields the
    emulator, refusing any it does not know, accepts."""
    body = {
        **BODY,
        "max_completion_tokens": 8,
        "temperature": 0.1,
        "top_p": 0.9,
        "top_k": 3,
        "n": 1,
        "stop": ["END"],
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "seed": 1,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": {"type": "object"}},
        },
        "reasoning_effort": "low",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": "auto",
        "logprobs": True,
        "top_logprobs": 2,
    }
    assert set(body) == CARRIED
    async with gemini(refuse_unknown_fields=True) as (_, client):
        answer = await client.send(body, model=MODEL)
    assert answer.status == 200


async def test_a_refused_field_fails_before_sending() -> None:
    async with gemini() as (emu, client):
        with pytest.raises(BadRequestError, match="logit_bias"):
            await client.send({**BODY, "logit_bias": {"1": 1}}, model=MODEL)
        assert emu.stats()["providers"]["gem"]["first_request_s"] is None


async def test_vertex_path_with_a_google_auth_token() -> None:
    async with gemini() as (emu, _), chat_transport() as transport:
        config = ProviderConfig(
            name="gem",
            kind="gemini",
            base_url=emu.base_url("gem"),
            vertex=VertexTarget("proj-1", "us-central1"),
        )
        token = VertexToken("gem", LoopClock(), Credentials(token="ya29.test-token"))  # type: ignore[no-untyped-call]
        client = GeminiClient(config, transport, TIMEOUTS, token=token)
        answer = await client.send(dict(BODY), model=MODEL)
        assert answer.body["choices"][0]["message"]["content"] == "positive"
        assert emu.stats()["unrouted"] == 0


async def test_a_vertex_token_is_refreshed_through_google_auth_and_reused() -> None:
    """google-auth's own refresh (an authorized-user credential, its token endpoint on loopback)
    runs off the loop; the token is fetched once and sent as the bearer of every call."""
    grants: list[str] = []

    async def token(request: web.Request) -> web.Response:
        grants.append((await request.post())["grant_type"])  # type: ignore[arg-type]
        return web.json_response(
            {"access_token": "ya29.refreshed", "expires_in": 3600, "token_type": "Bearer"}
        )

    app = web.Application()
    app.router.add_post("/token", token)
    async with serving(app) as auth_url, gemini() as (emu, _), chat_transport() as transport:
        credentials = Credentials(  # type: ignore[no-untyped-call]
            None, refresh_token="r", client_id="c", client_secret="s", token_uri=f"{auth_url}/token"
        )
        config = ProviderConfig(
            name="gem",
            kind="gemini",
            base_url=emu.base_url("gem"),
            vertex=VertexTarget("proj-1", "us-central1"),
        )
        client = GeminiClient(config, transport, TIMEOUTS, token=VertexToken("gem", LoopClock(), credentials))
        for _ in range(2):
            answer = await client.send(dict(BODY), model=MODEL)
            assert answer.body["choices"][0]["message"]["content"] == "positive"
    assert grants == ["refresh_token"]
    assert credentials.token == "ya29.refreshed"
