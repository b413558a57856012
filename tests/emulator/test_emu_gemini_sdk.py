"""The official `google-genai` SDK pointed at the emulated Gemini wire parses every answer: a
generation (text, candidates, usage), embeddings (one and many), and its errors (a 429 with its
RetryInfo, a refused key, an unknown field on a strict provider)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from google import genai
from google.genai import errors, types

from batchgate.emulator import Emulator, emulator_config_from_dict

pytestmark = [
    pytest.mark.integration,
    # google-genai's aio client subclasses aiohttp.ClientSession, which aiohttp warns about
    pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning"),
]

KEY = "gemini-key-0123456789"
MODEL = "gemini-2.5-flash"


@asynccontextmanager
async def sdk(key: str = KEY, **provider: Any) -> AsyncIterator[tuple[Emulator, genai.Client]]:
    spec = {
        "name": "gem",
        "family": "gemini",
        "api_key": KEY,
        "limits": {"rpm": 100000, "tpm": 10**8},
        "latency": {"ttft_p50_ms": 0, "per_token_ms": 0},
        **provider,
    }
    async with Emulator(emulator_config_from_dict({"seed": 1, "providers": [spec]})) as emu:
        options = types.HttpOptions(
            base_url=emu.base_url("gem"), retry_options=types.HttpRetryOptions(attempts=1)
        )
        yield emu, genai.Client(api_key=key, http_options=options)


async def test_the_sdk_reads_a_generation() -> None:
    async with sdk() as (_, client):
        answer = await client.aio.models.generate_content(
            model=MODEL,
            contents="Classify the sentiment: I loved it, wonderful",
            config=types.GenerateContentConfig(
                system_instruction="One word.", max_output_tokens=8, candidate_count=2, temperature=0.0
            ),
        )
    assert answer.text == "positive"
    assert answer.candidates is not None
    assert len(answer.candidates) == 2
    assert answer.candidates[0].finish_reason == types.FinishReason.STOP
    usage = answer.usage_metadata
    assert usage is not None
    assert usage.prompt_token_count is not None
    assert usage.prompt_token_count > 0
    assert usage.candidates_token_count == 4
    assert answer.model_version == MODEL


async def test_the_sdk_reads_a_function_call() -> None:
    declaration = types.FunctionDeclaration(
        name="label",
        parameters=types.Schema(
            type=types.Type.OBJECT, properties={"x": types.Schema(type=types.Type.STRING)}
        ),
    )
    async with sdk() as (_, client):
        answer = await client.aio.models.generate_content(
            model=MODEL,
            contents="Label this",
            config=types.GenerateContentConfig(
                tools=[types.Tool(function_declarations=[declaration])],
                tool_config=types.ToolConfig(
                    function_calling_config=types.FunctionCallingConfig(
                        mode=types.FunctionCallingConfigMode.ANY
                    )
                ),
                automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            ),
        )
    assert answer.function_calls is not None
    assert [call.name for call in answer.function_calls] == ["label"]


async def test_the_sdk_reads_a_cut_answer() -> None:
    async with sdk() as (_, client):
        answer = await client.aio.models.generate_content(
            model=MODEL,
            contents="Summarize: the quick brown fox jumps over the lazy dog and keeps running far away",
            config=types.GenerateContentConfig(max_output_tokens=1),
        )
    assert answer.candidates is not None
    assert answer.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS


async def test_the_sdk_reads_embeddings() -> None:
    async with sdk() as (_, client):
        one = await client.aio.models.embed_content(model="text-embedding-004", contents="hello")
        many = await client.aio.models.embed_content(
            model="text-embedding-004",
            contents=["a", "b"],
            config=types.EmbedContentConfig(output_dimensionality=8),
        )
    assert one.embeddings is not None
    assert len(one.embeddings) == 1
    assert many.embeddings is not None
    assert [len(e.values or []) for e in many.embeddings] == [8, 8]


async def test_the_sdk_reads_a_429_with_its_retry_info() -> None:
    async with sdk(limits={"rpm": 1}) as (_, client):
        await client.aio.models.generate_content(model=MODEL, contents="hi")
        with pytest.raises(errors.ClientError) as caught:
            await client.aio.models.generate_content(model=MODEL, contents="hi")
    assert caught.value.code == 429
    assert caught.value.status == "RESOURCE_EXHAUSTED"
    details = caught.value.details["error"]["details"]
    delays = [d["retryDelay"] for d in details if d["@type"] == "type.googleapis.com/google.rpc.RetryInfo"]
    assert len(delays) == 1
    assert delays[0].endswith("s")


async def test_the_sdk_reads_a_refused_key() -> None:
    async with sdk(key="wrong") as (_, client):
        with pytest.raises(errors.ClientError) as caught:
            await client.aio.models.generate_content(model=MODEL, contents="hi")
    assert caught.value.code == 400
    assert caught.value.status == "INVALID_ARGUMENT"


async def test_a_strict_provider_accepts_what_the_sdk_sends_and_refuses_an_unknown_field() -> None:
    async with sdk(refuse_unknown_fields=True) as (emu, client):
        answer = await client.aio.models.generate_content(
            model=MODEL,
            contents="hi",
            config=types.GenerateContentConfig(
                system_instruction="x",
                response_mime_type="application/json",
                response_schema={"type": "OBJECT", "properties": {"a": {"type": "STRING"}}},
            ),
        )
        assert answer.candidates is not None
        with pytest.raises(errors.ClientError, match="Unknown name"):
            await client.aio.models.generate_content(
                model=MODEL,
                contents="hi",
                config=types.GenerateContentConfig(http_options=types.HttpOptions(extra_body={"bogus": 1})),
            )
        assert emu.stats()["providers"]["gem"]["completed"] == 1
