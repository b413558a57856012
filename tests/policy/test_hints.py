"""Header parsing: retry hints, x-should-retry, Go durations and RFC 3339 resets."""

from __future__ import annotations

import email.utils
import math
import random

import pytest
from multidict import CIMultiDict

from batchgate.errors import RateLimitError
from batchgate.policy.hints import (
    header,
    parse_go_duration,
    parse_retry_hint,
    parse_rfc3339_delta,
    parse_should_retry,
)
from batchgate.policy.retry import RetryPolicy, RetrySettings

NOW = 1_800_000_000.0


def http_date(ts: float) -> str:
    return email.utils.formatdate(ts, usegmt=True)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After-Ms": "250"}, 0.25),
        ({"retry-after": "3"}, 3.0),
        ({"Retry-After": "2.5"}, 2.5),
        ({"RETRY-AFTER": "0"}, 0.0),
        ({"retry-after-ms": "100", "retry-after": "9"}, 0.1),  # ms wins
        ({"retry-after-ms": "garbage", "retry-after": "4"}, 4.0),  # bad ms falls back
        ({"retry-after-ms": "-5", "retry-after": "4"}, 4.0),
        ({}, None),
        ({"retry-after": ""}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "NaN"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after-ms": "nan"}, None),
        ({"retry-after": "86400"}, 60.0),  # a day is capped, never slept
        ({"retry-after-ms": "90000000"}, 60.0),
    ],
)
def test_retry_hint_values(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_hint(headers, NOW) == expected


def test_retry_hint_http_date() -> None:
    assert parse_retry_hint({"retry-after": http_date(NOW + 7)}, NOW) == pytest.approx(7.0)
    # a date slightly in the past (clock skew) means now; a date long past is garbage
    assert parse_retry_hint({"retry-after": http_date(NOW - 2)}, NOW) == 0.0
    assert parse_retry_hint({"retry-after": http_date(NOW - 3600)}, NOW) is None
    # a date a day ahead is capped
    assert parse_retry_hint({"retry-after": http_date(NOW + 86400)}, NOW) == 60.0


def test_retry_hint_custom_cap_and_cimultidict() -> None:
    headers = CIMultiDict({"Retry-After": "100"})
    assert parse_retry_hint(headers, NOW, max_hint=120.0) == 100.0
    assert parse_retry_hint(headers, NOW, max_hint=5.0) == 5.0


def test_header_lookup_is_case_insensitive_on_plain_dicts() -> None:
    assert header({"X-Should-Retry": " true "}, "x-should-retry") == "true"
    assert header({"x-should-retry": "false"}, "X-Should-Retry") == "false"
    assert header({"other": "1"}, "x-should-retry") is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", True), ("TRUE", True), ("false", False), ("False", False), ("maybe", None), ("1", None)],
)
def test_should_retry(value: str, expected: bool | None) -> None:
    assert parse_should_retry({"X-Should-Retry": value}) is expected


def test_should_retry_absent() -> None:
    assert parse_should_retry({}) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("12ms", 0.012),
        ("23h47m36.648s", 23 * 3600 + 47 * 60 + 36.648),
        ("0", 0.0),
        ("0s", 0.0),
        ("1.5h", 5400.0),
        ("500us", 0.0005),
        ("7ns", 7e-9),
        (".5s", 0.5),
    ],
)
def test_go_durations(text: str, expected: float) -> None:
    value = parse_go_duration(text)
    assert value is not None
    assert value == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "s", "1", "1x", "-1s", "1s garbage", "abc", "1e400s"])
def test_go_duration_garbage(text: str) -> None:
    assert parse_go_duration(text) is None


def test_rfc3339_delta() -> None:
    # 1_800_000_000 is 2027-01-15T08:00:00Z
    assert parse_rfc3339_delta("2027-01-15T08:00:05Z", NOW) == pytest.approx(5.0)
    assert parse_rfc3339_delta("2027-01-15T08:00:00.250+00:00", NOW) == pytest.approx(0.25)
    assert parse_rfc3339_delta("2027-01-15T09:00:05+01:00", NOW) == pytest.approx(5.0)
    assert parse_rfc3339_delta("2027-01-15T08:00:05", NOW) == pytest.approx(5.0)  # naive = UTC
    assert parse_rfc3339_delta("2020-01-01T00:00:00Z", NOW) == 0.0  # already past: full now
    assert parse_rfc3339_delta("not a date", NOW) is None
    assert parse_rfc3339_delta("", NOW) is None
    assert math.isfinite(parse_rfc3339_delta("9999-12-31T23:59:59Z", NOW) or math.inf)


def test_max_hint_zero_takes_no_hint() -> None:
    """Issue 46: `max_hint: 0` is the user declining the provider's hints — the own backoff
    applies (None), never a 0 s "hint" that retries at once and pauses nothing."""
    for headers in ({"retry-after": "1"}, {"retry-after-ms": "250"}, {"retry-after": http_date(NOW + 7)}):
        assert parse_retry_hint(headers, NOW, max_hint=0.0) is None
    policy = RetryPolicy(
        RetrySettings(max_attempts=3, base_delay=0.5, max_delay=4.0, max_hint=0.0), random.Random(1)
    )
    decision = policy.decide(
        RateLimitError("p: 429", provider="p", status=429, headers={"retry-after": "1"}), 1, NOW
    )
    assert decision.retry
    assert not decision.hinted
