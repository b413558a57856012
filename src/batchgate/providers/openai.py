"""The client for OpenAI-compatible servers (OpenAI, vLLM, Ollama, ...): one request per call.

`POST {base_url}/chat/completions` (or the body's endpoint: `/embeddings`, `/responses`,
`/completions`; a query in `base_url` stays after the path: `urls.joined`) with
`Authorization: Bearer KEY` (when a key is set) and the provider's extra headers. A 2xx counts
as a success only when its body is a JSON object of the endpoint's shape with its integer usage
(chat: a `choices` list, `prompt_tokens` and `completion_tokens`; embeddings: a `data` list and
`prompt_tokens`; responses: `input_tokens` and `output_tokens`);
anything else — truncated, not JSON, HTML, no usage — is a `MalformedResponse`. Error statuses are
classified by `batchgate.providers.classify`, their message ending with the URL (keys hidden).
Azure OpenAI is this client with its URLs and key header (`batchgate.providers.azure`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from batchgate import messages_in
from batchgate.config import ProviderConfig, Secret, TimeoutConfig
from batchgate.endpoints import (
    CHAT,
    COMPLETIONS,
    EMBEDDINGS,
    MESSAGES_PARAMS,
    RESPONSES,
    endpoint_of,
    wire_body,
)
from batchgate.errors import BadRequestError
from batchgate.models import ProviderResponse, RateLimitSnapshot, Usage
from batchgate.providers.classify import error_for_response, malformed
from batchgate.providers.ratelimit_headers import parse_openai_rate_limits
from batchgate.providers.transport import ChatTransport, call
from batchgate.urls import joined


def usage_from_openai(body: Any) -> Usage | None:
    """The usage of an OpenAI chat.completion body, or None when it is not one."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        return None
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    if type(prompt) is not int or type(completion) is not int or prompt < 0 or completion < 0:
        return None
    cached = 0
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        value = details.get("cached_tokens")
        if type(value) is int and value >= 0:
            cached = value
    return Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)


def usage_from_embeddings(body: Any) -> Usage | None:
    """The usage of an embeddings `list` body (input tokens only), or None when it is not one."""
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        return None
    usage = body.get("usage")
    prompt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if type(prompt) is not int or prompt < 0:
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=0)


def usage_from_response(body: Any) -> Usage | None:
    """The usage of a Responses API `response` body, or None when it is not one."""
    if not isinstance(body, dict) or body.get("object") != "response":
        return None
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return None
    given = usage.get("input_tokens")
    made = usage.get("output_tokens")
    if type(given) is not int or type(made) is not int or given < 0 or made < 0:
        return None
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    return Usage(given, made, cached if type(cached) is int and cached >= 0 else 0)


_USAGE = {
    CHAT: (usage_from_openai, "a chat.completion"),
    COMPLETIONS: (usage_from_openai, "a text_completion"),  # the same choices and usage fields
    EMBEDDINGS: (usage_from_embeddings, "an embeddings list"),
    RESPONSES: (usage_from_response, "a response"),
}


def usage_of_answer(body: Any) -> Usage | None:
    """The usage of an answer of any OpenAI endpoint, read by its shape (a Batch API result line
    does not say which endpoint answered it); None when it is none of them."""
    for read in (usage_from_openai, usage_from_embeddings, usage_from_response):
        usage = read(body)
        if usage is not None:
            return usage
    return None


def openai_headers(config: ProviderConfig, base: Mapping[str, str]) -> dict[str, str]:
    """The headers of every OpenAI-family call (chat and Batch API): `base`, the provider's own
    headers, and, when a key is set, `Authorization: Bearer KEY` (Azure: `api-key: KEY`)."""
    headers = {**base, **config.extra_headers()}
    key = config.api_key.reveal() if config.api_key is not None else ""
    if key and config.kind == "azure":
        headers["api-key"] = key
    elif key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


class OpenAIClient:
    """Sends OpenAI Chat Completions requests to one OpenAI-compatible provider."""

    kind = "openai"

    def __init__(
        self,
        config: ProviderConfig,
        transport: ChatTransport,
        timeouts: TimeoutConfig,
        *,
        base_url: str | None = None,
    ) -> None:
        self.name = config.name
        self.base_url = (base_url or config.base_url).rstrip("/")
        self._transport = transport
        self._timeouts = timeouts
        self._api_key: Secret | None = config.secret
        self._headers = openai_headers(
            config, {"Content-Type": "application/json", "Accept": "application/json"}
        )
        self._urls: dict[tuple[str, str, str], str] = {}  # (base URL, path, model) -> `url`'s answer

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        """Send one chat request for `model`; the response, or a `ProviderError`."""
        if body.get("stream"):
            raise BadRequestError(f"{self.name}: streaming requests are not supported", provider=self.name)
        params = body.get(MESSAGES_PARAMS)  # an Anthropic-shaped request: sent as its translation
        if params is not None and (found := messages_in.refusal(params, self.kind)) is not None:
            raise BadRequestError(f"{self.name}: {found.message}", provider=self.name)
        endpoint = endpoint_of(body)
        path, payload = wire_body(body)
        payload["model"] = self.wire_model(model)
        where = (self.base_url, path, model)  # `url` parses the base URL: once per model and path
        url = self._urls.get(where) or self._urls.setdefault(where, self.url(path, model))
        status, headers, raw = await call(
            self._transport,
            "POST",
            url,
            orjson.dumps(payload),
            self._headers,
            self._timeouts,
            provider=self.name,
            api_key=self._api_key,
        )
        if not 200 <= status < 300:
            raise error_for_response(status, headers, raw, provider=self.name, api_key=self._api_key, url=url)
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise malformed(self.name, status, headers, raw, "body is not JSON") from None
        read_usage, shape = _USAGE[endpoint]
        usage = read_usage(parsed)
        if usage is None:
            raise malformed(self.name, status, headers, raw, f"body is not {shape} with usage")
        return ProviderResponse(
            status=status, body=parsed, usage=usage, headers=headers, request_id=headers.get("x-request-id")
        )

    def url(self, path: str, model: str) -> str:
        """Where a request of endpoint `path` (`chat/completions`) for `model` goes: the base URL
        with the path appended, its query kept after it."""
        return joined(self.base_url, path)

    def wire_model(self, model: str) -> str:
        """The `model` a body sends (Azure: the deployment)."""
        return model

    def rate_limits(self, headers: Mapping[str, str], wall_now: float) -> RateLimitSnapshot:
        """What the `x-ratelimit-*` headers of a response said (`wall_now` is unused here)."""
        return parse_openai_rate_limits(headers)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"
