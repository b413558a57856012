"""Tool calls streamed through `serve`'s live proxy, translated across formats: the emulator's
Gemini and Bedrock targets answer a request that forces a tool with a call (Gemini a whole
`functionCall` part, empty `args`; Bedrock a `toolUse` block whose input is `{"answer": TEXT}`),
streamed at their latency; the official openai SDK reads it as a chat stream (its own
accumulator: `chat.completions.stream`) and the anthropic SDK as a Messages stream — the call's
id, name and arguments as the provider made them, the finish `tool_calls` / stop `tool_use`. A
chat `response_format` asked of Bedrock (a forced output tool) streams as the JSON content.

The emulator's Anthropic and OpenAI families answer no tool calls, so an Anthropic target read by
the openai SDK is covered by the recorded streams of `tests/providers/test_stream_tools.py` only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import orjson
import pytest
from anthropic.types import Message, MessageParam, ToolParam
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam, ChatCompletionToolParam

from awsutil import aws_only
from batchgate import Gateway
from batchgate.emulator import Emulator, emulator_config_from_dict
from liveutil import live_rig
from waiting import until

pytestmark = pytest.mark.integration

KEY_ID, SECRET = "AKIDSTREAMTEST01", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
MODELS = {"gem": "m-gem", "bed": "m-bed"}
LATENCY = {"ttft_p50_ms": 5.0, "ttft_sigma": 0.1, "per_token_ms": 1.0}
ASK: list[ChatCompletionMessageParam] = [{"role": "user", "content": "write 30 words"}]
HI: list[MessageParam] = [{"role": "user", "content": "write 30 words"}]
SCHEMA: dict[str, object] = {"type": "object", "properties": {"city": {"type": "string"}}}
TOOLS: list[ChatCompletionToolParam] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}
]
ANTHROPIC_TOOLS: list[ToolParam] = [{"name": "get_weather", "input_schema": SCHEMA}]


@pytest.fixture(autouse=True)
def aws_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The credential chain sees these keys only (no files of the machine, no instance role)."""
    aws_only(monkeypatch, KEY_ID, SECRET)


def _emulator() -> Emulator:
    limits = {"rpm": 10**6, "tpm": 10**8}
    paced = {"limits": limits, "latency": LATENCY}
    providers = [
        {"name": "gem", "family": "gemini", "models": ["gemini-2.5-flash"], **paced},
        {"name": "bed", "family": "bedrock", "api_key": f"{KEY_ID}:{SECRET}", **paced},
    ]
    return Emulator(emulator_config_from_dict({"seed": 3, "providers": providers}))


def _config(emu: Emulator) -> dict[str, Any]:
    return {
        "providers": [
            {"name": "gem", "kind": "gemini", "base_url": emu.base_url("gem"), "api_key": "k"},
            {"name": "bed", "kind": "bedrock", "base_url": emu.base_url("bed"), "region": "us-east-1"},
        ],
        "routes": [
            {"model": MODELS["gem"], "targets": ["gem:gemini-2.5-flash"]},
            {"model": MODELS["bed"], "targets": [f"bed:{BEDROCK_MODEL}"]},
        ],
        "settings": {"timeouts": {"connect": 2, "total": 20, "stream_idle": 2}, "seed": 1},
    }


@pytest.fixture
async def rig() -> AsyncIterator[tuple[str, Gateway]]:
    async with _emulator() as emu, live_rig(emu, _config(emu)) as served:
        yield served.url, served.gw


def _open(gw: Gateway) -> int:
    return sum(rt.pool.statistics().open for rt in gw.runtimes.values())


# The SDKs run in a worker thread (as a client runs in its own process), not on the loop the
# proxy and the emulator share.


def _chat(url: str, model: str, **more: Any) -> tuple[ChatCompletion, int]:
    """The openai SDK's own accumulation of the stream, and how many chunks it read."""
    with (
        openai.OpenAI(base_url=url + "/v1", api_key="client", max_retries=0) as c,
        c.chat.completions.stream(model=model, messages=ASK, max_tokens=60, **more) as stream,
    ):
        chunks = sum(1 for _ in stream)
        return stream.get_final_completion(), chunks


ANSWERS = {"gem": {}, "bed": {"answer": None}}  # what each emulator puts in a forced call's input


@pytest.mark.parametrize("kind", ["gem", "bed"])
async def test_the_openai_sdk_reads_a_translated_tool_call_stream(
    rig: tuple[str, Gateway], kind: str
) -> None:
    url, gw = rig
    usage = {"include_usage": True}
    final, chunks = await asyncio.to_thread(
        _chat, url, MODELS[kind], tools=TOOLS, tool_choice="required", stream_options=usage
    )
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.type == "function"
    assert call.function.name == "get_weather"
    assert call.id == "call_0_0" if kind == "gem" else call.id.startswith("tooluse_")  # the provider's
    arguments = orjson.loads(call.function.arguments)
    assert arguments.keys() == ANSWERS[kind].keys()
    if kind == "bed":
        assert len(arguments["answer"].split()) == 30  # the emulator's answer, its input
    assert chunks >= 3  # the role chunk, the call, the finish
    assert final.usage is not None
    await until(lambda: _open(gw) == 0, "the stream's reservation settled")


def _messages(url: str, model: str) -> Message:
    with (
        anthropic.Anthropic(base_url=url, api_key="client", max_retries=0) as c,
        c.messages.stream(
            model=model, max_tokens=60, messages=HI, tools=ANTHROPIC_TOOLS, tool_choice={"type": "any"}
        ) as events,
    ):
        return events.get_final_message()


@pytest.mark.parametrize("kind", ["gem", "bed"])
async def test_the_anthropic_sdk_reads_a_translated_tool_use_stream(
    rig: tuple[str, Gateway], kind: str
) -> None:
    url, gw = rig
    final = await asyncio.to_thread(_messages, url, MODELS[kind])
    assert final.stop_reason == "tool_use"
    uses = [block for block in final.content if block.type == "tool_use"]
    assert [u.name for u in uses] == ["get_weather"]
    assert isinstance(uses[0].input, dict)
    assert uses[0].input.keys() == ANSWERS[kind].keys()
    assert not [block for block in final.content if block.type == "text"]  # no empty text block
    await until(lambda: _open(gw) == 0, "the stream's reservation settled")


async def test_a_json_response_format_asked_of_bedrock_streams_as_the_content(
    rig: tuple[str, Gateway],
) -> None:
    url, gw = rig
    spec = {"name": "reply", "schema": {"type": "object", "properties": {"answer": {"type": "string"}}}}
    final, _ = await asyncio.to_thread(
        _chat, url, MODELS["bed"], response_format={"type": "json_schema", "json_schema": spec}
    )
    choice = final.choices[0]
    assert choice.finish_reason == "stop"
    assert not choice.message.tool_calls
    content = orjson.loads(choice.message.content or "")
    assert len(content["answer"].split()) == 30
    await until(lambda: _open(gw) == 0, "the stream's reservation settled")
