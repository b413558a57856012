"""The live proxy streams Gemini and Bedrock targets for real (`:streamGenerateContent?alt=sse`,
ConverseStream's binary frames): the proxy's routes on loopback over one gateway, the emulator
behind it playing each stream at its latency; the official SDKs read each of the three endpoints
(chat, Responses, Messages) translated from either kind; quota settled exactly once per stream; a
stream relayed as it comes (a stall halfway shows the first half reached the client before the
end); a client that goes away cancels the provider's call; a route fails over openai → gemini
before the first byte; the library's `Gateway.stream_chat` the same."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from anthropic.types import Message, MessageParam
from openai.types.chat import ChatCompletionChunk, ChatCompletionMessageParam
from openai.types.responses import ResponseStreamEvent

from awsutil import aws_only
from batchgate.emulator import Emulator, emulator_config_from_dict
from liveutil import LIVE_SETTINGS, Rig, live_rig
from waiting import until

pytestmark = pytest.mark.integration

KEY_ID, SECRET = "AKIDSTREAMTEST01", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
GEM, BED, FAILOVER = "m-gem", "m-bed", "m-failover"
STALLED = {"gem": "m-gem-stall", "bed": "m-bed-stall"}
MODELS = {"gem": GEM, "bed": BED}
LATENCY = {"ttft_p50_ms": 5.0, "ttft_sigma": 0.1, "per_token_ms": 1.0}
ASK: list[ChatCompletionMessageParam] = [{"role": "user", "content": "write 30 words"}]
HI: list[MessageParam] = [{"role": "user", "content": "write 30 words"}]
BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"


@pytest.fixture(autouse=True)
def aws_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The credential chain sees these keys only (no files of the machine, no instance role)."""
    aws_only(monkeypatch, KEY_ID, SECRET)


def _emulator() -> Emulator:
    limits = {"rpm": 10**6, "tpm": 10**8}
    gem = {"family": "gemini", "models": ["gemini-2.5-flash"], "limits": limits, "latency": LATENCY}
    bed = {"family": "bedrock", "api_key": f"{KEY_ID}:{SECRET}", "limits": limits, "latency": LATENCY}
    stall = {"faults": {"stall": 1.0}}
    providers = [
        {"name": "gem", **gem}, {"name": "bed", **bed},
        {"name": "gem-stall", **gem, **stall}, {"name": "bed-stall", **bed, **stall},
    ]  # fmt: skip
    return Emulator(emulator_config_from_dict({"seed": 3, "providers": providers}))


def _config(emu: Emulator) -> dict[str, Any]:
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    kinds = {"gem": "gemini", "bed": "bedrock"}
    providers: list[dict[str, Any]] = [{"name": "dead", "kind": "openai", "base_url": dead, "api_key": "k"}]
    for name in ("gem", "bed", "gem-stall", "bed-stall"):
        entry = {"name": name, "kind": kinds[name[:3]], "base_url": emu.base_url(name)}
        where = {"api_key": "k"} if name.startswith("gem") else {"region": "us-east-1"}
        providers.append({**entry, **where})
    return {
        "providers": providers,
        "routes": [
            {"model": GEM, "targets": ["gem:gemini-2.5-flash"]},
            {"model": BED, "targets": [f"bed:{BEDROCK_MODEL}"]},
            {"model": STALLED["gem"], "targets": ["gem-stall:gemini-2.5-flash"]},
            {"model": STALLED["bed"], "targets": [f"bed-stall:{BEDROCK_MODEL}"]},
            {"model": FAILOVER, "targets": ["dead:gpt-4o-mini", "gem:gemini-2.5-flash"]},
        ],
        "settings": LIVE_SETTINGS,
    }


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    async with _emulator() as emu, live_rig(emu, _config(emu)) as served:
        yield served


def _openai(rig: Rig) -> openai.OpenAI:
    return openai.OpenAI(base_url=rig.url + "/v1", api_key="client", max_retries=0)


# The SDKs run in a worker thread (as a client runs in its own process), not on the loop the
# proxy and the emulator share.


def _chat(rig: Rig, model: str) -> list[ChatCompletionChunk]:
    with _openai(rig) as c:
        stream = c.chat.completions.create(
            model=model, messages=ASK, max_tokens=60, stream=True, stream_options={"include_usage": True}
        )
        return list(stream)


@pytest.mark.parametrize("kind", ["gem", "bed"])
async def test_the_openai_sdk_reads_a_chat_stream_of_each_kind(rig: Rig, kind: str) -> None:
    chunks = await asyncio.to_thread(_chat, rig, MODELS[kind])
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text.split()[:3] == ["the", "quick", "brown"]
    assert len(text.split()) == 30
    assert len(chunks) > 30  # a chunk a token, not the whole answer in one
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "stop"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0
    assert len(rig.emu.streams.first_sent) == 1  # the emulator played it as a stream
    await until(lambda: rig.open_reservations() == 0, "every stream's reservation settled")
    assert rig.settled_twice() == 0


def _responses(rig: Rig, model: str) -> list[ResponseStreamEvent]:
    with _openai(rig) as c:
        stream = c.responses.create(model=model, input="write 30 words", max_output_tokens=60, stream=True)
        return list(stream)


