"""The Anthropic Messages wire format: request validation (max_tokens required, system top-level,
roles alternating from user, `anthropic-version` header), bodies, and `anthropic-ratelimit-*` headers
with RFC 3339 resets.

Anthropic counts tokens with its own tokenizer, which the gateway cannot run; the emulator plays it
with a deliberately different count — ceil(UTF-8 bytes / 3.5) plus 3 per message (the system prompt
counting as one) — so a gateway must learn the real figure from `usage`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from batchgate.emulator.config import ProviderConfig
from batchgate.emulator.content import content_text, last_user_text
from batchgate.emulator.limiter import DimensionState, RequestCost
from batchgate.emulator.wire import ApiError, Family, ParsedRequest, rfc3339

BYTES_PER_TOKEN = 3.5
TOKENS_PER_MESSAGE = 3
_HEADER_NAMES = {
    "requests": "requests",
    "tokens": "tokens",
    "input_tokens": "input-tokens",
    "output_tokens": "output-tokens",
}
_DIM_WORDS = {
    "requests": "requests",
    "tokens": "tokens",
    "input_tokens": "input tokens",
    "output_tokens": "output tokens",
}


def count_text(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN) if text else 0


def count_input(body: Mapping[str, Any]) -> int:
    """Input tokens of a valid Messages body, as this emulated provider counts them."""
    messages: list[Any] = body["messages"]
    size = sum(len(content_text(m.get("content")).encode("utf-8")) for m in messages)
    framing = TOKENS_PER_MESSAGE * len(messages)
    system = body.get("system")
    if system:
        size += len(content_text(system).encode("utf-8"))
        framing += TOKENS_PER_MESSAGE
    return math.ceil(size / BYTES_PER_TOKEN) + framing


def _invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_request_error", message)


class AnthropicFamily(Family):
    name = "anthropic"
    path = "/v1/messages"
    request_id_header = "request-id"
    id_prefix = "msg_"

    def authenticate(self, headers: Mapping[str, str], api_key: str | None) -> None:
        if api_key is not None:
            given = headers.get("x-api-key")
            if given is None:
                auth = headers.get("Authorization", "")
                given = auth[7:] if auth.startswith("Bearer ") else None
            if given is None:
                raise ApiError(401, "authentication_error", "x-api-key header is required", reason="auth")
            if given != api_key:
                raise ApiError(401, "authentication_error", "invalid x-api-key", reason="auth")
        if not headers.get("anthropic-version"):
            raise _invalid("anthropic-version: header is required")

    def parse(self, body: Any, provider: ProviderConfig) -> ParsedRequest:
        if not isinstance(body, dict):
            raise _invalid("Input should be a valid dictionary")
        model = body.get("model")
        if model is None:
            raise _invalid("model: Field required")
        if not isinstance(model, str):
            raise _invalid("model: Input should be a valid string")
        max_tokens = body.get("max_tokens")
        if max_tokens is None:
            raise _invalid("max_tokens: Field required")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise _invalid("max_tokens: Input should be a valid integer")
        if max_tokens < 1:
            raise _invalid("max_tokens: Input should be greater than or equal to 1")
        messages = body.get("messages")
        if messages is None:
            raise _invalid("messages: Field required")
        if not isinstance(messages, list):
            raise _invalid("messages: Input should be a valid list")
        if not messages:
            raise _invalid("messages: at least one message is required")
        self._check_messages(messages)
        system = body.get("system")
        if system is not None and not isinstance(system, str | list):
            raise _invalid("system: Input should be a valid string or a list of text blocks")
        if provider.models is not None and model not in provider.models:
            raise self.unknown_model(model)
        input_tokens = count_input(body)
        prompt = last_user_text(messages)
        return ParsedRequest(
            model=model,
            prompt=prompt,
            max_tokens=max_tokens,
            n=1,
            prompt_tokens=input_tokens,
            cost=RequestCost(
                tokens=input_tokens + max_tokens, input_tokens=input_tokens, output_tokens=max_tokens
            ),
            fingerprint=hash(prompt),
        )

    @staticmethod
    def _check_messages(messages: list[Any]) -> None:
        previous = None
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                raise _invalid(f"messages.{i}: Input should be a valid dictionary")
            role = message.get("role")
            if role is None:
                raise _invalid(f"messages.{i}.role: Field required")
            if role not in ("user", "assistant"):
                raise _invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
            if i == 0 and role != "user":
                raise _invalid('messages: first message must use the "user" role')
            if role == previous:
                raise _invalid(
                    f'messages: roles must alternate between "user" and "assistant", '
                    f'but found multiple "{role}" roles in a row'
                )
            previous = role
            if "content" not in message:
                raise _invalid(f"messages.{i}.content: Field required")
            content = message["content"]
            if not isinstance(content, str | list):
                raise _invalid(f"messages.{i}.content: Input should be a valid string or list")
            last_assistant = i == len(messages) - 1 and role == "assistant"
            if not content and not last_assistant:
                raise _invalid(
                    f"messages.{i}: all messages must have non-empty content "
                    "except for the optional final assistant message"
                )

    def count_text(self, text: str) -> int:
        return count_text(text)

    def success_body(
        self, req: ParsedRequest, text: str, tokens: int, cut: bool, body_id: str, wall: float
    ) -> bytes:
        return orjson.dumps(
            {
                "id": body_id,
                "type": "message",
                "role": "assistant",
                "model": req.model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "max_tokens" if cut else "end_turn",
                "stop_sequence": None,
                "usage": {
                    "input_tokens": req.prompt_tokens,
                    "output_tokens": tokens,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            }
        )

    def error_body(self, err: ApiError, rid: str) -> bytes:
        return orjson.dumps(
            {"type": "error", "error": {"type": err.etype, "message": err.message}, "request_id": rid}
        )

    def ratelimit_headers(self, states: tuple[DimensionState, ...], wall: float) -> dict[str, str]:
        headers: dict[str, str] = {}
        by_dim = {s.dimension: s for s in states}
        if "tokens" not in by_dim:
            # Anthropic's tokens-* headers report the most restrictive of the token limits.
            token_states = [s for s in states if s.dimension in ("input_tokens", "output_tokens")]
            if token_states:
                by_dim["tokens"] = min(token_states, key=lambda s: s.remaining)
        for dim, s in by_dim.items():
            name = _HEADER_NAMES[dim]
            headers[f"anthropic-ratelimit-{name}-limit"] = str(s.limit)
            headers[f"anthropic-ratelimit-{name}-remaining"] = str(s.remaining)
            headers[f"anthropic-ratelimit-{name}-reset"] = rfc3339(wall + s.seconds_until_full)
        return headers

    def not_found(self, method: str, path: str) -> ApiError:
        return ApiError(404, "not_found_error", "Not Found", reason="not_found")

    def bad_json(self) -> ApiError:
        return _invalid("There was an issue with your request body: it is not valid JSON.")

    def too_large(self, limit: int) -> ApiError:
        return ApiError(
            413,
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes.",
            reason="too_large",
        )

    def unknown_model(self, model: str) -> ApiError:
        return ApiError(404, "not_found_error", f"model: {model}", reason="unknown_model")

    def never_fits(self, dimension: str, cost: int, limit: int) -> ApiError:
        words = _DIM_WORDS.get(dimension, dimension)
        return ApiError(
            400,
            "invalid_request_error",
            f"This request would need {cost} {words}, more than your organization's whole rate limit "
            f"of {limit} {words} per minute; reduce the prompt or max_tokens.",
            reason="never_fits",
        )

    def rate_limited(self, dimension: str, limit: int) -> ApiError:
        words = _DIM_WORDS.get(dimension, dimension)
        return ApiError(
            429,
            "rate_limit_error",
            f"This request would exceed the rate limit for your organization of {limit} {words} "
            "per minute. Please reduce the prompt length or the maximum tokens requested, "
            "or try again later.",
            reason="rate_limit",
        )

    def concurrency_rejected(self) -> ApiError:
        return ApiError(529, "overloaded_error", "Overloaded", reason="concurrency")

    def server_error(self, status: int) -> ApiError:
        message = "Internal server error" if status == 500 else "Service temporarily unavailable"
        return ApiError(status, "api_error", message, reason="fault")

    def overloaded(self) -> ApiError:
        return ApiError(529, "overloaded_error", "Overloaded", reason="fault")

    def insufficient_quota(self) -> ApiError:
        return ApiError(
            402,
            "billing_error",
            "Your credit balance is too low to access the Anthropic API. "
            "Please go to Plans & Billing to upgrade or purchase credits.",
            reason="fault",
        )
