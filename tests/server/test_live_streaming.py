"""The live proxy streams for real: the proxy's routes (`LiveApi`, the server's error middleware)
on loopback over one gateway, the emulator behind it streaming paced events; the official SDKs
read what the proxy relays (its own format passed through, another translated); quota settled
exactly once per stream, a client that goes away cancels the provider's call, a stall ends with
an error event, and a route fails over only before the first byte."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import openai
import orjson
import pytest
from anthropic.types import Message, MessageParam
from openai.types.chat import ChatCompletionChunk, ChatCompletionMessageParam
from openai.types.responses import ResponseStreamEvent

from batchgate.emulator import Emulator, emulator_config_from_dict
from liveutil import LIVE_SETTINGS, Rig, live_rig
from waiting import until

pytestmark = pytest.mark.integration

OA, AN, STALL, FAILOVER, DEAD, GEM = "m-oa", "m-an", "m-stall", "m-failover", "m-dead", "m-gem"
LATENCY = {"ttft_p50_ms": 5.0, "ttft_sigma": 0.1, "per_token_ms": 1.0}
ASK: list[ChatCompletionMessageParam] = [{"role": "user", "content": "write 30 words"}]
HI: list[MessageParam] = [{"role": "user", "content": "write 30 words"}]


def _emulator() -> Emulator:
    openai_limits = {"rpm": 10**6, "tpm": 10**8}
    providers: list[dict[str, Any]] = [
        {"name": "oa", "family": "openai", "limits": openai_limits, "latency": LATENCY},
        {"name": "an", "family": "anthropic", "limits": {"rpm": 10**6, "itpm": 10**8, "otpm": 10**8},
         "latency": LATENCY},
        {"name": "stall", "family": "openai", "limits": openai_limits, "latency": LATENCY,
         "faults": {"stall": 1.0}},
        {"name": "gem", "family": "gemini", "models": ["gemini-2.5-flash"], "limits": openai_limits,
         "latency": LATENCY},
    ]  # fmt: skip
    return Emulator(emulator_config_from_dict({"seed": 3, "providers": providers}))


def _config(emu: Emulator) -> dict[str, Any]:
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    return {
        "providers": [
            {"name": "oa", "kind": "openai", "base_url": emu.base_url("oa"), "api_key": "k"},
            {"name": "an", "kind": "anthropic", "base_url": emu.base_url("an"), "api_key": "k"},
            {"name": "stall", "kind": "openai", "base_url": emu.base_url("stall"), "api_key": "k"},
            {"name": "dead", "kind": "openai", "base_url": dead, "api_key": "k"},
            {"name": "gem", "kind": "gemini", "base_url": emu.base_url("gem"), "api_key": "k"},
        ],
        "routes": [
            {"model": OA, "targets": ["oa:gpt-4o-mini"]},
            {"model": AN, "targets": ["an:claude-3-5-haiku-latest"]},
            {"model": STALL, "targets": ["stall:gpt-4o-mini"]},
            {"model": FAILOVER, "targets": ["dead:gpt-4o-mini", "oa:gpt-4o-mini"]},
            {"model": DEAD, "targets": ["dead:gpt-4o-mini"]},
            {"model": GEM, "targets": ["gem:gemini-2.5-flash"]},
        ],
        "settings": LIVE_SETTINGS,
    }


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    async with _emulator() as emu, live_rig(emu, _config(emu)) as served:
        yield served


def _openai(rig: Rig) -> openai.OpenAI:
    return openai.OpenAI(base_url=rig.url + "/v1", api_key="client", max_retries=0)


def _claude(rig: Rig) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=rig.url, api_key="client", max_retries=0)


# The SDKs run in a worker thread (as a client runs in its own process): their first calls build
# their types for a while, which on the loop the proxy and the emulator share would stall both.


def _chat_streams(rig: Rig, include_usage: bool) -> list[list[ChatCompletionChunk]]:
    options: Any = {"include_usage": True} if include_usage else openai.NOT_GIVEN
    with _openai(rig) as c:
        return [
            list(
                c.chat.completions.create(
                    model=m, messages=ASK, max_tokens=60, stream=True, stream_options=options
                )
            )
            for m in (OA, AN)  # an OpenAI provider's chunks as they are; Anthropic's translated
        ]


async def test_the_openai_sdk_reads_chat_streams_passed_through_and_translated(rig: Rig) -> None:
    for chunks in await asyncio.to_thread(_chat_streams, rig, True):
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        assert text.split()[:3] == ["the", "quick", "brown"]
        assert len(text.split()) == 30
        assert len(chunks) > 30  # a chunk a token, not the whole answer in one
        assert chunks[-1].usage is not None
        assert chunks[-1].usage.completion_tokens > 0
        assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "stop"
    await until(lambda: rig.open_reservations() == 0, "every stream's reservation settled")
    assert rig.settled_twice() == 0


async def test_without_include_usage_no_usage_chunk_reaches_the_client(rig: Rig) -> None:
    for chunks in await asyncio.to_thread(_chat_streams, rig, False):
        assert all(ch.choices for ch in chunks)  # no chunk of usage alone
    await until(lambda: rig.open_reservations() == 0, "every stream's reservation settled")


def _responses_streams(rig: Rig) -> list[list[ResponseStreamEvent]]:
    with _openai(rig) as c:
        return [
            list(c.responses.create(model=m, input="write 30 words", max_output_tokens=60, stream=True))
            for m in (OA, AN)
        ]


async def test_the_openai_sdk_reads_responses_streams(rig: Rig) -> None:
    for events in await asyncio.to_thread(_responses_streams, rig):
        assert events[0].type == "response.created"
        last = events[-1]
        assert last.type == "response.completed"
        deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
        assert len(deltas) == 30
        assert last.response.output_text == "".join(deltas)
        assert last.response.usage is not None
        assert last.response.usage.output_tokens > 0


def _message_streams(rig: Rig) -> list[tuple[list[str], Message]]:
    out: list[tuple[list[str], Message]] = []
    with _claude(rig) as c:
        for model in (AN, OA):
            with c.messages.stream(model=model, max_tokens=60, messages=HI) as events:
                out.append((list(events.text_stream), events.get_final_message()))
    return out


async def test_the_anthropic_sdk_reads_message_streams_passed_through_and_translated(rig: Rig) -> None:
    for streamed, final in await asyncio.to_thread(_message_streams, rig):
        assert len(streamed) == 30
        assert final.content[0].type == "text"
        assert final.content[0].text == "".join(streamed)
        assert final.usage.output_tokens > 0
        assert final.stop_reason == "end_turn"
    await until(lambda: rig.open_reservations() == 0, "every stream's reservation settled")
    assert rig.settled_twice() == 0


async def test_a_client_that_goes_away_cancels_the_providers_call_and_settles(rig: Rig) -> None:
    body = {"model": OA, "messages": [{"role": "user", "content": "write 2000 words"}], "max_tokens": 3000,
            "stream": True}  # fmt: skip
    async with aiohttp.ClientSession() as session:
        response = await session.post(rig.url + "/v1/chat/completions", json=body)
        assert response.status == 200
        await response.content.readline()  # the first event has come
        await rig.emu.wait_in_flight("oa", 1)
        response.close()  # the client goes away mid-answer
    await rig.emu.wait_in_flight("oa", 0)  # the provider's handler was cancelled: it stopped
    await until(lambda: rig.open_reservations() == 0, "the stream's reservation settled")
    stats = rig.gw.runtimes["oa"].pool.statistics()
    assert stats.settled_twice == 0


def _stalled_chat(rig: Rig) -> tuple[str, str]:
    """The text that came, and the error the stream ended with."""
    got: list[str] = []
    with _openai(rig) as c:
        try:
            for chunk in c.chat.completions.create(model=STALL, messages=ASK, max_tokens=60, stream=True):
                got.extend(ch.delta.content or "" for ch in chunk.choices)
        except openai.APIError as exc:
            return "".join(got), str(exc)
    return "".join(got), "no error"


async def test_a_stream_that_stalls_ends_with_an_error_event_not_a_hang(rig: Rig) -> None:
    text, error = await asyncio.to_thread(_stalled_chat, rig)
    assert "stream_idle" in error
    assert text.split()  # what came before the stall was relayed
    await until(lambda: rig.open_reservations() == 0, "the stream's reservation settled")
    assert rig.settled_twice() == 0


def _failover(rig: Rig) -> tuple[str, int]:
    with _openai(rig) as c:
        stream = c.chat.completions.create(model=FAILOVER, messages=ASK, max_tokens=60, stream=True)
        text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
        with pytest.raises(openai.APIStatusError) as caught:  # an HTTP error, no stream begun
            c.chat.completions.create(model=DEAD, messages=ASK, max_tokens=60, stream=True)
    return text, caught.value.status_code


async def test_a_route_fails_over_before_the_first_byte_and_errs_plainly_with_no_target(rig: Rig) -> None:
    text, status = await asyncio.to_thread(_failover, rig)
    assert len(text.split()) == 30  # from oa, after the dead target refused the connection
    assert status == 502
    await until(lambda: rig.open_reservations() == 0, "every stream's reservation settled")


async def test_a_gemini_target_streams_what_it_answers_whole(rig: Rig) -> None:
    """Once a 400 ("a gemini target does not stream"): now its stream, the same answer's text
    (the kinds' whole matrix is `test_live_streaming_kinds.py`)."""
    body = {"model": GEM, "messages": ASK, "max_tokens": 20, "stream": True}
    async with aiohttp.ClientSession() as http:
        async with http.post(rig.url + "/v1/chat/completions", json=body) as r:
            status, kind, raw = r.status, r.headers["Content-Type"], await r.read()
        async with http.post(rig.url + "/v1/chat/completions", json={**body, "stream": False}) as r:
            whole = await r.json()
    assert status == 200, raw
    assert kind.startswith("text/event-stream")
    events = [line.removeprefix(b"data: ") for line in raw.split(b"\n\n") if line.startswith(b"data: {")]
    text = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in map(orjson.loads, events))
    assert text == whole["choices"][0]["message"]["content"]
    await until(lambda: rig.open_reservations() == 0, "every stream's reservation settled")
    assert rig.settled_twice() == 0


async def test_the_library_streams_the_same_events(rig: Rig) -> None:
    body = {"model": AN, "messages": ASK, "max_tokens": 60}
    pieces = [ev.text async for ev in rig.gw.stream_chat(body) if ev.text]
    whole = await rig.gw.arun(body)
    assert whole.body is not None
    assert "".join(pieces) == whole.body["choices"][0]["message"]["content"]
    assert rig.settled_twice() == 0


def _closed_port() -> int:
    """A port nothing listens on (bound, then closed): connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
