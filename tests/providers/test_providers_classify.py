"""Failure classification: by status and structured fields only, messages scrubbed of the key."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest

from batchgate.config import Secret
from batchgate.errors import (
    AuthenticationError,
    BadRequestError,
    ConnectError,
    HTTPStatusError,
    MalformedResponse,
    ModelRefusedError,
    OverloadedError,
    QuotaExhaustedError,
    RateLimitError,
    RequestTimeout,
    RetryableStatusError,
    ServerError,
    UnreachableError,
)
from batchgate.providers.classify import error_for_exception, error_for_response

KEY = "sk-test-0123456789abcdef"


def openai_error(message: str = "boom", etype: str | None = None, code: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": etype, "param": None, "code": code}})


def anthropic_error(etype: str, message: str = "boom") -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": etype, "message": message}})


def classify(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> HTTPStatusError:
    return error_for_response(status, headers or {}, body, provider="alpha", api_key=Secret(KEY))


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (402, QuotaExhaustedError),
        (403, AuthenticationError),
        (404, BadRequestError),
        (408, RetryableStatusError),
        (409, RetryableStatusError),
        (413, BadRequestError),
        (422, BadRequestError),
        (429, RateLimitError),
        (500, ServerError),
        (502, ServerError),
        (503, ServerError),
        (504, ServerError),
        (529, OverloadedError),
        (301, BadRequestError),
    ],
)
def test_status_alone_decides_the_class(status: int, cls: type[HTTPStatusError]) -> None:
    for body in (b"", b"<html>oops</html>", openai_error()):
        err = classify(status, body)
        assert type(err) is cls
        assert err.status == status
        assert err.provider == "alpha"


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (429, openai_error(code="insufficient_quota", etype="insufficient_quota"), QuotaExhaustedError),
        (429, openai_error(code="insufficient_quota"), QuotaExhaustedError),
        (429, openai_error(etype="insufficient_quota"), QuotaExhaustedError),
        (429, openai_error(code="rate_limit_exceeded", etype="requests"), RateLimitError),
        (400, anthropic_error("billing_error"), QuotaExhaustedError),
        (402, anthropic_error("billing_error"), QuotaExhaustedError),
        (429, anthropic_error("rate_limit_error"), RateLimitError),
        (529, anthropic_error("overloaded_error"), OverloadedError),
        (503, anthropic_error("overloaded_error"), OverloadedError),
        (500, anthropic_error("api_error"), ServerError),
        (401, anthropic_error("authentication_error"), AuthenticationError),
        (400, anthropic_error("invalid_request_error"), BadRequestError),
        # a key without access to one model: that model only (the emulator's `refused_models`)
        (403, openai_error(etype="invalid_request_error", code="model_not_found"), ModelRefusedError),
        (404, openai_error(etype="invalid_request_error", code="model_not_found"), ModelRefusedError),
        (401, openai_error(etype="invalid_request_error", code="invalid_api_key"), AuthenticationError),
        (403, openai_error(code="unsupported_country_region_territory"), AuthenticationError),
        (400, openai_error(code="model_not_found"), BadRequestError),
    ],
)
def test_structured_fields_refine_the_class(status: int, body: bytes, cls: type[HTTPStatusError]) -> None:
    assert type(classify(status, body)) is cls


@pytest.mark.parametrize("status", [400, 429, 500, 529])
def test_message_text_alone_never_changes_the_class(status: int) -> None:
    plain = type(classify(status, openai_error("nothing special")))
    for text in (
        "You exceeded your current quota: insufficient_quota",
        "billing_error overloaded_error",
        "rate limit reached, 429",
        "invalid api key",
    ):
        assert type(classify(status, openai_error(text))) is plain
        assert type(classify(status, text.encode())) is plain


def test_insufficient_quota_only_counts_on_429() -> None:
    assert type(classify(400, openai_error(code="insufficient_quota"))) is BadRequestError


def test_message_names_provider_status_type_and_provider_message() -> None:
    body = openai_error("Rate limit reached for gpt-4o", etype="requests", code="rate_limit_exceeded")
    err = classify(429, body)
    assert err.message == "alpha: HTTP 429 requests/rate_limit_exceeded: Rate limit reached for gpt-4o"


def test_long_provider_messages_are_truncated_to_one_line() -> None:
    err = classify(500, openai_error("x\n" * 1000))
    assert len(err.message) < 400
    assert "\n" not in err.message


def test_non_json_bodies_are_kept_as_text() -> None:
    err = classify(502, b"<html><body>Bad gateway</body></html>")
    assert err.body == "<html><body>Bad gateway</body></html>"
    assert "Bad gateway" in err.message


def test_headers_and_parsed_body_are_kept() -> None:
    headers = {"retry-after-ms": "250", "x-should-retry": "true"}
    err = classify(429, openai_error("slow down"), headers)
    assert err.headers["retry-after-ms"] == "250"
    assert isinstance(err.body, dict)
    assert err.body["error"]["message"] == "slow down"


def test_api_key_is_scrubbed_from_message_body_and_headers() -> None:
    err = classify(401, openai_error(f"Incorrect API key provided: {KEY}."), {"x-echo": f"Bearer {KEY}"})
    assert KEY not in err.message
    assert "***" in err.message
    assert KEY not in repr(err.body)
    assert KEY not in repr(dict(err.headers))
    assert KEY not in repr(err)


def test_api_key_is_scrubbed_from_text_bodies() -> None:
    err = classify(500, f"crash while handling key={KEY}".encode())
    assert KEY not in err.message
    assert KEY not in str(err.body)


def test_error_strings_in_other_shapes() -> None:
    assert classify(500, b'{"error": "model crashed"}').message == "alpha: HTTP 500: model crashed"
    assert classify(400, b'{"detail": "bad field"}').message == "alpha: HTTP 400: bad field"
    assert classify(400, b"[1, 2]").message == "alpha: HTTP 400"


def exceptions() -> list[tuple[BaseException, type[Exception]]]:
    key = aiohttp.client_reqrep.ConnectionKey("h", 1, False, True, None, None, None)
    return [
        (TimeoutError("read"), RequestTimeout),
        (aiohttp.ServerTimeoutError("Timeout on reading data from socket"), RequestTimeout),
        (aiohttp.ConnectionTimeoutError("connect"), RequestTimeout),
        (aiohttp.ClientConnectorError(key, OSError(111, "Connection refused")), UnreachableError),
        (aiohttp.ServerDisconnectedError(), ConnectError),
        (aiohttp.ClientOSError(104, "Connection reset by peer"), ConnectError),
        (ConnectionResetError(104, "reset"), ConnectError),
        (aiohttp.ClientPayloadError("Response payload is not completed"), MalformedResponse),
    ]


@pytest.mark.parametrize(("exc", "cls"), exceptions())
def test_transport_exceptions(exc: BaseException, cls: type[Exception]) -> None:
    err = error_for_exception(exc, provider="alpha", api_key=Secret(KEY))
    assert type(err) is cls
    assert err.provider == "alpha"
    assert err.message.startswith("alpha: ")
    assert type(exc).__name__ in err.message


def test_transport_messages_are_scrubbed() -> None:
    exc = aiohttp.ClientOSError(1, f"weird failure mentioning {KEY}")
    err = error_for_exception(exc, provider="alpha", api_key=Secret(KEY))
    assert KEY not in err.message


def test_no_key_means_nothing_to_scrub() -> None:
    err: Any = error_for_response(401, {}, openai_error("denied"), provider="p")
    assert err.message == "p: HTTP 401: denied"
