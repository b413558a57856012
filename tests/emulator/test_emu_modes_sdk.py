"""The official SDKs over a real socket against every enforcement × header style × charge, and
against a concurrency cap that answers a bare 429: answers, usage, headers and charges hold."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

import anthropic
import openai
import pytest

from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.emulator.anthropic_api import count_input
from batchgate.emulator.modes import ENFORCEMENTS, HEADER_STYLES
from batchgate.tokens import ExactTokenCounter

pytestmark = pytest.mark.integration

SENTIMENT = "Classify the sentiment of this review: I loved it, the acting was wonderful"
MODES = [(e, h, c) for e in ENFORCEMENTS for h in HEADER_STYLES for c in ("exact", "chars")]
RATE_ERRORS = (openai.RateLimitError, anthropic.RateLimitError)
PREFIX = {"openai": "x-ratelimit-", "anthropic": "anthropic-ratelimit-"}
REMAINING = {
    "openai": "x-ratelimit-remaining-requests",
    "anthropic": "anthropic-ratelimit-requests-remaining",
}


def _config(family: str, enforcement: str, headers: str, charge: str, **extra: Any) -> Any:
    seconds = "burst_seconds" if enforcement == "token_bucket" else "window_seconds"
    tokens = {"tpm": 1_000_000} if family == "openai" else {"itpm": 1_000_000, "otpm": 1_000_000}
    provider = {
        "name": "p",
        "family": family,
        "limits": {"rpm": 12, **tokens},  # two requests per 10 s
        "enforcement": {"kind": enforcement, seconds: 10},
        "headers": headers,
        "charge": "exact" if charge == "exact" else {"chars_per_token": 4},
        **extra,
    }
    return emulator_config_from_dict({"seed": 1, "providers": [provider]})


async def _send(emu: Emulator, family: str) -> tuple[str, int, Mapping[str, str]]:
    """One request through the family's SDK: (answer, usage's prompt tokens, response headers)."""
    if family == "openai":
        async with openai.AsyncOpenAI(base_url=emu.base_url("p"), api_key="x", max_retries=0) as oc:
            raw = await oc.chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": SENTIMENT}], max_tokens=10
            )
            completion = raw.parse()
            assert completion.usage is not None
            return completion.choices[0].message.content or "", completion.usage.prompt_tokens, raw.headers
    async with anthropic.AsyncAnthropic(base_url=emu.base_url("p"), api_key="x", max_retries=0) as ac:
        raw_a = await ac.messages.with_raw_response.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": SENTIMENT}]
        )
        message = await raw_a.parse()
        block = message.content[0]
        assert block.type == "text"
        return block.text, message.usage.input_tokens, raw_a.headers


def _ratelimit_headers(headers: Mapping[str, str], family: str) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower().startswith(PREFIX[family])}


def _refused_headers(exc: BaseException) -> Mapping[str, str]:
    assert isinstance(exc, RATE_ERRORS)
    return exc.response.headers


def _exact_prompt(family: str) -> int:
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": SENTIMENT}]}
    return ExactTokenCounter().count_prompt(body) if family == "openai" else count_input(body)


@pytest.mark.parametrize("family", ["openai", "anthropic"])
@pytest.mark.parametrize(("enforcement", "headers", "charge"), MODES)
async def test_sdks_work_against_every_mode(family: str, enforcement: str, headers: str, charge: str) -> None:
    async with Emulator(_config(family, enforcement, headers, charge)) as emu:
        text, prompt_tokens, first = await _send(emu, family)
        await _send(emu, family)
        with pytest.raises(RATE_ERRORS) as info:  # the third in 10 s is over the allowance of two
            await _send(emu, family)
        stats = emu.stats()["providers"]["p"]
    assert text == "positive"
    assert prompt_tokens == _exact_prompt(family)  # usage is exact whatever the charge
    charged = prompt_tokens if charge == "exact" else math.ceil(len(SENTIMENT) / 4)
    assert stats["tokens_charged"]["input"] == 2 * charged
    assert stats["rejected"]["rate_limit"] == 1
    refused = _refused_headers(info.value)
    assert int(refused["retry-after-ms"]) > 0
    seen = _ratelimit_headers(first, family)
    if headers == "none":
        assert seen == {}
        assert _ratelimit_headers(refused, family) == {}
        return
    remaining = int(first[REMAINING[family]])
    if headers == "minute":  # one of two left in the window, scaled to the minute (×6), refill aside
        assert 6 <= remaining <= 7
    else:
        assert remaining == 1
    assert int(refused[REMAINING[family]]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("family", ["openai", "anthropic"])
async def test_a_concurrency_cap_can_answer_a_bare_429(family: str) -> None:
    cfg = _config(
        family,
        "token_bucket",
        "minute",
        "exact",
        concurrency={"max": 1, "overflow": "reject", "status": 429},
        latency={"ttft_p50_ms": 1500, "ttft_sigma": 0},
    )
    async with Emulator(cfg) as emu:
        first = asyncio.ensure_future(_send(emu, family))
        await emu.wait_in_flight("p", 1)
        with pytest.raises(RATE_ERRORS) as info:
            await _send(emu, family)
        assert (await first)[0] == "positive"
        stats = emu.stats()["providers"]["p"]
    refused = _refused_headers(info.value)
    assert "retry-after" not in refused
    assert "retry-after-ms" not in refused
    assert _ratelimit_headers(refused, family) == {}
    assert stats["rejected"] == {**stats["rejected"], "concurrency": 1, "rate_limit": 0}


async def test_stats_say_when_the_first_request_came_and_the_last_success_was_admitted() -> None:
    async with Emulator(_config("openai", "sliding_window", "minute", "exact")) as emu:
        await _send(emu, "openai")
        await _send(emu, "openai")
        with pytest.raises(openai.RateLimitError):
            await _send(emu, "openai")
        stats = emu.stats()["providers"]["p"]
    first, last = stats["first_request_s"], stats["last_success_admitted_s"]
    assert first is not None
    assert last is not None
    assert 0 <= first < last
