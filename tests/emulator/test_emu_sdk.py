"""The official SDKs, pointed at the emulator over a real socket, get correct answers and errors."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import openai
import pytest

from batchgate.emulator import Emulator
from batchgate.tokens import ExactTokenCounter

pytestmark = pytest.mark.integration

SENTIMENT = "Classify the sentiment of this review: I loved it, the acting was wonderful"


@pytest.fixture
async def emu(
    make_provider: Callable[..., dict[str, Any]], make_config: Callable[..., Any]
) -> AsyncIterator[Emulator]:
    provider = make_provider
    cfg = make_config(
        provider("alpha"),
        provider("gamma", "anthropic"),
        provider("tight", limits={"rpm": 6, "tpm": 100_000}),  # one request per 10 s window
        provider("tight_a", "anthropic", limits={"rpm": 6, "itpm": 100_000, "otpm": 100_000}),
        provider("small", limits={"rpm": 600, "tpm": 1000}),
        provider("locked", api_key="sk-secret-1"),
        provider("locked_a", "anthropic", api_key="sk-secret-2"),
        provider("picky", models=["small-model"]),
        window_seconds=10.0,
    )
    async with Emulator(cfg) as emulator:
        yield emulator


def oa(emu: Emulator, name: str, key: str = "x") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=emu.base_url(name), api_key=key, max_retries=0)


def an(emu: Emulator, name: str, key: str = "x") -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=emu.base_url(name), api_key=key, max_retries=0)


async def test_openai_sdk_gets_a_label_and_usage_that_adds_up(emu: Emulator) -> None:
    messages: list[openai.types.chat.ChatCompletionMessageParam] = [{"role": "user", "content": SENTIMENT}]
    async with oa(emu, "alpha") as client:
        response = await client.chat.completions.create(model="gpt-x", messages=messages, max_tokens=10)
    assert response.choices[0].message.content == "positive"
    assert response.choices[0].finish_reason == "stop"
    assert response.model == "gpt-x"
    usage = response.usage
    assert usage is not None
    prompt = ExactTokenCounter().count_prompt({"messages": messages})
    assert usage.prompt_tokens == prompt
    assert usage.completion_tokens == 1
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    stats = emu.stats()["providers"]["alpha"]
    assert stats["completed"] == 1
    assert stats["tokens_charged"] == {"input": prompt, "output": 10, "total": prompt + 10}


async def test_openai_n_choices_and_length_cut(emu: Emulator) -> None:
    async with oa(emu, "alpha") as client:
        response = await client.chat.completions.create(
            model="m",
            messages=[
                {"role": "user", "content": "please repeat after me the following long sentence of words"}
            ],
            max_tokens=3,
            n=2,
        )
    assert len(response.choices) == 2
    assert all(c.finish_reason == "length" for c in response.choices)
    assert response.choices[0].message.content == response.choices[1].message.content
    assert response.usage is not None
    assert 0 < response.usage.completion_tokens <= 6


async def test_anthropic_sdk_gets_a_summary_and_usage(emu: Emulator) -> None:
    text = "the quarterly report shows revenue grew while costs fell sharply across every region this year"
    async with an(emu, "gamma") as client:
        message = await client.messages.create(
            model="claude-x",
            max_tokens=100,
            system="You are terse.",
            messages=[{"role": "user", "content": f"Summarize: {text}"}],
        )
    block = message.content[0]
    assert isinstance(block, anthropic.types.TextBlock)
    assert block.text == " ".join(text.split()[:12])
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens > 0
    stats = emu.stats()["providers"]["gamma"]
    assert stats["tokens_charged"]["input"] == message.usage.input_tokens
    assert stats["tokens_charged"]["output"] == 100  # max_tokens is charged at admission


async def test_anthropic_max_tokens_cut(emu: Emulator) -> None:
    async with an(emu, "gamma") as client:
        message = await client.messages.create(
            model="c",
            max_tokens=2,
            messages=[{"role": "user", "content": "tell me a long story about dragons"}],
        )
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens <= 2


async def test_openai_429_is_a_rate_limit_error_with_readable_hints(emu: Emulator) -> None:
    async with oa(emu, "tight") as client:
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "a"}], max_tokens=5
        )
        with pytest.raises(openai.RateLimitError) as info:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "b"}], max_tokens=5
            )
    headers = info.value.response.headers
    assert 0 < int(headers["retry-after-ms"]) <= 10_000
    assert int(headers["retry-after"]) == -(-int(headers["retry-after-ms"]) // 1000)
    assert headers["x-ratelimit-limit-requests"] == "6"
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert info.value.code == "rate_limit_exceeded"
    assert emu.stats()["providers"]["tight"]["rejected"]["rate_limit"] == 1


async def test_anthropic_429_is_a_rate_limit_error_with_readable_hints(emu: Emulator) -> None:
    async with an(emu, "tight_a") as client:
        await client.messages.create(model="c", max_tokens=5, messages=[{"role": "user", "content": "a"}])
        with pytest.raises(anthropic.RateLimitError) as info:
            await client.messages.create(model="c", max_tokens=5, messages=[{"role": "user", "content": "b"}])
    headers = info.value.response.headers
    assert int(headers["retry-after"]) >= 1
    assert int(headers["retry-after-ms"]) > 0
    assert headers["anthropic-ratelimit-requests-limit"] == "6"
    assert headers["anthropic-ratelimit-requests-reset"].endswith("Z")
    assert headers["request-id"].startswith("req_")


async def test_a_request_bigger_than_the_whole_minute_is_a_400_not_a_429(emu: Emulator) -> None:
    async with oa(emu, "small") as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5000
            )
    assert info.value.code == "request_too_large"
    assert emu.stats()["providers"]["small"]["rejected"]["never_fits"] == 1


async def test_wrong_api_keys_get_each_familys_401(emu: Emulator) -> None:
    async with oa(emu, "locked", key="sk-wrong") as client:
        with pytest.raises(openai.AuthenticationError) as info:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert info.value.code == "invalid_api_key"
        assert "sk-wrong" not in str(info.value.body)
    async with oa(emu, "locked", key="sk-secret-1") as client:
        ok = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert ok.choices[0].message.content == "echo: x"
    async with an(emu, "locked_a", key="sk-wrong") as aclient:
        with pytest.raises(anthropic.AuthenticationError) as ainfo:
            await aclient.messages.create(
                model="c", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
    assert ainfo.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        "request_id": ainfo.value.response.headers["request-id"],
    }
    assert emu.stats()["providers"]["locked"]["rejected"]["auth"] == 1


async def test_invalid_requests_raise_the_sdks_bad_request_errors(emu: Emulator) -> None:
    async with oa(emu, "alpha") as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(model="m", messages=[])
        assert info.value.param == "messages"
        with pytest.raises(openai.NotFoundError):
            await client.models.list()  # an endpoint the emulator does not serve
    async with oa(emu, "picky") as client:
        with pytest.raises(openai.NotFoundError) as missing:
            await client.chat.completions.create(
                model="gpt-huge", messages=[{"role": "user", "content": "x"}]
            )
    assert missing.value.code == "model_not_found"
    async with an(emu, "gamma") as aclient:
        with pytest.raises(anthropic.BadRequestError) as ainfo:
            await aclient.messages.create(
                model="c",
                max_tokens=5,
                messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            )
    assert "alternate" in str(ainfo.value)
