"""What a Google error body says in `error.details` (pure): RetryInfo's wait, a refused key; and
how `classify` carries them (a `retry-after-ms` hint, an AuthenticationError)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from batchgate.errors import AuthenticationError, BadRequestError, QuotaExhaustedError, RateLimitError
from batchgate.policy.hints import parse_retry_hint
from batchgate.providers.classify import error_for_response
from batchgate.providers.google_rpc import (
    RETRY_INFO,
    api_key_invalid,
    daily_quota_exhausted,
    retry_delay,
    retry_headers,
)


def _body(*details: dict[str, Any], status: str = "RESOURCE_EXHAUSTED", code: int = 429) -> dict[str, Any]:
    return {"error": {"code": code, "message": "quota", "status": status, "details": list(details)}}


@pytest.mark.parametrize(("delay", "seconds"), [("34s", 34.0), ("0.5s", 0.5), ("0s", 0.0)])
def test_retry_delay_reads_a_duration(delay: str, seconds: float) -> None:
    assert retry_delay(_body({"@type": RETRY_INFO, "retryDelay": delay})) == seconds


@pytest.mark.parametrize(
    "body",
    [
        None,
        "text",
        {"error": "x"},
        _body(),
        _body({"@type": RETRY_INFO, "retryDelay": "soon"}),
        _body({"@type": RETRY_INFO, "retryDelay": "-3s"}),
        _body({"@type": RETRY_INFO, "retryDelay": 34}),
        _body({"@type": "type.googleapis.com/google.rpc.QuotaFailure", "retryDelay": "3s"}),
    ],
)
def test_no_usable_retry_delay_is_none(body: Any) -> None:
    assert retry_delay(body) is None
    assert retry_headers(body) == {}


def test_a_429_with_retry_info_is_a_rate_limit_with_its_hint() -> None:
    raw = orjson.dumps(_body({"@type": RETRY_INFO, "retryDelay": "7s"}))
    err = error_for_response(429, {"content-type": "application/json"}, raw, provider="gem")
    assert isinstance(err, RateLimitError)
    assert "RESOURCE_EXHAUSTED" in str(err)
    assert parse_retry_hint(err.headers, 0.0, max_hint=60.0) == 7.0


def test_a_refused_key_is_an_authentication_error_not_a_bad_request() -> None:
    info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}
    assert api_key_invalid(_body(info, status="INVALID_ARGUMENT", code=400))
    raw = orjson.dumps(_body(info, status="INVALID_ARGUMENT", code=400))
    assert isinstance(error_for_response(400, {}, raw, provider="gem"), AuthenticationError)
    other = orjson.dumps(_body(status="INVALID_ARGUMENT", code=400))
    err = error_for_response(400, {}, other, provider="gem")
    assert type(err) is BadRequestError


def test_a_day_quota_used_up_stops_instead_of_retrying() -> None:
    per_day = {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}],
    }
    per_minute = {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel"}],
    }
    assert daily_quota_exhausted(_body(per_day))
    assert not daily_quota_exhausted(_body(per_minute))
    assert not daily_quota_exhausted(_body({"@type": per_day["@type"], "violations": "x"}))
    assert isinstance(
        error_for_response(429, {}, orjson.dumps(_body(per_day)), provider="gem"), QuotaExhaustedError
    )
    assert (
        type(error_for_response(429, {}, orjson.dumps(_body(per_minute)), provider="gem")) is RateLimitError
    )
