"""The client for AWS Bedrock Runtime Converse: OpenAI-shaped requests in, OpenAI-shaped answers out.

`POST {base_url}/model/{modelId}/converse` (or `/converse-stream` with the entry's `stream: true`),
signed with SigV4 (`providers.bedrock_auth`), the body translated by
`providers.bedrock_translate` (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html,
shared/PROTOCOLS.md "AWS Bedrock"). Errors are named by the `x-amzn-ErrorType` header
(https://docs.aws.amazon.com/bedrock/latest/APIReference/CommonErrors.html and each action's
Errors section), read before the status:

    ThrottlingException (429)                          RateLimitError   (the rate path)
    ServiceUnavailableException (503),
      ModelNotReadyException (429)                     OverloadedError  (the overload path)
    ModelTimeoutException (408)                        RetryableStatusError
    InternalServerException (500), ModelErrorException ServerError
    AccessDeniedException (403),
      ResourceNotFoundException (404)                  ModelRefusedError (that model only)
    UnrecognizedClientException, InvalidSignature...   AuthenticationError
    ServiceQuotaExceededException                      QuotaExhaustedError
    ValidationException (400) and the rest             by status, as `classify.status_class`

Bedrock sends no rate-limit headers: the quota is the entry's `limits` and `models:` (per-model
RPM/TPM), learned further from its 429s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import orjson

from batchgate.clock import Clock, LoopClock
from batchgate.config import ProviderConfig, TimeoutConfig
from batchgate.endpoints import wire_body
from batchgate.errors import (
    AuthenticationError,
    BadRequestError,
    HTTPStatusError,
    ModelRefusedError,
    OverloadedError,
    QuotaExhaustedError,
    RateLimitError,
    RetryableStatusError,
    ServerError,
    UnsupportedField,
)
from batchgate.models import ProviderResponse, RateLimitSnapshot, Usage
from batchgate.providers.bedrock_answer import converse_to_openai
from batchgate.providers.bedrock_auth import SigV4Signer
from batchgate.providers.bedrock_stream import StreamFailure, read_stream
from batchgate.providers.bedrock_translate import openai_to_converse, output_tool
from batchgate.providers.classify import error_for_response, malformed, shorten
from batchgate.providers.transport import ChatTransport, call
from batchgate.urls import joined

ERROR_TYPE = "x-amzn-ErrorType"
REQUEST_ID = "x-amzn-RequestId"
ERROR_CLASSES: Mapping[str, type[HTTPStatusError]] = {
    "ThrottlingException": RateLimitError,
    "ServiceUnavailableException": OverloadedError,
    "ModelNotReadyException": OverloadedError,
    "ModelTimeoutException": RetryableStatusError,
    "InternalServerException": ServerError,
    "ModelErrorException": ServerError,
    "ModelStreamErrorException": ServerError,
    "AccessDeniedException": ModelRefusedError,
    "ResourceNotFoundException": ModelRefusedError,
    "UnrecognizedClientException": AuthenticationError,
    "InvalidSignatureException": AuthenticationError,
    "ExpiredTokenException": AuthenticationError,
    "MissingAuthenticationTokenException": AuthenticationError,
    "ServiceQuotaExceededException": QuotaExhaustedError,
    "ValidationException": BadRequestError,
}


def error_type(headers: Mapping[str, str], body: Any) -> str | None:
    """The AWS error type: the `x-amzn-ErrorType` header (before any `:`), else the body's `__type`."""
    value = headers.get(ERROR_TYPE) or headers.get(ERROR_TYPE.lower())
    if not value and isinstance(body, Mapping):
        value = body.get("__type")
    if not isinstance(value, str) or not value:
        return None
    return value.split(":", 1)[0].rsplit("#", 1)[-1]


def bedrock_error(
    status: int, headers: Mapping[str, str], raw: bytes, *, provider: str, url: str
) -> HTTPStatusError:
    """The error for a non-2xx Bedrock answer, classified by its error type, then by its status."""
    base = error_for_response(status, headers, raw, provider=provider, url=url)
    etype = error_type(base.headers, base.body)
    cls = ERROR_CLASSES.get(etype or "", type(base))
    message = str(base)
    if etype:
        message = message.replace(f"HTTP {status}", f"HTTP {status} {etype}", 1)
    return cls(message, provider=provider, status=status, headers=base.headers, body=base.body)


