"""The emulated Anthropic Message Batches API: `POST/GET /v1/messages/batches`, `GET .../{id}`,
`GET .../{id}/results` (JSONL) and `POST .../{id}/cancel`.

Creation checks the envelope at once (400: not a list, too many requests or bytes, a custom_id that
is missing, malformed or repeated); each request's `params` is validated later, as the Messages
endpoint would, and a bad one becomes an `errored` result. `processing_status` goes `in_progress` →
`ended`, or `canceling` → `ended`; as documented, `request_counts` shows every request as
`processing` until the batch ends. Requests not done when the window ends are `expired`; when a
cancel takes effect, `canceled`. Results come in a deterministic shuffled order (they are unordered).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from batchgate.emulator.batch.core import BatchItem, BatchProvider, BatchRun
from batchgate.emulator.batch.http import (
    Route,
    json_object,
    json_response,
    page,
    read_limited,
    rfc3339_exact,
)
from batchgate.emulator.wire import ApiError

PATH = "/v1/messages/batches"
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TAIL = {"expired": b'{"type":"expired"}', "cancelled": b'{"type":"canceled"}'}


def _invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_request_error", message)


@dataclass(slots=True)
class AnthropicBatch:
    id: str
    created_at: float
    expires_at: float
    run: BatchRun
    cancel_initiated_at: float | None = None
    results: bytes | None = None

    def to_dict(self, base: str) -> dict[str, Any]:
        run = self.run
        if run.ended:
            outcomes = [item.outcome for item in run.items]
            counts = {
                "processing": 0,
                "succeeded": run.succeeded,
                "errored": run.errored,
                "canceled": outcomes.count("cancelled"),
                "expired": outcomes.count("expired"),
            }
        else:
            counts = {"processing": run.total, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        status = "ended" if run.ended else "canceling" if run.status == "cancelling" else "in_progress"
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "ended_at": None if run.ended_wall is None else rfc3339_exact(run.ended_wall),
            "created_at": rfc3339_exact(self.created_at),
            "expires_at": rfc3339_exact(self.expires_at),
            "archived_at": None,
            "cancel_initiated_at": None
            if self.cancel_initiated_at is None
            else rfc3339_exact(self.cancel_initiated_at),
            "results_url": f"{base}/{self.id}/results" if run.ended else None,
        }


class AnthropicBatchAPI:
    """The Message Batches endpoints of one Anthropic-family provider."""

    def __init__(self, bp: BatchProvider, next_id: Callable[[], int]) -> None:
        self.bp = bp
        self._next_id = next_id

    def routes(self) -> Iterable[Route]:
        return (
            ("POST", PATH, self.create),
            ("GET", PATH, self.list_batches),
            ("GET", f"{PATH}/{{batch_id}}", self.get_batch),
            ("GET", f"{PATH}/{{batch_id}}/results", self.results),
            ("POST", f"{PATH}/{{batch_id}}/cancel", self.cancel),
        )

    def _base(self, request: web.Request) -> str:
        return f"{request.url.origin()}/{self.bp.runtime.name}{PATH}"

    async def create(self, request: web.Request) -> web.StreamResponse:
        limit = self.bp.max_bytes
        raw = await read_limited(request, limit)
        if raw is None:
            raise _invalid(f"requests: the batch is larger than the limit of {limit} bytes")
        body = json_object(
            raw,
            _invalid("There was an issue with your request body: it is not valid JSON."),
            _invalid("Input should be a valid dictionary"),
        )
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise _invalid("requests: Input should be a non-empty list")
        if len(requests) > self.bp.max_requests:
            raise _invalid(
                f"requests: a batch may hold at most {self.bp.max_requests} requests, got {len(requests)}"
            )
        items = self._items(requests)
        if self.bp.config.fail_validation:
            raise _invalid("requests: the batch failed validation")
        tokens = sum(item.request.prompt_tokens for item in items if item.request is not None)
        limit_tokens = self.bp.config.enqueued_token_limit
        if limit_tokens is not None and tokens > limit_tokens:
            raise _invalid(
                f"requests: this batch holds {tokens} input tokens, more than the whole limit of "
                f"{limit_tokens} enqueued tokens; split it into smaller batches"
            )
        if not self.bp.reserve(tokens):
            raise ApiError(
                429,
                "rate_limit_error",
                f"Number of enqueued batch input tokens would exceed your organization's limit of "
                f"{limit_tokens} ({self.bp.enqueued_tokens} in use). Please try again once some batches "
                "have ended.",
            )
        wall = self.bp.clock.wall()
        batch_id = f"msgbatch_{self._next_id():024x}"
        holder: list[AnthropicBatch] = []
        run = self.bp.start_run(items, batch_id, lambda run: self._ended(holder[0], run))
        record = AnthropicBatch(batch_id, wall, wall + self.bp.window_seconds, run)
        holder.append(record)
        self.bp.batches[batch_id] = record
        self.bp.stats.created += 1
        return json_response(record.to_dict(self._base(request)))

    def _items(self, requests: list[Any]) -> list[BatchItem]:
        items: list[BatchItem] = []
        seen: set[str] = set()
        for i, entry in enumerate(requests):
            if not isinstance(entry, dict):
                raise _invalid(f"requests.{i}: Input should be a valid dictionary")
            custom_id = entry.get("custom_id")
            if not isinstance(custom_id, str):
                raise _invalid(f"requests.{i}.custom_id: Field required")
            if not CUSTOM_ID.match(custom_id):
                raise _invalid(f"requests.{i}.custom_id: String should match pattern '{CUSTOM_ID.pattern}'")
            if custom_id in seen:
                raise _invalid(
                    f"requests.{i}.custom_id: duplicate custom_id {custom_id!r}; each must be unique"
                )
            seen.add(custom_id)
            params = entry.get("params")
            if not isinstance(params, dict):
                raise _invalid(f"requests.{i}.params: Input should be a valid dictionary")
            items.append(self.bp.parse_item(custom_id, params))
        return items

    def _ended(self, record: AnthropicBatch, run: BatchRun) -> None:
        family = self.bp.family
        order = list(range(run.total))
        random.Random(record.id).shuffle(order)
        lines: list[bytes] = []
        tag = record.id[-12:].encode()
        for i in order:
            item = run.items[i]
            if item.outcome == "succeeded" and item.body is not None:
                result = b'{"type":"succeeded","message":%s}' % item.body
            elif item.outcome == "errored" and item.error is not None:
                error = family.error_body(item.error, (b"req_%s%012x" % (tag, i)).decode())
                result = b'{"type":"errored","error":%s}' % error
            else:
                result = _TAIL.get(item.outcome, b'{"type":"expired"}')
            lines.append(b'{"custom_id":%s,"result":%s}' % (orjson.dumps(item.custom_id), result))
        record.results = b"\n".join(lines) + b"\n"

    def _batch(self, request: web.Request) -> AnthropicBatch:
        batch_id = request.match_info["batch_id"]
        record: AnthropicBatch | None = self.bp.batches.get(batch_id)
        if record is None:
            raise ApiError(404, "not_found_error", f"message_batch {batch_id} not found", reason="not_found")
        record.run.advance(self.bp.clock.now())
        return record

    async def get_batch(self, request: web.Request) -> web.StreamResponse:
        return json_response(self._batch(request).to_dict(self._base(request)))

    async def list_batches(self, request: web.Request) -> web.StreamResponse:
        ids, has_more = page(list(self.bp.batches), request, "after_id")
        base, now = self._base(request), self.bp.clock.now()
        data = []
        for batch_id in ids:
            record: AnthropicBatch = self.bp.batches[batch_id]
            record.run.advance(now)
            data.append(record.to_dict(base))
        return json_response(
            {
                "data": data,
                "has_more": has_more,
                "first_id": ids[0] if ids else None,
                "last_id": ids[-1] if ids else None,
            }
        )

    async def results(self, request: web.Request) -> web.StreamResponse:
        record = self._batch(request)
        if record.results is None:
            raise _invalid(f"message_batch {record.id} has not ended yet; its results are not available")
        return web.Response(body=record.results, content_type="application/x-jsonl")

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        record = self._batch(request)
        run = record.run
        if run.status != "in_progress":
            status = "ended" if run.ended else "canceling"
            raise _invalid(f"message_batch {record.id} cannot be canceled: its processing_status is {status}")
        run.cancel(self.bp.clock.now())
        record.cancel_initiated_at = self.bp.clock.wall()
        return json_response(record.to_dict(self._base(request)))
