"""What the Batch API clients share: the provider-neutral model (`BatchRequest`, `BatchHandle`,
`BatchStatus`, `BatchItemResult`), the `BatchClient` protocol (its factory is `factory`), the splitter, the
polling policy and loop, and the HTTP calls (JSON, raw bytes) with errors classified by
`batchgate.providers.classify`.

A `BatchHandle` (provider, batch_id, kind) is all a client needs to resume: after a restart,
`factory.make_batch_client(config, ...)` then `poll_until_done(BatchHandle.from_dict(saved))` and
`results(handle)`. Results are normalised to the OpenAI `chat.completion` shape whatever the
provider; error codes `batch_expired` and `batch_cancelled` mean the same on both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import aiohttp
import orjson
from multidict import CIMultiDictProxy

from batchgate.clock import Clock
from batchgate.config import NetworkSettings, Secret, TimeoutConfig
from batchgate.errors import (
    BadRequestError,
    OverloadedError,
    RateLimitError,
    RetryableStatusError,
    ServerError,
    TransportError,
)
from batchgate.models import ChatBody, Usage
from batchgate.policy.poll import PollPolicy
from batchgate.providers.classify import error_for_response, malformed
from batchgate.providers.h1.parser import MAX_BODY
from batchgate.providers.http import MAX_DOWNLOAD, request_timeout, send

BatchState = Literal["in_progress", "completed", "expired", "cancelled", "failed"]
TERMINAL_STATES: frozenset[str] = frozenset({"completed", "expired", "cancelled", "failed"})
KINDS = ("openai", "anthropic", "azure", "gemini")
EXPIRED = "batch_expired"
CANCELLED = "batch_cancelled"
T = TypeVar("T")
# Worth polling again after: the provider had a transient problem, not a verdict on the batch.
TRANSIENT_ERRORS = (TransportError, RateLimitError, OverloadedError, ServerError, RetryableStatusError)


@dataclass(frozen=True, slots=True)
class BatchRequest:
    """One request of a batch: an OpenAI Chat Completions body and the id its result comes back with."""

    custom_id: str
    body: ChatBody


@dataclass(frozen=True, slots=True)
class BatchHandle:
    """Names a submitted batch; JSON-serialisable, and all that is needed to resume it."""

    provider: str
    batch_id: str
    kind: str  # the provider kind: "openai" | "anthropic" | "azure" | "gemini"

    def to_dict(self) -> dict[str, str]:
        return {"provider": self.provider, "batch_id": self.batch_id, "kind": self.kind}

    @classmethod
    def from_dict(cls, data: Any) -> BatchHandle:
        if not isinstance(data, Mapping):
            raise ValueError("a batch handle must be an object with provider, batch_id and kind")
        values: list[str] = []
        for key in ("provider", "batch_id", "kind"):
            value = data.get(key)
            if not isinstance(value, str) or not value:
                raise ValueError(f"batch handle: '{key}' must be a non-empty string, got {value!r}")
            values.append(value)
        if values[2] not in KINDS:
            raise ValueError(f"batch handle: 'kind' must be one of {', '.join(KINDS)}, got {values[2]!r}")
        return cls(*values)


@dataclass(frozen=True, slots=True)
class BatchCounts:
    total: int = 0
    processing: int = 0
    succeeded: int = 0
    errored: int = 0
    cancelled: int = 0
    expired: int = 0


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """Where a batch is, in provider-neutral words; `raw` is the provider's batch object."""

    state: BatchState
    counts: BatchCounts
    raw: Mapping[str, Any]

    @property
    def done(self) -> bool:
        return self.state in TERMINAL_STATES


@dataclass(frozen=True, slots=True)
class ItemError:
    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class BatchItemResult:
    """The outcome of one batch request; `body` is a `chat.completion` whatever the provider."""

    custom_id: str
    ok: bool
    body: ChatBody | None = None
    error: ItemError | None = None
    usage: Usage | None = None
    status_code: int | None = None


