"""Turning every way a provider call can fail into one of batchgate's error types (pure).

Classification reads the HTTP status and the structured fields of the error body (`error.type`,
`error.code`) and the exception's type — never the text of a message. Messages are built for
people: they name the provider and the status, carry the provider's own message cut to ~300
characters, and are scrubbed of the API key.

Status answers (`error_for_response`):

    429 + error.code/type "insufficient_quota"      QuotaExhaustedError   (OpenAI)
    402, or error.type "billing_error"              QuotaExhaustedError   (Anthropic)
    429 + a QuotaFailure quotaId "...PerDay..."     QuotaExhaustedError   (Gemini's RPD)
    429                                             RateLimitError
    529, or error.type "overloaded_error"           OverloadedError
    408, 409                                        RetryableStatusError
    >= 500                                          ServerError
    403, 404 + error.code "model_not_found"         ModelRefusedError     (that model only)
    404 + error.code "DeploymentNotFound"           ModelRefusedError     (Azure: that deployment)
    401, 403; 400 + ErrorInfo API_KEY_INVALID       AuthenticationError   (Gemini: a refused key)
    anything else (other 4xx, a 3xx redirect)       BadRequestError

A Google error body's `RetryInfo.retryDelay` (Gemini's 429) is kept as a `retry-after-ms` header
of the error, the one form every retry path reads (`google_rpc`).

Transport failures (`error_for_exception`):

    TimeoutError (asyncio's, aiohttp's ServerTimeoutError)            RequestTimeout
    the body broke off mid-way (ClientPayloadError, H1BodyBroken)     MalformedResponse
    a head or body (decompressed) past the bound (H1TooLarge)         AnswerTooLarge
    a status or header line that is not HTTP/1.x (H1GarbledHead)      GarbledHead
    a garbled HTTP answer (ClientResponseError, H1ProtocolError)      MalformedResponse
    a certificate not trusted, a failed handshake (ClientSSLError,
      H1TLSError)                                                     TLSError (kind "tls")
    refused or unresolvable (ClientConnectorError, H1ConnectError),
      a proxy refusing the tunnel (H1ProxyError)                      UnreachableError
    any other connection error (reset, dropped, OSError)              ConnectError

(aiohttp's types for the Batch API calls, the lean client's `batchgate.providers.h1` for chat.)

The two `UnusableAnswer`s (too large, garbled head) can never succeed as sent: the retry policy
tries them at most twice. A body that breaks off mid-way is a MalformedResponse rather than a
ConnectError: the provider did answer (the status line arrived), so the request was admitted and
may have been charged; both are retryable TransportErrors, the distinction only informs reports.
"""

from __future__ import annotations

import ssl
import sys
from collections.abc import Mapping
from typing import Any

import orjson
from multidict import CIMultiDict

from batchgate.config import Secret
from batchgate.errors import (
    AnswerTooLarge,
    AuthenticationError,
    BadRequestError,
    ConnectError,
    GarbledHead,
    HTTPStatusError,
    MalformedResponse,
    ModelRefusedError,
    OverloadedError,
    QuotaExhaustedError,
    RateLimitError,
    RequestTimeout,
    RetryableStatusError,
    ServerError,
    TLSError,
    TransportError,
    UnreachableError,
)
from batchgate.providers.google_rpc import api_key_invalid, daily_quota_exhausted, retry_headers
from batchgate.providers.h1.errors import (
    ForeignHTTPError,
    H1BodyBroken,
    H1ConnectError,
    H1DNSError,
    H1GarbledHead,
    H1ProtocolError,
    H1ProxyError,
    H1TLSError,
    H1TooLarge,
)
from batchgate.urls import shown

MESSAGE_LIMIT = 300
_REDACTED = "***"
_QUOTA_CODES = frozenset({"insufficient_quota"})
_MODEL_CODES = frozenset({"model_not_found", "DeploymentNotFound"})  # OpenAI's, Azure's


def scrub(text: str, api_key: Secret | None) -> str:
    """`text` with every occurrence of the API key replaced."""
    if api_key is None:
        return text
    key = api_key.reveal()
    if key and key in text:
        return text.replace(key, _REDACTED)
    return text