def stream_exception(
    provider: str, status: int, headers: Mapping[str, str], exc: StreamFailure, url: str
) -> HTTPStatusError:
    """The error an exception frame inside a 2xx ConverseStream means, by its type
    (`throttlingException`: a `RateLimitError`, as its status would say)."""
    etype = exc.error_type[:1].upper() + exc.error_type[1:]
    cls = ERROR_CLASSES.get(etype, ServerError)
    text = f"{provider}: {etype or 'an exception'} in the stream: {shorten(str(exc))} ({url})"
    return cls(text, provider=provider, status=status, headers=headers)


class BedrockClient:
    """Sends chat requests to one Bedrock Runtime provider (Converse or ConverseStream)."""

    kind = "bedrock"

    def __init__(
        self,
        config: ProviderConfig,
        transport: ChatTransport,
        timeouts: TimeoutConfig,
        *,
        base_url: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.name = config.name
        self.base_url = (base_url or config.base_url).rstrip("/")
        self._clock: Clock = clock or LoopClock()
        self._transport = transport
        self._timeouts = timeouts
        self._default_max_tokens = config.default_max_tokens
        self._stream = config.bedrock is not None and config.bedrock.stream
        self._signer = SigV4Signer(config, self.base_url)
        accept = "application/vnd.amazon.eventstream" if self._stream else "application/json"
        self._headers = {"Content-Type": "application/json", "Accept": accept, **config.extra_headers()}

    def url(self, model: str) -> str:
        """The Converse (or ConverseStream) URL of `model` (an id, a profile or an ARN): quoted but
        for `:`, which every HTTP client sends as is (aiohttp's URLs unquote `%3A`), so the path
        signed is the path sent."""
        action = "converse-stream" if self._stream else "converse"
        return joined(self.base_url, f"model/{quote(model, safe=':')}/{action}")

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        """Translate, sign and send one chat request for `model`; the answer as a chat.completion."""
        try:
            request = openai_to_converse(wire_body(body)[1], default_max_tokens=self._default_max_tokens)
        except UnsupportedField as exc:
            raise BadRequestError(f"{self.name}: {exc.key}: {exc.reason}", provider=self.name) from None
        url, data = self.url(model), orjson.dumps(request)
        headers = self._signer.sign("POST", url, data, self._headers)
        status, answer_headers, raw = await call(
            self._transport, "POST", url, data, headers, self._timeouts, provider=self.name, api_key=None
        )
        if not 200 <= status < 300:
            raise bedrock_error(status, answer_headers, raw, provider=self.name, url=url)
        parsed = self._parse(status, answer_headers, raw, url)
        rid = answer_headers.get(REQUEST_ID)
        try:
            created = int(self._clock.wall())
            forced = output_tool(body)
            normalised = converse_to_openai(
                parsed, model=model, created=created, rid=rid or "", output_tool=forced
            )
        except ValueError as exc:
            raise malformed(self.name, status, answer_headers, raw, f"not a Converse answer: {exc}") from None
        counts = normalised["usage"]
        cached = counts["prompt_tokens_details"]["cached_tokens"]
        return ProviderResponse(
            status=status,
            body=normalised,
            usage=Usage(counts["prompt_tokens"], counts["completion_tokens"], cached),
            headers=answer_headers,
            request_id=rid,
        )

    def _parse(self, status: int, headers: Mapping[str, str], raw: bytes, url: str) -> Any:
        """The Converse answer in a 2xx body: JSON, or a whole event stream put together."""
        if self._stream:
            try:
                return read_stream(raw)
            except StreamFailure as exc:
                raise stream_exception(self.name, status, headers, exc, url) from None
            except ValueError as exc:
                raise malformed(self.name, status, headers, raw, str(exc)) from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise malformed(self.name, status, headers, raw, "body is not JSON") from None

    def rate_limits(self, headers: Mapping[str, str], wall_now: float) -> RateLimitSnapshot:
        """Bedrock sends no rate-limit headers: nothing is learned from them."""
        return RateLimitSnapshot()

    def __repr__(self) -> str:
        return f"BedrockClient(name={self.name!r}, base_url={self.base_url!r})"
