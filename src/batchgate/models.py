"""Value objects shared by routing, the quota pool, the scheduler and jobs.

Requests enter batchgate as OpenAI Chat Completions bodies (dicts with `model` and `messages`);
results leave as OpenAI-shaped `chat.completion` bodies whatever provider served them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from batchgate.errors import BatchgateError

RouteMode = Literal["online", "batch-api", "auto"]  # how a route sends: live, provider Batch API, or either
ROUTE_MODES: tuple[str, ...] = ("online", "batch-api", "auto")

ChatBody = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Cost:
    """What a request charges against a provider's quota at admission."""

    requests: int = 1
    tokens: int = 0  # prompt + max_tokens (OpenAI-style combined TPM)
    input_tokens: int = 0  # Anthropic-style split limits
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class ProviderResponse:
    """A successful provider answer, normalised to the OpenAI chat.completion shape."""

    status: int
    body: ChatBody
    usage: Usage
    headers: Mapping[str, str]
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try of one request at one provider."""

    provider: str
    started: float  # clock seconds
    latency_ms: float
    status: int | None = None
    error_kind: str | None = None  # BatchgateError.kind, None when it succeeded
    error_message: str | None = None
    tokens_charged: int = 0  # tokens the provider charged for this try (wasted if it failed)


@dataclass(slots=True)
class Result:
    """The outcome of one request, aligned with its input by `index`."""

    index: int
    ok: bool
    body: ChatBody | None = None
    error: BatchgateError | None = None
    provider: str | None = None
    model: str | None = None
    status_code: int | None = None
    request_id: str | None = None
    usage: Usage | None = None
    latency_ms: float = 0.0
    attempts: list[Attempt] = field(default_factory=list)
    custom_id: str | None = None

    @property
    def text(self) -> str | None:
        """The first choice's message content, if any."""
        return answer_text(self.body)


def answer_text(body: ChatBody | None) -> str | None:
    """The first choice's message content of a `chat.completion` body, if any."""
    if not body:
        return None
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) else None


@dataclass(frozen=True, slots=True)
class RateLimitSnapshot:
    """What a provider's rate-limit headers said on one response (None where not sent).

    `reset_*` are seconds from the moment of the response until the bucket is full again.
    """

    limit_requests: float | None = None
    remaining_requests: float | None = None
    reset_requests: float | None = None
    limit_tokens: float | None = None
    remaining_tokens: float | None = None
    reset_tokens: float | None = None
    limit_input_tokens: float | None = None
    remaining_input_tokens: float | None = None
    reset_input_tokens: float | None = None
    limit_output_tokens: float | None = None
    remaining_output_tokens: float | None = None
    reset_output_tokens: float | None = None


def requested_output_tokens(body: Mapping[str, Any], default: int) -> int:
    """The output tokens a chat body may be answered with: its max tokens (or `default`) × n."""
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    limit = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default
    n = body.get("n", 1)
    return limit * (n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1)
