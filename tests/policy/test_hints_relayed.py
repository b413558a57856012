"""Every retry hint is read, prefixed or not (issue 38): a proxy in front (LiteLLM) relays its
upstream's headers as `llm_provider-*` and sends only `llm_provider-retry-after` on its own 429;
an exhausted limit's `x-ratelimit-reset-*` is a hint too, in seconds or a duration."""

from __future__ import annotations

import pytest

from batchgate.policy.hints import parse_reset, parse_retry_hint
from batchgate.providers.ratelimit_headers import parse_openai_rate_limits

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"llm_provider-retry-after": "60"}, 60.0),
        ({"LLM_Provider-Retry-After": "2"}, 2.0),
        ({"llm_provider-retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "3", "llm_provider-retry-after": "9"}, 3.0),  # the nearest server's own first
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m30s"}, 60.0),  # capped
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6ms"}, 0.006),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "2.5"}, 2.5),
        (
            {
                "llm_provider-x-ratelimit-remaining-requests": "0",
                "llm_provider-x-ratelimit-reset-requests": "2s",
            },
            2.0,
        ),
        ({"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "2s"}, None),  # room left
        ({"llm_provider-retry-after": "soon"}, None),
    ],
)
def test_every_hint_is_read_prefixed_or_not(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_hint(headers, NOW) == pytest.approx(expected)


def test_no_hint_is_taken_when_the_user_takes_none() -> None:
    assert parse_retry_hint({"llm_provider-retry-after": "60"}, NOW, max_hint=0) is None


@pytest.mark.parametrize(
    ("text", "seconds"), [("1m30s", 90.0), ("6ms", 0.006), ("2", 2.0), ("0.5", 0.5), ("x", None)]
)
def test_a_reset_is_seconds_or_a_duration(text: str, seconds: float | None) -> None:
    assert parse_reset(text) == pytest.approx(seconds)


def test_relayed_rate_limit_headers_are_read_when_the_proxy_sends_none_of_its_own() -> None:
    snapshot = parse_openai_rate_limits(
        {
            "llm_provider-x-ratelimit-limit-requests": "500",
            "llm_provider-x-ratelimit-remaining-requests": "0",
            "llm_provider-x-ratelimit-reset-requests": "120ms",
        }
    )
    assert (snapshot.limit_requests, snapshot.remaining_requests) == (500.0, 0.0)
    assert snapshot.reset_requests == pytest.approx(0.12)


def test_the_proxys_own_limits_win_over_its_upstreams_never_mixed() -> None:
    snapshot = parse_openai_rate_limits(
        {
            "x-ratelimit-limit-requests": "300",
            "x-ratelimit-remaining-requests": "299",
            "llm_provider-x-ratelimit-limit-requests": "10000",
            "llm_provider-x-ratelimit-reset-requests": "6ms",
            "llm_provider-x-ratelimit-limit-tokens": "2000000",
        }
    )
    assert (snapshot.limit_requests, snapshot.remaining_requests, snapshot.reset_requests) == (
        300.0,
        299.0,
        None,
    )
    assert snapshot.limit_tokens == 2_000_000.0  # no tokens header of its own: the relayed one
