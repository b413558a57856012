"""Rate-limit headers: OpenAI Go durations, Anthropic RFC 3339 resets, garbage becomes None."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from multidict import CIMultiDict

from batchgate.models import RateLimitSnapshot
from batchgate.providers.ratelimit_headers import (
    parse_anthropic_rate_limits,
    parse_count,
    parse_duration,
    parse_openai_rate_limits,
)

WALL = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()


def test_openai_headers() -> None:
    snap = parse_openai_rate_limits(
        {
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "499",
            "x-ratelimit-reset-requests": "120ms",
            "x-ratelimit-limit-tokens": "200000",
            "x-ratelimit-remaining-tokens": "199000.5",
            "x-ratelimit-reset-tokens": "6m0s",
        }
    )
    assert snap == RateLimitSnapshot(
        limit_requests=500,
        remaining_requests=499,
        reset_requests=0.12,
        limit_tokens=200000,
        remaining_tokens=199000.5,
        reset_tokens=360.0,
    )


def test_openai_headers_in_any_case() -> None:
    snap = parse_openai_rate_limits({"X-RateLimit-Remaining-Tokens": "7", "X-RATELIMIT-RESET-TOKENS": "1s"})
    assert snap.remaining_tokens == 7
    assert snap.reset_tokens == 1.0
    ci = CIMultiDict({"X-Ratelimit-Limit-Requests": "60"})
    assert parse_openai_rate_limits(ci).limit_requests == 60


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("12ms", 0.012), ("23h47m36.648s", 85656.648), ("0", 0.0), ("1.5s", 1.5)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "1x", "-1s", "s", "1s garbage", "nan", "1e999s"])
def test_garbage_durations_are_none(text: str) -> None:
    assert parse_duration(text) is None


@pytest.mark.parametrize("text", ["", "lots", "-3", "nan", "inf", "1e999", "0x10"])
def test_garbage_counts_are_none(text: str) -> None:
    assert parse_count(text) is None


def test_no_headers_give_an_empty_snapshot() -> None:
    assert parse_openai_rate_limits({}) == RateLimitSnapshot()
    assert parse_anthropic_rate_limits({}, WALL) == RateLimitSnapshot()


def test_openai_garbage_values_are_none_and_never_raise() -> None:
    snap = parse_openai_rate_limits(
        {
            "x-ratelimit-limit-requests": "many",
            "x-ratelimit-remaining-requests": "-5",
            "x-ratelimit-reset-requests": "tomorrow",
            "x-ratelimit-limit-tokens": "1000",
        }
    )
    assert snap == RateLimitSnapshot(limit_tokens=1000)


def test_anthropic_headers() -> None:
    headers: dict[str, str] = {}
    limits = {"requests": 50, "tokens": 90000, "input-tokens": 80000, "output-tokens": 10000}
    for kind, limit in limits.items():
        headers[f"anthropic-ratelimit-{kind}-limit"] = str(limit)
        headers[f"anthropic-ratelimit-{kind}-remaining"] = str(limit - 1)
    headers["anthropic-ratelimit-requests-reset"] = "2025-01-01T12:00:01Z"
    headers["anthropic-ratelimit-tokens-reset"] = "2025-01-01T12:00:30+00:00"
    headers["anthropic-ratelimit-input-tokens-reset"] = "2025-01-01T13:00:00+01:00"  # = WALL
    headers["anthropic-ratelimit-output-tokens-reset"] = "2025-01-01T11:59:00Z"  # past
    snap = parse_anthropic_rate_limits(headers, WALL)
    assert snap == RateLimitSnapshot(
        limit_requests=50,
        remaining_requests=49,
        reset_requests=1.0,
        limit_tokens=90000,
        remaining_tokens=89999,
        reset_tokens=30.0,
        limit_input_tokens=80000,
        remaining_input_tokens=79999,
        reset_input_tokens=0.0,
        limit_output_tokens=10000,
        remaining_output_tokens=9999,
        reset_output_tokens=0.0,
    )


def test_anthropic_garbage_values_are_none() -> None:
    snap = parse_anthropic_rate_limits(
        {
            "anthropic-ratelimit-requests-limit": "NaN",
            "anthropic-ratelimit-requests-remaining": "",
            "anthropic-ratelimit-requests-reset": "next tuesday",
            "anthropic-ratelimit-tokens-reset": "2025-13-45T99:00:00Z",
            "anthropic-ratelimit-input-tokens-limit": "100",
        },
        WALL,
    )
    assert snap == RateLimitSnapshot(limit_input_tokens=100)


def test_openai_parser_ignores_anthropic_headers_and_vice_versa() -> None:
    assert parse_openai_rate_limits({"anthropic-ratelimit-requests-limit": "5"}) == RateLimitSnapshot()
    assert parse_anthropic_rate_limits({"x-ratelimit-limit-requests": "5"}, WALL) == RateLimitSnapshot()
