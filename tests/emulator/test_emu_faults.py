"""Every fault kind over a real socket, as the SDKs and a raw aiohttp client see it."""

from __future__ import annotations

import asyncio
import email.utils
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import anthropic
import openai
import orjson
import pytest

from batchgate.emulator import Emulator, EmulatorConfig

pytestmark = pytest.mark.integration

ProviderFactory = Callable[..., dict[str, Any]]
ConfigFactory = Callable[..., EmulatorConfig]

USER: list[Any] = [{"role": "user", "content": "hello"}]
BODY = orjson.dumps({"model": "m", "messages": USER, "max_tokens": 5})
JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def emu(make_provider: ProviderFactory, make_config: ConfigFactory) -> AsyncIterator[Emulator]:
    kinds = ("server_error", "overloaded", "rate_limit_no_hint", "retry_after_date", "hang", "reset",
             "truncated", "non_json", "insufficient_quota")  # fmt: skip
    providers = [make_provider(kind, faults={kind: 1.0}) for kind in kinds]
    providers += [
        make_provider(f"{kind}_a", "anthropic", faults={kind: 1.0})
        for kind in ("overloaded", "insufficient_quota", "server_error")
    ]
    async with Emulator(make_config(*providers)) as emulator:
        yield emulator


def oa(emu: Emulator, name: str, **kwargs: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=emu.base_url(name), api_key="x", max_retries=0, **kwargs)


def an(emu: Emulator, name: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=emu.base_url(name), api_key="x", max_retries=0)


async def test_server_error_is_500_502_or_503_and_charged(emu: Emulator) -> None:
    statuses = set()
    async with oa(emu, "server_error") as client:
        for _ in range(12):
            with pytest.raises(openai.InternalServerError) as info:
                await client.chat.completions.create(model="m", messages=USER, max_tokens=5)
            statuses.add(info.value.status_code)
    assert statuses <= {500, 502, 503}
    assert len(statuses) >= 2  # the seeded draws pick more than one status over 12 tries
    stats = emu.stats()["providers"]["server_error"]
    assert (stats["faults"]["server_error"], stats["admitted"], stats["completed"]) == (12, 12, 0)
    async with an(emu, "server_error_a") as aclient:
        with pytest.raises(anthropic.InternalServerError) as ainfo:
            await aclient.messages.create(model="c", max_tokens=5, messages=USER)
    assert isinstance(ainfo.value.body, dict)
    assert ainfo.value.body["error"]["type"] == "api_error"


async def test_overloaded_is_529_for_anthropic_and_503_for_openai(emu: Emulator) -> None:
    async with an(emu, "overloaded_a") as aclient:
        with pytest.raises(anthropic.OverloadedError) as ainfo:
            await aclient.messages.create(model="c", max_tokens=5, messages=USER)
    assert ainfo.value.status_code == 529
    async with oa(emu, "overloaded") as client:
        with pytest.raises(openai.InternalServerError) as info:
            await client.chat.completions.create(model="m", messages=USER)
    assert info.value.status_code == 503
    assert emu.stats()["providers"]["overloaded_a"]["faults"]["overloaded"] == 1


async def test_rate_limit_without_any_hint(emu: Emulator) -> None:
    async with oa(emu, "rate_limit_no_hint") as client:
        with pytest.raises(openai.RateLimitError) as info:
            await client.chat.completions.create(model="m", messages=USER)
    headers = info.value.response.headers
    assert "retry-after" not in headers
    assert "retry-after-ms" not in headers
    assert not [h for h in headers if h.startswith("x-ratelimit")]
    stats = emu.stats()["providers"]["rate_limit_no_hint"]
    assert (stats["admitted"], stats["faults"]["rate_limit_no_hint"]) == (0, 1)  # refused, not charged


async def test_retry_after_as_an_http_date(emu: Emulator) -> None:
    async with oa(emu, "retry_after_date") as client:
        with pytest.raises(openai.RateLimitError) as info:
            await client.chat.completions.create(model="m", messages=USER)
    headers = info.value.response.headers
    assert "retry-after-ms" not in headers
    when = email.utils.parsedate_to_datetime(headers["retry-after"])
    sent = email.utils.parsedate_to_datetime(headers["date"])
    assert 0 < (when - sent).total_seconds() <= 3


async def test_hang_never_answers_and_is_released_when_the_client_gives_up(emu: Emulator) -> None:
    async with oa(emu, "hang", timeout=0.3) as client:
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(model="m", messages=USER)
    stats = emu.stats()["providers"]["hang"]
    assert (stats["faults"]["hang"], stats["completed"]) == (1, 0)
    # The server notices the disconnect and cancels the hanging handler.
    await asyncio.wait_for(emu.wait_hanging("hang", 0), 10)
    assert emu.stats()["providers"]["hang"]["hanging"] == 0


async def test_hang_is_released_on_shutdown(
    make_provider: ProviderFactory, make_config: ConfigFactory
) -> None:
    emulator = Emulator(make_config(make_provider("hang", faults={"hang": 1.0})))
    await emulator.start()
    url = emulator.base_url("hang") + "/chat/completions"
    async with aiohttp.ClientSession() as session:
        request = asyncio.ensure_future(session.post(url, data=BODY, headers=JSON))
        await asyncio.wait_for(emulator.wait_hanging("hang", 1), 10)
        await emulator.stop()  # must not wait for the hang
        with pytest.raises(aiohttp.ClientError):
            await request


async def test_reset_drops_the_connection(emu: Emulator) -> None:
    async with oa(emu, "reset") as client:
        with pytest.raises(openai.APIConnectionError):
            await client.chat.completions.create(model="m", messages=USER)
    async with aiohttp.ClientSession() as session:
        with pytest.raises((aiohttp.ClientOSError, aiohttp.ServerDisconnectedError)):
            await session.post(emu.base_url("reset") + "/chat/completions", data=BODY, headers=JSON)
    assert emu.stats()["providers"]["reset"]["faults"]["reset"] == 2


async def test_truncated_is_a_200_whose_json_is_cut(emu: Emulator) -> None:
    url = emu.base_url("truncated") + "/chat/completions"
    async with aiohttp.ClientSession() as session, session.post(url, data=BODY, headers=JSON) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "application/json"
        raw = await r.read()
    assert raw.startswith(b'{"id":"chatcmpl-')
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(raw)


async def test_non_json_is_a_200_with_an_html_body(emu: Emulator) -> None:
    url = emu.base_url("non_json") + "/chat/completions"
    async with aiohttp.ClientSession() as session, session.post(url, data=BODY, headers=JSON) as r:
        assert r.status == 200
        raw = await r.read()
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(raw)
    assert emu.stats()["providers"]["non_json"]["faults"]["non_json"] == 1


async def test_insufficient_quota_is_not_retryable(emu: Emulator) -> None:
    async with oa(emu, "insufficient_quota") as client:
        with pytest.raises(openai.RateLimitError) as info:
            await client.chat.completions.create(model="m", messages=USER)
    assert info.value.code == "insufficient_quota"
    assert info.value.type == "insufficient_quota"
    assert "retry-after" not in info.value.response.headers
    async with an(emu, "insufficient_quota_a") as aclient:
        with pytest.raises(anthropic.APIStatusError) as ainfo:
            await aclient.messages.create(model="c", max_tokens=5, messages=USER)
    assert ainfo.value.status_code == 402
    assert isinstance(ainfo.value.body, dict)
    assert ainfo.value.body["error"]["type"] == "billing_error"
