"""The emulator streams as the providers do: the official SDKs read its chat chunks (the usage
chunk only when asked), its Responses events and its Messages events; the events are paced (one
a token, counted not timed); a `stall` fault stops a stream halfway and hangs until the client
goes, and a request not streamed with it hangs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import anthropic
import openai
import pytest

from batchgate.emulator import Emulator
from waiting import until

from .conftest import ConfigFactory, ProviderFactory

pytestmark = pytest.mark.integration

ASK = "write 12 words"
PACED = {"ttft_p50_ms": 2.0, "ttft_sigma": 0.1, "per_token_ms": 1.0}


@pytest.fixture
async def emu(make_config: ConfigFactory, make_provider: ProviderFactory) -> AsyncIterator[Emulator]:
    config = make_config(
        make_provider("oa", latency=PACED),
        make_provider("an", "anthropic", latency=PACED),
        make_provider("stuck", latency=PACED, faults={"stall": 1.0}),
    )
    async with Emulator(config) as emulator:
        yield emulator


async def test_chat_chunks_a_token_each_with_usage_only_when_asked(emu: Emulator) -> None:
    async with openai.AsyncOpenAI(base_url=emu.base_url("oa"), api_key="k", max_retries=0) as c:
        for asked in (True, False):
            options: openai.types.chat.ChatCompletionStreamOptionsParam = {"include_usage": asked}
            stream = await c.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": ASK}],
                stream=True,
                stream_options=options,
            )
            chunks = [chunk async for chunk in stream]
            pieces = [
                ch.choices[0].delta.content for ch in chunks if ch.choices and ch.choices[0].delta.content
            ]
            assert len(pieces) == 12
            assert chunks[0].choices[0].delta.role == "assistant"
            assert (chunks[-1].usage is not None) is asked
            if asked:
                assert chunks[-1].usage is not None
                assert chunks[-1].usage.completion_tokens == 12
    assert len(emu.streams.first_sent) == 2  # each stream's first event, by its answer's id


async def test_responses_and_messages_stream_to_their_sdks(emu: Emulator) -> None:
    async with openai.AsyncOpenAI(base_url=emu.base_url("oa"), api_key="k", max_retries=0) as c:
        events = [e async for e in await c.responses.create(model="gpt-4o-mini", input=ASK, stream=True)]
        assert events[-1].type == "response.completed"
        assert events[-1].response.output_text == "the quick brown fox jumps over a lazy dog again the quick"
        assert sum(e.type == "response.output_text.delta" for e in events) == 12
    async with anthropic.AsyncAnthropic(base_url=emu.base_url("an"), api_key="k", max_retries=0) as a:
        async with a.messages.stream(
            model="claude-3-5-haiku-latest", max_tokens=50, messages=[{"role": "user", "content": ASK}]
        ) as stream:
            pieces = [text async for text in stream.text_stream]
            final = await stream.get_final_message()
        assert len(pieces) == 12
        assert final.usage.output_tokens > 0
        assert final.stop_reason == "end_turn"


async def test_a_stall_stops_a_stream_halfway_and_hangs_until_the_client_goes(emu: Emulator) -> None:
    async with openai.AsyncOpenAI(base_url=emu.base_url("stuck"), api_key="k", max_retries=0) as c:
        stream = await c.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": ASK}], max_tokens=50, stream=True
        )
        got: list[str] = []

        async def read() -> None:
            async for chunk in stream:
                got.extend(ch.delta.content or "" for ch in chunk.choices)

        reading = asyncio.ensure_future(read())
        await emu.wait_hanging("stuck", 1)
        await until(lambda: len([g for g in got if g]) == 6, "the half of 12 tokens before the stall")
        reading.cancel()
        await stream.close()
        await emu.wait_hanging("stuck", 0)
