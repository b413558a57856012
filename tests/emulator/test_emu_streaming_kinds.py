"""The emulator streams Gemini and Bedrock as they do: `:streamGenerateContent?alt=sse` as SSE of
`GenerateContentResponse` chunks (a token each, the finish reason and whole usage on the last),
`/converse-stream` as ConverseStream events in AWS event-stream frames (a `contentBlockDelta` a
token, `messageStop`, `metadata`) — played at the provider's latency: a `stall` fault stops either
halfway, after its first half was sent, and hangs until the client goes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import orjson
import pytest
from botocore.eventstream import EventStreamBuffer

from batchgate.emulator import Emulator
from waiting import until

from .conftest import ConfigFactory, ProviderFactory

pytestmark = pytest.mark.integration

ASK = "write 12 words"
PACED = {"ttft_p50_ms": 2.0, "ttft_sigma": 0.1, "per_token_ms": 1.0}
GEMINI = {"contents": [{"role": "user", "parts": [{"text": ASK}]}]}
CONVERSE = {"messages": [{"role": "user", "content": [{"text": ASK}]}]}
GEMINI_PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
BEDROCK_PATH = "/model/anthropic.claude-3-haiku-20240307-v1:0/converse-stream"


@pytest.fixture
async def emu(make_config: ConfigFactory, make_provider: ProviderFactory) -> AsyncIterator[Emulator]:
    stall = {"faults": {"stall": 1.0}}
    config = make_config(
        make_provider("gem", "gemini", latency=PACED),
        make_provider("br", "bedrock", latency=PACED),
        make_provider("gem-stuck", "gemini", latency=PACED, **stall),
        make_provider("br-stuck", "bedrock", latency=PACED, **stall),
    )
    async with Emulator(config) as emulator:
        yield emulator


def _chunks(raw: bytes) -> list[dict[str, Any]]:
    events = [e for e in raw.split(b"\r\n\r\n") if e]
    assert all(e.startswith(b"data: ") for e in events)
    return [orjson.loads(e.removeprefix(b"data: ")) for e in events]


def _frames(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    buffer = EventStreamBuffer()
    buffer.add_data(raw)
    return [(str(m.headers[":event-type"]), orjson.loads(m.payload)) for m in buffer]


async def test_gemini_streams_sse_chunks_a_token_each(emu: Emulator) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(emu.base_url("gem") + GEMINI_PATH, json=GEMINI) as r,
    ):
        kind, raw = r.headers["Content-Type"], await r.read()
    assert kind.startswith("text/event-stream")
    chunks = _chunks(raw)
    assert len(chunks) == 12
    text = "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks)
    assert text == "the quick brown fox jumps over a lazy dog again the quick"
    assert [("finishReason" in c["candidates"][0]) for c in chunks] == [False] * 11 + [True]
    assert chunks[-1]["usageMetadata"]["candidatesTokenCount"] > 0
    assert "candidatesTokenCount" not in chunks[0]["usageMetadata"]  # the prompt's counts only
    assert list(emu.streams.first_sent) == [chunks[0]["responseId"]]


async def test_bedrock_streams_converse_events_a_token_each(emu: Emulator) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(emu.base_url("br") + BEDROCK_PATH, json=CONVERSE) as r,
    ):
        kind, raw = r.headers["Content-Type"], await r.read()
    assert kind == "application/vnd.amazon.eventstream"
    events = _frames(raw)
    names = [name for name, _ in events]
    assert names[0] == "messageStart"
    assert names.count("contentBlockDelta") == 12
    assert names[-3:] == ["contentBlockStop", "messageStop", "metadata"]
    assert events[-1][1]["usage"]["outputTokens"] > 0
    assert len(emu.streams.first_sent) == 1


def _gemini_pieces(raw: bytes) -> int:
    return raw.count(b'"text":')


def _bedrock_pieces(raw: bytes) -> int:
    return raw.count(b"contentBlockDelta")


@pytest.mark.parametrize(
    ("name", "path", "body", "pieces", "end"),
    [
        ("gem-stuck", GEMINI_PATH, GEMINI, _gemini_pieces, b"finishReason"),
        ("br-stuck", BEDROCK_PATH, CONVERSE, _bedrock_pieces, b"messageStop"),
    ],
    ids=["gemini", "bedrock"],
)
async def test_a_stall_sends_the_first_half_then_hangs_until_the_client_goes(
    emu: Emulator, name: str, path: str, body: dict[str, Any], pieces: Callable[[bytes], int], end: bytes
) -> None:
    got = bytearray()
    async with aiohttp.ClientSession() as http:
        response = await http.post(emu.base_url(name) + path, json=body)

        async def read() -> None:
            async for piece in response.content.iter_any():
                got.extend(piece)

        reading = asyncio.ensure_future(read())
        await emu.wait_hanging(name, 1)
        await until(lambda: pieces(bytes(got)) > 0, "the first pieces, sent before the stall")
        assert pieces(bytes(got)) < 12  # the first half only (a token count's half: 5 to 7)
        assert end not in got  # the stream's end never came
        reading.cancel()
        response.close()
    await emu.wait_hanging(name, 0)
