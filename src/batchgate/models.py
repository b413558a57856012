"""Value objects shared by routing, the quota pool, the scheduler and jobs.

Requests enter batchgate as OpenAI Chat Completions bodies (dicts with `model` and `messages`);
results leave as OpenAI-shaped `chat.completion` bodies whatever provider served them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from batchgate.endpoints import COMPLETIONS, EMBEDDINGS, RESPONSES, endpoint_of
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
    cached: bool = False  # answered from the response cache (`Gateway(cache=...)`): nothing sent

    @property
    def text(self) -> str | None:
        """The first choice's message content, if any."""
        return answer_text(self.body)


def answer_text(body: ChatBody | None) -> str | None:
    """The answer's text, if any: the first choice's message content of a `chat.completion`,
    its `text` of a `text_completion`, the output text of a Responses `response`."""
    if not body:
        return None
    if body.get("object") == "response":
        return _output_text(body.get("output"))
    try:
        choice = body["choices"][0]
        content = choice["text"] if body.get("object") == "text_completion" else choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) else None


def _output_text(output: Any) -> str | None:
    """The `output_text` parts of a Responses answer's message items, joined (as the SDK does)."""
    if not isinstance(output, list):
        return None
    texts = [
        part["text"]
        for item in output
        if isinstance(item, dict) and item.get("type") == "message" and isinstance(item.get("content"), list)
        for part in item["content"]
        if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str)
    ]
    return "".join(texts) if texts else None


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


def requested_output_tokens(body: Mapping[str, object], default: int) -> int:
    """The output tokens a body may be answered with: its max tokens (or `default`) × n; none
    for embeddings, `max_output_tokens` for the Responses API, × each prompt for completions."""
    endpoint = endpoint_of(body)
    if endpoint == EMBEDDINGS:
        return 0  # charged by input tokens only
    if endpoint == RESPONSES:
        value = body.get("max_output_tokens")
    else:
        value = body.get("max_completion_tokens", body.get("max_tokens"))
    limit = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default
    n = body.get("n", 1)
    n = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1
    prompts = body.get("prompt") if endpoint == COMPLETIONS else None
    return limit * n * (len(prompts) if isinstance(prompts, list) and prompts else 1)


@functools.lru_cache(maxsize=256)
def unpriced(output: int) -> Cost:
    """A request's cost before its prompt is priced: one per output size (frozen, so shared)."""
    return Cost(requests=1, output_tokens=output)