@runtime_checkable
class BatchClient(Protocol):
    """Submits batches to one provider's Batch API and collects their results: the one seam of
    the Batch API clients (what they share is `calls.BatchCalls`, held, not inherited)."""

    name: str
    kind: str
    max_requests: int
    max_bytes: int

    def split(
        self, requests: Sequence[BatchRequest], *, model: str | None = None
    ) -> list[list[BatchRequest]]:
        """`requests` cut into batches within this provider's count and size limits."""
        ...

    async def submit(
        self,
        requests: Sequence[BatchRequest],
        *,
        model: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> BatchHandle: ...

    async def status(self, handle: BatchHandle) -> BatchStatus: ...

    async def poll_until_done(
        self, handle: BatchHandle, *, on_status: Callable[[BatchStatus], None] | None = None
    ) -> BatchStatus: ...

    async def results(self, handle: BatchHandle) -> list[BatchItemResult]: ...

    async def cancel(self, handle: BatchHandle) -> BatchStatus: ...


def split_for_batches(
    items: Sequence[T], max_requests: int, max_bytes: int, size: Callable[[T], int] | None = None
) -> list[list[T]]:
    """`items` in order, cut into runs of at most `max_requests` items and `max_bytes` bytes.

    `size(item)` is an item's share of the batch in bytes (by default its JSON plus a newline).
    An item that alone exceeds `max_bytes` raises ValueError naming its position.
    """
    if max_requests < 1 or max_bytes < 1:
        raise ValueError("max_requests and max_bytes must be positive")
    measure = size or _json_line_size
    batches: list[list[T]] = []
    current: list[T] = []
    used = 0
    for index, item in enumerate(items):
        n = measure(item)
        if n > max_bytes:
            raise ValueError(f"item {index} is {n} bytes, more than a whole batch may hold ({max_bytes})")
        if current and (len(current) >= max_requests or used + n > max_bytes):
            batches.append(current)
            current, used = [], 0
        current.append(item)
        used += n
    if current:
        batches.append(current)
    return batches


def _json_line_size(item: Any) -> int:
    return len(orjson.dumps(item)) + 1


async def poll_until_done(
    fetch: Callable[[], Awaitable[BatchStatus]],
    clock: Clock,
    policy: PollPolicy,
    *,
    on_status: Callable[[BatchStatus], None] | None = None,
) -> BatchStatus:
    """Fetch the status until the batch has ended, sleeping on `clock` with growing intervals."""
    attempt = failures = 0
    while True:
        try:
            status = await fetch()
        except TRANSIENT_ERRORS:
            failures += 1
            if failures > policy.max_failures:
                raise
        else:
            failures = 0
            if on_status is not None:
                on_status(status)
            if status.done:
                return status
        await clock.sleep(policy.interval(attempt))
        attempt += 1


def body_for(request: BatchRequest, model: str | None, provider: str) -> ChatBody:
    """The request's body with `model` set (when given); refuses a body that names no model."""
    body = dict(request.body)
    if model is not None:
        body["model"] = model
    elif not isinstance(body.get("model"), str):
        raise BadRequestError(
            f"{provider}: batch request {request.custom_id!r} names no model and none was given",
            provider=provider,
        )
    return body


def parse_jsonl(data: bytes, provider: str, what: str) -> list[dict[str, Any]]:
    """The objects of a JSONL document; a line that is not a JSON object is a MalformedResponse."""
    out: list[dict[str, Any]] = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            raise malformed(provider, 200, {}, line, f"line {number} of the {what} is not a JSON object")
        out.append(obj)
    return out


class BatchHTTP:
    """The HTTP calls of one batch client: classified errors, the API key never in messages."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        timeouts: TimeoutConfig,
        provider: str,
        api_key: Secret | None,
        headers: Mapping[str, str],
        network: NetworkSettings | None = None,
    ) -> None:
        self._network = network  # the provider's proxy and TLS settings
        self._session = session
        self._timeout = request_timeout(timeouts)
        self._provider = provider
        self._api_key = api_key
        self._headers = dict(headers)

    async def call(
        self,
        method: str,
        url: str,
        data: bytes | aiohttp.FormData | None = None,
        *,
        json_body: bool = True,
        limit: int = MAX_BODY,
    ) -> tuple[int, CIMultiDictProxy[str], bytes]:
        headers = dict(self._headers)
        if json_body and data is not None:
            headers["Content-Type"] = "application/json"
        return await send(
            self._session,
            method,
            url,
            data,
            headers,
            self._timeout,
            provider=self._provider,
            api_key=self._api_key,
            limit=limit,
            network=self._network,
        )

    async def raw(
        self, method: str, url: str, data: bytes | aiohttp.FormData | None = None, *, json_body: bool = True
    ) -> bytes:
        """The body of a 2xx answer (a results file: up to `MAX_DOWNLOAD` bytes, decompressed);
        any other status raises its classified error."""
        status, headers, body = await self.call(method, url, data, json_body=json_body, limit=MAX_DOWNLOAD)
        if not 200 <= status < 300:
            raise error_for_response(
                status, headers, body, provider=self._provider, api_key=self._api_key, url=url
            )
        return body

    async def json(
        self, method: str, url: str, data: bytes | aiohttp.FormData | None = None, *, json_body: bool = True
    ) -> dict[str, Any]:
        """The JSON object of a 2xx answer (a MalformedResponse when it is not one)."""
        status, headers, body = await self.call(method, url, data, json_body=json_body)
        if not 200 <= status < 300:
            raise error_for_response(
                status, headers, body, provider=self._provider, api_key=self._api_key, url=url
            )
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise malformed(self._provider, status, headers, body, "body is not JSON") from None
        if not isinstance(parsed, dict):
            raise malformed(self._provider, status, headers, body, "body is not a JSON object")
        return parsed