@pytest.mark.parametrize("kind", ["gem", "bed"])
async def test_the_openai_sdk_reads_a_responses_stream_of_each_kind(rig: Rig, kind: str) -> None:
    events = await asyncio.to_thread(_responses, rig, MODELS[kind])
    assert events[0].type == "response.created"
    last = events[-1]
    assert last.type == "response.completed"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) == 30
    assert last.response.output_text == "".join(deltas)
    assert last.response.usage is not None
    assert last.response.usage.output_tokens > 0
    await until(lambda: rig.open_reservations() == 0, "every stream's reservation settled")
    assert rig.settled_twice() == 0


def _messages(rig: Rig, model: str) -> tuple[list[str], Message]:
    with (
        anthropic.Anthropic(base_url=rig.url, api_key="client", max_retries=0) as c,
        c.messages.stream(model=model, max_tokens=60, messages=HI) as events,
    ):
        return list(events.text_stream), events.get_final_message()


@pytest.mark.parametrize("kind", ["gem", "bed"])
async def test_the_anthropic_sdk_reads_a_message_stream_of_each_kind(rig: Rig, kind: str) -> None:
    streamed, final = await asyncio.to_thread(_messages, rig, MODELS[kind])
    assert len(streamed) == 30
    assert final.content[0].type == "text"
    assert final.content[0].text == "".join(streamed)
    assert final.usage.output_tokens > 0
    assert final.stop_reason == "end_turn"
    await until(lambda: rig.open_reservations() == 0, "every stream's reservation settled")
    assert rig.settled_twice() == 0


def _stalled(rig: Rig, model: str) -> tuple[str, str]:
    """The text that came, and the error the stream ended with."""
    got: list[str] = []
    with _openai(rig) as c:
        try:
            for chunk in c.chat.completions.create(model=model, messages=ASK, max_tokens=60, stream=True):
                got.extend(ch.delta.content or "" for ch in chunk.choices)
        except openai.APIError as exc:
            return "".join(got), str(exc)
    return "".join(got), "no error"


@pytest.mark.parametrize("kind", ["gem", "bed"])
async def test_events_reach_the_client_as_they_come_and_a_stall_ends_with_an_error(
    rig: Rig, kind: str
) -> None:
    """The provider stops halfway and hangs: what it sent before reached the client (relayed as
    it came, not held for an end that never comes), then the stall's error event."""
    text, error = await asyncio.to_thread(_stalled, rig, STALLED[kind])
    assert "stream_idle" in error
    assert 0 < len(text.split()) < 30
    await until(lambda: rig.open_reservations() == 0, "the stream's reservation settled")
    assert rig.settled_twice() == 0


@pytest.mark.parametrize("kind", ["gem", "bed"])
async def test_a_client_that_goes_away_cancels_the_call_of_each_kind(rig: Rig, kind: str) -> None:
    body = {"model": MODELS[kind], "messages": [{"role": "user", "content": "write 2000 words"}],
            "max_tokens": 3000, "stream": True}  # fmt: skip
    async with aiohttp.ClientSession() as session:
        response = await session.post(rig.url + "/v1/chat/completions", json=body)
        assert response.status == 200
        await response.content.readline()  # the first event has come
        await rig.emu.wait_in_flight(kind, 1)
        response.close()  # the client goes away mid-answer
    await rig.emu.wait_in_flight(kind, 0)  # the provider's handler was cancelled: it stopped
    await until(lambda: rig.open_reservations() == 0, "the stream's reservation settled")
    assert rig.gw.runtimes[kind].pool.statistics().settled_twice == 0


async def test_a_route_fails_over_from_openai_to_gemini_before_the_first_byte(rig: Rig) -> None:
    chunks = await asyncio.to_thread(_chat, rig, FAILOVER)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert len(text.split()) == 30  # from gem, after the dead openai target refused the connection
    assert chunks[0].object == "chat.completion.chunk"  # Gemini's chunks as chat's
    assert rig.gw.runtimes["dead"].recorder.requests == 1
    assert rig.gw.runtimes["gem"].recorder.requests == 1
    await until(lambda: rig.open_reservations() == 0, "every stream's reservation settled")
    assert rig.settled_twice() == 0


@pytest.mark.parametrize("kind", ["gem", "bed"])
async def test_the_library_streams_each_kind(rig: Rig, kind: str) -> None:
    body = {"model": MODELS[kind], "messages": ASK, "max_tokens": 60}
    events = [ev async for ev in rig.gw.stream_chat(body)]
    whole = await rig.gw.arun(body)
    assert whole.body is not None
    assert "".join(ev.text for ev in events) == whole.body["choices"][0]["message"]["content"]
    assert events[0].fmt == ("gemini" if kind == "gem" else "bedrock")
    assert sum(1 for ev in events if ev.usage is not None) == 1
    await until(lambda: rig.open_reservations() == 0, "every stream's reservation settled")
    assert rig.settled_twice() == 0


def _closed_port() -> int:
    """A port nothing listens on (bound, then closed): connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
