"""The client for Gemini (AI Studio and Vertex AI): OpenAI-shaped requests in, OpenAI-shaped answers out.

AI Studio: `POST {base_url}/v1beta/models/{model}:generateContent` with `x-goog-api-key`
(https://ai.google.dev/api/generate-content). Vertex AI (`vertex: true`):
`POST {base_url}/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent`
with a bearer token from google-auth (`gemini_auth.VertexToken`). Embeddings go to
`:embedContent` (one text) or `:batchEmbedContents` (a list). Bodies are translated by
`gemini_translate` (a field Gemini cannot carry is a `BadRequestError` before anything is sent)
and answers by `gemini_answer`. Gemini sends no rate-limit headers: its limits (RPM, TPM, RPD per
model, https://ai.google.dev/gemini-api/docs/rate-limits) are declared in the config, and a 429
`RESOURCE_EXHAUSTED` carries its wait in `RetryInfo.retryDelay` (read by `classify`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import orjson

from batchgate.clock import Clock, LoopClock
from batchgate.config import ProviderConfig, Secret, TimeoutConfig
from batchgate.endpoints import CHAT, EMBEDDINGS, PATHS, endpoint_of, wire_body
from batchgate.errors import BadRequestError, UnsupportedField
from batchgate.models import ProviderResponse, RateLimitSnapshot, Usage
from batchgate.providers.classify import error_for_response, malformed
from batchgate.providers.gemini_answer import embeddings_to_openai, gemini_to_openai
from batchgate.providers.gemini_auth import VertexToken, api_key_headers
from batchgate.providers.gemini_translate import embedding_request, openai_to_gemini
from batchgate.providers.transport import ChatTransport, call
from batchgate.urls import joined


def model_path(config: ProviderConfig, model: str) -> str:
    """The path of `model` under the base URL: AI Studio's `v1beta/models/M` or Vertex AI's
    `v1/projects/P/locations/L/publishers/google/models/M`."""
    name = quote(model, safe="-._")
    if config.vertex is None:
        return f"v1beta/models/{name}"
    v = config.vertex
    return f"v1/projects/{v.project}/locations/{v.location}/publishers/google/models/{name}"


class GeminiClient:
    """Sends chat and embeddings requests to one Gemini provider (AI Studio or Vertex AI)."""

    kind = "gemini"

    def __init__(
        self,
        config: ProviderConfig,
        transport: ChatTransport,
        timeouts: TimeoutConfig,
        *,
        base_url: str | None = None,
        clock: Clock | None = None,
        token: VertexToken | None = None,
    ) -> None:
        self.name = config.name
        self._config = config
        self._clock: Clock = clock or LoopClock()
        self.base_url = (base_url or config.base_url).rstrip("/")
        self._transport = transport
        self._timeouts = timeouts
        self._api_key: Secret | None = config.secret
        self._headers = api_key_headers(config)
        self._token = token or (VertexToken(config.name, self._clock) if config.vertex is not None else None)

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        """Translate and send one chat or embeddings request for `model`; the answer in OpenAI's shape."""
        endpoint = endpoint_of(body)
        payload = wire_body(body)[1]  # without batchgate's own keys (an Anthropic line's params)
        try:
            if endpoint == CHAT:
                action, request = "generateContent", openai_to_gemini(payload)
            elif endpoint == EMBEDDINGS:
                action, request = embedding_request(payload, model)
            else:
                raise UnsupportedField("url", "gemini", f"{PATHS[endpoint]} is not served by Gemini")
        except UnsupportedField as exc:
            raise BadRequestError(f"{self.name}: {exc}", provider=self.name) from None
        url = joined(self.base_url, f"{model_path(self._config, model)}:{action}")
        parsed, status, headers = await self._post(url, request)
        created = int(self._clock.wall())
        try:
            if endpoint == CHAT:
                normalised = gemini_to_openai(parsed, model=model, created=created)
            else:
                base64 = body.get("encoding_format") == "base64"
                normalised = embeddings_to_openai(parsed, model=model, base64_floats=base64)
        except ValueError as exc:
            raise malformed(self.name, status, headers, b"", f"body is not a Gemini answer: {exc}") from None
        usage = normalised["usage"]
        cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
        return ProviderResponse(
            status=status,
            body=normalised,
            usage=Usage(usage["prompt_tokens"], usage.get("completion_tokens", 0), cached),
            headers=headers,
            request_id=headers.get("x-request-id"),
        )

    async def _post(
        self, url: str, request: Mapping[str, Any]
    ) -> tuple[dict[str, Any], int, Mapping[str, str]]:
        headers = self._headers
        if self._token is not None:
            headers = {**headers, "Authorization": await self._token.header()}
        status, answer_headers, raw = await call(
            self._transport,
            "POST",
            url,
            orjson.dumps(request),
            headers,
            self._timeouts,
            provider=self.name,
            api_key=self._api_key,
        )
        if not 200 <= status < 300:
            raise error_for_response(
                status, answer_headers, raw, provider=self.name, api_key=self._api_key, url=url
            )
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise malformed(self.name, status, answer_headers, raw, "body is not JSON") from None
        if not isinstance(parsed, dict):
            raise malformed(self.name, status, answer_headers, raw, "body is not a JSON object")
        return parsed, status, answer_headers

    def rate_limits(self, headers: Mapping[str, str], wall_now: float) -> RateLimitSnapshot:
        """Gemini sends no rate-limit headers: nothing to read."""
        return RateLimitSnapshot()

    def __repr__(self) -> str:
        return f"GeminiClient(name={self.name!r}, base_url={self.base_url!r})"
