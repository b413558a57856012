"""The client for Anthropic Messages: OpenAI-shaped requests in, OpenAI-shaped responses out.

`POST {base_url}/v1/messages` with `x-api-key` and `anthropic-version: 2023-06-01`. A chat body is
translated by `batchgate.providers.translate.openai_to_anthropic` and answered as a
`chat.completion` body; a Responses body by `responses_translate.responses_to_anthropic` and
answered as a `response` body. A body that cannot be translated (embeddings, completions, a field
Messages cannot express) fails with `BadRequestError` before anything is sent; a 2xx that is not
a Messages response with integer usage is a `MalformedResponse`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from batchgate.clock import Clock, LoopClock
from batchgate.config import ProviderConfig, Secret, TimeoutConfig
from batchgate.endpoints import RESPONSES, endpoint_of
from batchgate.models import ProviderResponse, RateLimitSnapshot, Usage
from batchgate.providers.classify import error_for_response, malformed
from batchgate.providers.ratelimit_headers import parse_anthropic_rate_limits
from batchgate.providers.responses_translate import anthropic_to_response, responses_to_anthropic
from batchgate.providers.translate import anthropic_to_openai, openai_to_anthropic
from batchgate.providers.transport import ChatTransport, call
from batchgate.urls import joined

_TRANSLATE = {RESPONSES: (responses_to_anthropic, anthropic_to_response)}

ANTHROPIC_VERSION = "2023-06-01"


def anthropic_headers(config: ProviderConfig, base: Mapping[str, str]) -> dict[str, str]:
    """The headers of every Anthropic call (Messages and Message Batches): `base`, the API version,
    the provider's own headers, and `x-api-key` when a key is set."""
    headers = {**base, "anthropic-version": ANTHROPIC_VERSION, **config.extra_headers()}
    if config.api_key is not None and config.api_key.reveal():
        headers["x-api-key"] = config.api_key.reveal()
    return headers


class AnthropicClient:
    """Sends chat requests to one Anthropic Messages provider."""

    kind = "anthropic"

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
        self._clock: Clock = clock or LoopClock()
        self.base_url = (base_url or config.base_url).rstrip("/")
        self._url = joined(self.base_url, "v1/messages")
        self._transport = transport
        self._timeouts = timeouts
        self._default_max_tokens = config.default_max_tokens
        self._api_key: Secret | None = config.secret
        self._headers = anthropic_headers(
            config, {"Content-Type": "application/json", "Accept": "application/json"}
        )

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        """Translate and send one chat or Responses request for `model`; the answer in its shape."""
        to_messages, from_messages = _TRANSLATE.get(
            endpoint_of(body), (openai_to_anthropic, anthropic_to_openai)
        )
        request = to_messages(
            body, model=model, default_max_tokens=self._default_max_tokens, provider=self.name
        )
        status, headers, raw = await call(
            self._transport,
            "POST",
            self._url,
            orjson.dumps(request),
            self._headers,
            self._timeouts,
            provider=self.name,
            api_key=self._api_key,
        )
        if not 200 <= status < 300:
            raise error_for_response(
                status, headers, raw, provider=self.name, api_key=self._api_key, url=self._url
            )
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise malformed(self.name, status, headers, raw, "body is not JSON") from None
        if not isinstance(parsed, dict):
            raise malformed(self.name, status, headers, raw, "body is not a JSON object")
        try:
            normalised = from_messages(parsed, model=model, created=int(self._clock.wall()))
        except ValueError as exc:
            reason = f"body is not a Messages response: {exc}"
            raise malformed(self.name, status, headers, raw, reason) from None
        return ProviderResponse(
            status=status,
            body=normalised,
            usage=_usage(normalised["usage"]),
            headers=headers,
            request_id=headers.get("request-id"),
        )

    def rate_limits(self, headers: Mapping[str, str], wall_now: float) -> RateLimitSnapshot:
        """What the `anthropic-ratelimit-*` headers said; resets in seconds from `wall_now`."""
        return parse_anthropic_rate_limits(headers, wall_now)

    def __repr__(self) -> str:
        return f"AnthropicClient(name={self.name!r}, base_url={self.base_url!r})"


def _usage(usage: Mapping[str, Any]) -> Usage:
    """A translated answer's usage (chat's or Responses' field names)."""
    if "input_tokens" in usage:
        return Usage(
            usage["input_tokens"], usage["output_tokens"], usage["input_tokens_details"]["cached_tokens"]
        )
    return Usage(
        usage["prompt_tokens"], usage["completion_tokens"], usage["prompt_tokens_details"]["cached_tokens"]
    )