def shorten(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """One line of at most `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_fields(body: Any) -> tuple[str | None, str | None, str | None]:
    """(type, code, message) of an OpenAI, Anthropic or Google error body (Google's `status`,
    RESOURCE_EXHAUSTED, as the type); None where absent."""
    if not isinstance(body, Mapping):
        return None, None, None
    error = body.get("error")
    if isinstance(error, str):  # some OpenAI-compatible servers send {"error": "text"}
        return None, None, error
    if not isinstance(error, Mapping):
        message = body.get("message") or body.get("detail")
        return None, None, message if isinstance(message, str) else None
    etype, code, message = error.get("type") or error.get("status"), error.get("code"), error.get("message")
    return (
        etype if isinstance(etype, str) else None,
        code if isinstance(code, str) else None,
        message if isinstance(message, str) else None,
    )


def status_class(status: int, etype: str | None, code: str | None) -> type[HTTPStatusError]:
    """The error class for an error status and its structured fields."""
    if status == 429 and (code in _QUOTA_CODES or etype in _QUOTA_CODES):
        return QuotaExhaustedError
    if status == 402 or etype == "billing_error":
        return QuotaExhaustedError
    if status == 429:
        return RateLimitError
    if status == 529 or etype == "overloaded_error":
        return OverloadedError
    if status in (408, 409):
        return RetryableStatusError
    if status >= 500:
        return ServerError
    if status in (403, 404) and code in _MODEL_CODES:  # the key may not use this one model
        return ModelRefusedError
    if status in (401, 403):
        return AuthenticationError
    return BadRequestError


def error_for_response(
    status: int,
    headers: Mapping[str, str],
    body_bytes: bytes,
    *,
    provider: str,
    api_key: Secret | None = None,
    url: str | None = None,
) -> HTTPStatusError:
    """The error for a non-2xx answer; keeps `headers` (retry hints) and the parsed body. `url`, the
    address the request went to, ends the message as `urls.shown` shows it (keys in it hidden)."""
    key = api_key.reveal() if api_key is not None else ""
    if key:
        secret = key.encode()
        if secret in body_bytes:
            body_bytes = body_bytes.replace(secret, _REDACTED.encode())
        if any(key in v for v in headers.values()):
            headers = CIMultiDict((k, v.replace(key, _REDACTED)) for k, v in headers.items())
    body: Any
    try:
        body = orjson.loads(body_bytes) if body_bytes else None
    except orjson.JSONDecodeError:
        body = body_bytes[:1000].decode("utf-8", "replace")
    if hint := retry_headers(body):  # Gemini's 429: RetryInfo.retryDelay in the body (google_rpc)
        headers = CIMultiDict({**headers, **hint})
    etype, code, detail = error_fields(body)
    if detail is None and isinstance(body, str):
        detail = body
    label = "/".join(x for x in (etype, code) if x)
    parts = [f"{provider}: HTTP {status}"]
    if label:
        parts.append(f" {label}")
    if detail:
        parts.append(f": {shorten(scrub(detail, api_key))}")
    if url is not None:
        parts.append(f" ({scrub(shown(url), api_key)})")
    cls = status_class(status, etype, code)
    if api_key_invalid(body):  # Google's 400 for a refused key
        cls = AuthenticationError
    elif status == 429 and daily_quota_exhausted(body):  # Gemini's requests per day: until tomorrow
        cls = QuotaExhaustedError
    return cls("".join(parts), provider=provider, status=status, headers=headers, body=body)


def error_for_exception(
    exc: BaseException, *, provider: str, api_key: Secret | None = None
) -> TransportError:
    """The error for an exception raised while sending or reading; never includes the API key."""
    if isinstance(exc, ForeignHTTPError):
        exc = exc.original
    broken, garbled, unconnected, _ = _aiohttp_types()
    if isinstance(exc, H1TLSError) or _aiohttp_tls(exc):
        return _tls_error(exc, provider)
    refusal = _aiohttp_proxy_refusal(exc)
    if refusal is not None:
        return UnreachableError(f"{provider}: unreachable ({refusal})", provider=provider, cause=refusal)
    cls: type[TransportError]
    if isinstance(exc, TimeoutError):  # asyncio.TimeoutError and aiohttp's ServerTimeoutError
        cls, what = RequestTimeout, "timed out"
    elif isinstance(exc, (H1BodyBroken, *broken)):
        cls, what = MalformedResponse, "response body broke off"
    elif isinstance(exc, H1TooLarge):
        cls, what = AnswerTooLarge, "answer too large"
    elif isinstance(exc, H1GarbledHead):
        cls, what = GarbledHead, "invalid HTTP response"
    elif isinstance(exc, (H1ProtocolError, *garbled)):
        cls, what = MalformedResponse, "invalid HTTP response"
    elif isinstance(exc, (H1ConnectError, *unconnected)):  # refused, DNS: the request never left
        cls, what = UnreachableError, "unreachable"
    else:
        cls, what = ConnectError, "connection failed"
    detail = str(exc)
    text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    message = f"{provider}: {what} ({shorten(scrub(text, api_key))})"
    if cls is UnreachableError:
        return UnreachableError(message, provider=provider, cause=_unreachable_cause(exc))
    return cls(message, provider=provider)


def _unreachable_cause(exc: BaseException) -> str:
    """Refused or unresolvable, told apart by the exception's type (never by its text)."""
    if isinstance(exc, H1ProxyError):
        return str(exc)  # names the proxy (never its credentials) and its answer
    if isinstance(exc, (H1DNSError, *_aiohttp_types()[3])):
        return "DNS failure"
    os_error = getattr(exc, "os_error", None)
    if isinstance(os_error, ConnectionRefusedError):
        return "connection refused"
    return "unreachable"


TLS_HINT = "give the CA that signs it as ca_bundle: in the provider's entry, or SSL_CERT_FILE"


def _tls_error(exc: BaseException, provider: str) -> TLSError:
    """The certificate problem and the host, and (a verification failure) where a CA is given."""
    if isinstance(exc, H1TLSError):
        problem, host, verify = exc.problem, exc.host, exc.verify
    else:  # aiohttp's ClientSSLError: its connection key holds the host, its cause the ssl error
        key = getattr(exc, "_conn_key", None)
        host = f"{key.host}:{key.port}" if key is not None else "the server"
        cause = getattr(exc, "certificate_error", None) or getattr(exc, "os_error", None) or exc
        verify = isinstance(cause, ssl.SSLCertVerificationError)
        reason = getattr(cause, "reason", None) or type(cause).__name__
        problem = f"{reason}: {cause.verify_message}" if verify else str(reason)  # type: ignore[union-attr]
    what = f"TLS: {problem} ({host})"
    hint = f"; {TLS_HINT}" if verify else ""
    return TLSError(f"{provider}: {what}{hint}", provider=provider, cause=f"{what}{hint}")


def _aiohttp_proxy_refusal(exc: BaseException) -> str | None:
    """aiohttp's `ClientHttpProxyError` (the proxy answered CONNECT with an error) in the words
    the lean client uses (`H1ProxyError`); the proxy URL it names holds no credentials (they go
    apart, as `proxy_auth`)."""
    if "aiohttp" not in sys.modules:
        return None
    import aiohttp  # noqa: PLC0415 — already loaded by whatever raised

    if not isinstance(exc, aiohttp.ClientHttpProxyError):
        return None
    url = exc.request_info.real_url
    proxy = f"{url.scheme}://{url.host}:{url.port}"
    hint = " (proxy credentials missing or refused)" if exc.status == 407 else ""
    return f"the proxy {proxy} refused CONNECT: HTTP {exc.status} {exc.message}{hint}"


def _aiohttp_tls(exc: BaseException) -> bool:
    if "aiohttp" not in sys.modules:
        return False
    import aiohttp  # noqa: PLC0415 — already loaded by whatever raised

    return isinstance(exc, aiohttp.ClientSSLError)


_NONE: tuple[type[BaseException], ...] = ()


def _aiohttp_types() -> tuple[tuple[type[BaseException], ...], ...]:
    """aiohttp's exception types for a broken body, a garbled answer, no connection and a failed
    lookup — none while aiohttp is not loaded (then no exception can be one of them), so the
    chat path, which does not use it, never pays its ~0.2 s import."""
    if "aiohttp" not in sys.modules:
        return _NONE, _NONE, _NONE, _NONE
    import aiohttp  # noqa: PLC0415 — start-up cost: already loaded by whatever raised

    return (
        (aiohttp.ClientPayloadError,),
        (aiohttp.ClientResponseError,),
        (aiohttp.ClientConnectorError,),
        (aiohttp.ClientConnectorDNSError,),
    )


def malformed(
    provider: str,
    status: int,
    headers: Mapping[str, str],
    body_bytes: bytes,
    reason: str,
) -> MalformedResponse:
    """A 2xx answer that cannot be used: `reason` says why (not JSON, no usage, ...)."""
    ctype = headers.get("content-type") or headers.get("Content-Type") or "no content-type"
    return MalformedResponse(
        f"{provider}: HTTP {status} {reason} ({ctype}, {len(body_bytes)} bytes)",
        provider=provider,
        status=status,
        headers=headers,
        body=None,
    )
