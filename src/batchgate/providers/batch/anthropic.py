"""The client for Anthropic Message Batches: create (`POST /v1/messages/batches` with the requests
translated by `openai_to_anthropic`), poll `processing_status`, read the JSONL results, cancel.

Results are read from `{base_url}/v1/messages/batches/{id}/results` rather than from the
`results_url` the server names, so the API key only ever goes to the configured base URL.
Each result is normalised by `anthropic_item_result`: a succeeded message becomes a
`chat.completion` (`anthropic_to_openai`); errored, canceled and expired results become errors
(codes: the Anthropic error type, `batch_cancelled`, `batch_expired`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import orjson

from batchgate.clock import Clock, LoopClock
from batchgate.config import ProviderConfig, TimeoutConfig
from batchgate.errors import BadRequestError
from batchgate.models import Usage
from batchgate.policy.poll import PollPolicy
from batchgate.providers.anthropic import anthropic_headers
from batchgate.providers.batch.calls import BatchCalls
from batchgate.providers.batch.common import (
    CANCELLED,
    EXPIRED,
    BatchCounts,
    BatchHandle,
    BatchHTTP,
    BatchItemResult,
    BatchRequest,
    BatchState,
    BatchStatus,
    ItemError,
    body_for,
    split_for_batches,
)
from batchgate.providers.classify import error_fields, malformed
from batchgate.providers.translate import anthropic_to_openai, openai_to_anthropic
from batchgate.urls import joined

MAX_REQUESTS = 100_000
MAX_BYTES = 256 * 1024 * 1024
_OVERHEAD = len(b'{"requests":[]}')


def anthropic_status(raw: Mapping[str, Any]) -> BatchStatus:
    """The neutral status of a Message Batch object; ValueError when it is not one.

    An ended batch is `cancelled` when a cancel was initiated, `expired` when some requests
    expired, else `completed`.
    """
    processing_status = raw.get("processing_status")
    counts_raw = raw.get("request_counts")
    c = counts_raw if isinstance(counts_raw, Mapping) else {}
    names = ("processing", "succeeded", "errored", "canceled", "expired")
    processing, succeeded, errored, canceled, expired = (_int(c.get(k)) for k in names)
    counts = BatchCounts(
        processing + succeeded + errored + canceled + expired,
        processing,
        succeeded,
        errored,
        canceled,
        expired,
    )
    state: BatchState
    if processing_status in ("in_progress", "canceling"):
        state = "in_progress"
    elif processing_status == "ended":
        if raw.get("cancel_initiated_at"):
            state = "cancelled"
        elif expired:
            state = "expired"
        else:
            state = "completed"
    else:
        raise ValueError(f"unknown processing_status {processing_status!r}")
    return BatchStatus(state, counts, raw)


def anthropic_item_result(line: Mapping[str, Any], created: int) -> BatchItemResult:
    """One line of the results as a result (`created`: the chat.completion's timestamp); ValueError
    when it is not one."""
    custom_id = line.get("custom_id")
    result = line.get("result")
    if not isinstance(custom_id, str) or not isinstance(result, Mapping):
        raise ValueError("no custom_id or no result")
    kind = result.get("type")
    if kind == "succeeded":
        message = result.get("message")
        if not isinstance(message, Mapping):
            raise ValueError("a succeeded result without a message")
        model = message.get("model")
        body = anthropic_to_openai(message, model=model if isinstance(model, str) else "", created=created)
        u = body["usage"]
        usage = Usage(u["prompt_tokens"], u["completion_tokens"], u["prompt_tokens_details"]["cached_tokens"])
        return BatchItemResult(custom_id, ok=True, body=body, usage=usage, status_code=200)
    if kind == "errored":
        etype, _, message_text = error_fields(result.get("error"))
        error = ItemError(etype or "error", message_text or "")
    elif kind == "canceled":
        error = ItemError(CANCELLED, "The request was not processed: the batch was cancelled.")
    elif kind == "expired":
        error = ItemError(EXPIRED, "The request was not processed before the batch expired.")
    else:
        raise ValueError(f"unknown result type {kind!r}")
    return BatchItemResult(custom_id, ok=False, error=error)


def _int(value: Any) -> int:
    return value if type(value) is int else 0


class AnthropicBatchClient:
    """Runs batches on one Anthropic provider's Message Batches API."""

    kind = "anthropic"

    def __init__(
        self,
        config: ProviderConfig,
        session: aiohttp.ClientSession,
        timeouts: TimeoutConfig,
        *,
        base_url: str | None = None,
        clock: Clock | None = None,
        poll: PollPolicy | None = None,
        max_requests: int = MAX_REQUESTS,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.name = config.name
        self.base_url = (base_url or config.base_url).rstrip("/")
        self._url = joined(self.base_url, "v1/messages/batches")
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self._default_max_tokens = config.default_max_tokens
        self._clock: Clock = clock or LoopClock()
        headers = anthropic_headers(config, {"Accept": "application/json"})
        self._http = BatchHTTP(session, timeouts, config.name, config.secret, headers, config.network)
        self._calls = calls = BatchCalls(
            self.name, self.kind, self._http, self._url, anthropic_status, self._clock, poll or PollPolicy()
        )
        # status, poll_until_done and cancel are the same calls on every Batch API
        self.status, self.poll_until_done, self.cancel = calls.status, calls.poll_until_done, calls.cancel

    def _entry(self, request: BatchRequest, model: str | None) -> dict[str, Any]:
        body = body_for(request, model, self.name)
        try:
            params = openai_to_anthropic(
                body, model=body["model"], default_max_tokens=self._default_max_tokens, provider=self.name
            )
        except BadRequestError as exc:
            raise BadRequestError(
                f"{exc.message} (custom_id {request.custom_id!r})", provider=self.name
            ) from None
        return {"custom_id": request.custom_id, "params": params}

    def split(
        self, requests: Sequence[BatchRequest], *, model: str | None = None
    ) -> list[list[BatchRequest]]:
        """`requests` cut into batches within `max_requests` requests and `max_bytes` bytes."""
        return split_for_batches(
            requests,
            self.max_requests,
            self.max_bytes - _OVERHEAD,
            lambda r: len(orjson.dumps(self._entry(r, model))) + 1,
        )

    async def submit(
        self,
        requests: Sequence[BatchRequest],
        *,
        model: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> BatchHandle:
        """Create one Message Batch of `requests` (`metadata` is not part of this API: ignored)."""
        if not requests:
            raise ValueError("a batch needs at least one request")
        payload = orjson.dumps({"requests": [self._entry(r, model) for r in requests]})
        batch = await self._http.json("POST", self._url, payload)
        batch_id = batch.get("id")
        if not isinstance(batch_id, str):
            raise malformed(self.name, 200, {}, orjson.dumps(batch), "the batch object has no id")
        return BatchHandle(self.name, batch_id, self.kind)

    async def results(self, handle: BatchHandle) -> list[BatchItemResult]:
        """Every result of an ended batch (fetched from the configured URL, never `results_url`)."""
        await self._calls.ended(handle)
        data = await self._http.raw("GET", joined(self._calls.batch_url(handle), "results"))
        created = int(self._clock.wall())
        return self._calls.items(data, "batch result", lambda line: anthropic_item_result(line, created))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"
