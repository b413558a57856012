"""`output_charge`: a provider that keeps `max_tokens` charged, or one that adjusts the output charge
to the real output when the answer ends (Anthropic's documented OTPM rule, shared/PROTOCOLS.md)."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.emulator.enforcement import FixedWindow, SlidingWindow, TokenBucket
from batchgate.errors import ConfigError

pytestmark = pytest.mark.integration

SENTIMENT = "Classify the sentiment of this review: I loved it, the acting was wonderful"
MAX_TOKENS = 50  # half the output bucket; the answer is one word: most of it unused


def _config(family: str, output_charge: str | None) -> Any:
    limits = {"tpm": 2400} if family == "openai" else {"itpm": 1_000_000, "otpm": 600}
    provider: dict[str, Any] = {
        "name": "p",
        "family": family,
        "limits": {"rpm": 1000, **limits},
        "enforcement": {"kind": "token_bucket", "burst_seconds": 10},  # otpm holds 100, tpm 400
    }
    if output_charge is not None:
        provider["output_charge"] = output_charge
    return emulator_config_from_dict({"seed": 1, "providers": [provider]})


async def _send(emu: Emulator, family: str) -> tuple[int, dict[str, str]]:
    """One request with `max_tokens` 50: (the output tokens in its usage, its headers)."""
    if family == "openai":
        async with openai.AsyncOpenAI(base_url=emu.base_url("p"), api_key="x", max_retries=0) as oc:
            raw = await oc.chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": SENTIMENT}], max_tokens=MAX_TOKENS
            )
            usage = raw.parse().usage
            assert usage is not None
            return usage.completion_tokens, dict(raw.headers)
    async with anthropic.AsyncAnthropic(base_url=emu.base_url("p"), api_key="x", max_retries=0) as ac:
        raw_a = await ac.messages.with_raw_response.create(
            model="m", max_tokens=MAX_TOKENS, messages=[{"role": "user", "content": SENTIMENT}]
        )
        return (await raw_a.parse()).usage.output_tokens, dict(raw_a.headers)


def _output_remaining(family: str, headers: dict[str, str]) -> int:
    if family == "openai":
        return int(headers["x-ratelimit-remaining-tokens"])
    return int(headers["anthropic-ratelimit-output-tokens-remaining"])


@pytest.mark.parametrize("family", ["anthropic", "openai"])
async def test_an_adjusting_provider_gives_the_unused_output_back_when_the_answer_ends(family: str) -> None:
    limit = 2400 if family == "openai" else 600
    async with Emulator(_config(family, "adjusted")) as emu:
        answers = [await _send(emu, family) for _ in range(5)]  # 5 × 50 > the 100 the bucket holds
        stats = emu.stats()["providers"]["p"]
    assert stats["rejected"]["rate_limit"] == 0
    output, headers = answers[-1]
    assert 0 < output < 10
    assert _output_remaining(family, headers) >= limit * 0.6  # only the real outputs stay charged
    async with Emulator(_config(family, None)) as emu:  # the default keeps max_tokens charged
        for _ in range(1 if family == "anthropic" else 3):
            await _send(emu, family)
        _, headers = await _send(emu, family)
        if family == "anthropic":  # 2 × 50 of the bucket's 100: the next waits for its refill
            with pytest.raises(anthropic.RateLimitError):
                await _send(emu, family)
    assert _output_remaining(family, headers) < limit * 0.5


def test_output_charge_is_checked_naming_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        _config("anthropic", "refunded")
    assert "providers[0].output_charge" in str(info.value)
    assert "max_tokens, adjusted" in str(info.value)


@pytest.mark.parametrize("make", [TokenBucket, SlidingWindow, FixedWindow])
def test_every_limiter_refunds_at_once_and_never_past_its_allowance(make: Any) -> None:
    limiter = make(600, 1.0, 0.0)  # an allowance of 10 per second
    limiter.charge(10, 0.0)
    assert limiter.wait_time(4, 0.0) > 0
    limiter.refund(6, 0.0)
    assert limiter.wait_time(4, 0.0) == 0.0
    assert limiter.wait_time(7, 0.0) > 0
    limiter.refund(1000, 0.0)
    assert limiter.remaining(0.0) == pytest.approx(10.0)
