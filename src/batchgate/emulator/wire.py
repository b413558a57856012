"""What both API families share: the parsed request, the error an answer is made of, the interface
each family implements (validation, bodies, headers), and the header time formats.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any

from batchgate.emulator.config import ProviderConfig
from batchgate.emulator.limiter import DimensionState, RequestCost


class ApiError(Exception):
    """An answer in the family's error shape; `reason` is the stats bucket it is counted under."""

    def __init__(
        self,
        status: int,
        etype: str,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        reason: str = "invalid",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.etype = etype
        self.message = message
        self.param = param
        self.code = code
        self.reason = reason
        self.headers: dict[str, str] = dict(headers or {})
        self.ratelimit_headers = True  # False: answer without any rate-limit header (no hint at all)


@dataclass(slots=True)
class ParsedRequest:
    """A valid request (chat or another endpoint), with what it costs and what the provider
    reports as prompt tokens."""

    model: str
    prompt: str
    max_tokens: int
    n: int
    prompt_tokens: int
    cost: RequestCost
    fingerprint: int
    endpoint: str = "chat"  # OpenAI family: chat, embeddings, responses or completions
    inputs: tuple[str, ...] = ()  # embeddings: the texts to embed; completions: the prompts
    dimensions: int = 0  # embeddings: the vector size
    base64: bool = False  # embeddings: encoding_format "base64"
    stream: bool = False  # chat, responses, messages: answered as events (`emulator.streaming`)
    include_usage: bool = False  # chat: `stream_options.include_usage`
    tool_call: str | None = None  # Gemini: the function a request forces (answered as its call)


class Family(ABC):
    """One API family's wire format (OpenAI Chat Completions or Anthropic Messages)."""

    name: str
    path: str
    request_id_header: str
    id_prefix: str

    @abstractmethod
    def authenticate(self, headers: Mapping[str, str], api_key: str | None) -> None:
        """Raise the family's 401 (or its missing-header 400) unless the headers are acceptable."""

    def route_model(self, match_info: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        """The model a request's path names, its path's rules checked (Azure's deployment and
        `api-version`); None: the body names the model (every other family)."""
        return None

    @abstractmethod
    def parse(self, body: Any, provider: ProviderConfig) -> ParsedRequest:
        """Validate a decoded JSON body; raise ApiError shaped like the real API's."""

    def parse_at(self, endpoint: str, body: Any, provider: ProviderConfig) -> ParsedRequest:
        """`parse` for a family whose path names the endpoint (Gemini's `:embedContent`)."""
        return self.parse(body, provider)

    @abstractmethod
    def count_text(self, text: str) -> int:
        """Output tokens of a piece of generated text, as this family counts them."""

    @abstractmethod
    def success_body(
        self, req: ParsedRequest, text: str, tokens: int, cut: bool, body_id: str, wall: float
    ) -> bytes: ...

    @abstractmethod
    def error_body(self, err: ApiError, rid: str) -> bytes: ...

    @abstractmethod
    def ratelimit_headers(self, states: tuple[DimensionState, ...], wall: float) -> dict[str, str]: ...

    # The errors the emulator answers with, in this family's words.
    @abstractmethod
    def not_found(self, method: str, path: str) -> ApiError: ...

    @abstractmethod
    def bad_json(self) -> ApiError: ...

    @abstractmethod
    def too_large(self, limit: int) -> ApiError: ...

    @abstractmethod
    def unknown_model(self, model: str) -> ApiError: ...

    @abstractmethod
    def never_fits(self, dimension: str, cost: int, limit: int) -> ApiError: ...

    @abstractmethod
    def rate_limited(self, dimension: str, limit: int) -> ApiError: ...

    @abstractmethod
    def concurrency_rejected(self) -> ApiError: ...

    @abstractmethod
    def server_error(self, status: int) -> ApiError: ...

    @abstractmethod
    def overloaded(self) -> ApiError: ...

    @abstractmethod
    def insufficient_quota(self) -> ApiError: ...


def retry_hint_headers(wait_seconds: float) -> dict[str, str]:
    """`retry-after-ms` and `retry-after` (whole seconds, rounded up) for a wait."""
    ms = max(1, math.ceil(wait_seconds * 1000))
    return {"retry-after-ms": str(ms), "retry-after": str(max(1, math.ceil(ms / 1000)))}


def http_date(epoch_seconds: float) -> str:
    """An IMF-fixdate (`Wed, 21 Oct 2015 07:28:00 GMT`) for `retry-after`."""
    return formatdate(epoch_seconds, usegmt=True)


def rfc3339(epoch_seconds: float) -> str:
    """`2024-01-01T00:00:00Z`, rounded up to the next whole second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(math.ceil(epoch_seconds)))


def go_duration(seconds: float) -> str:
    """A Go-style duration as OpenAI's reset headers use it: `0s`, `12ms`, `1s`, `6m0s`, `1h2m3.5s`."""
    ms = round(seconds * 1000)
    if ms <= 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def refuse_fields(body: Any, fields: tuple[str, ...]) -> None:
    """A strict provider's answer to a body field it does not know (a 400 naming the field)."""
    if fields and isinstance(body, dict):
        for name in fields:
            if name in body:
                raise ApiError(
                    400,
                    "invalid_request_error",
                    f"Unrecognized request argument supplied: {name}",
                    param=name,
                    code="unknown_parameter",
                )
