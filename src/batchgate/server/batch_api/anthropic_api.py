"""Anthropic's Message Batches API under `/v1/messages/batches`, for the official `anthropic` SDK:
create (inline `requests`, each `{custom_id, params}`, checked at once), retrieve, list
(`after_id` / `before_id` / `limit`), cancel, and the JSONL results once the batch has ended.

A batch is a job like any other (`Batches.create_inline`); each `params.model` names a route.
`processing_status` is `in_progress`, `canceling` or `ended`; as Anthropic documents, every
request counts as `processing` until the batch ends. Results are read from the job store: a
succeeded task's chat answer as an Anthropic `message`, a failed one as `errored`, and one a
cancel left unsent as `canceled`.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, TypedDict

import orjson
from aiohttp import web

from batchgate.errors import ServiceRequestError
from batchgate.jobs.store.protocol import TaskRecord, TaskState
from batchgate.server.batch_api.batches import Batches
from batchgate.server.batch_api.runs import ENDED
from batchgate.server.batch_api.shapes import WINDOW_S
from batchgate.server.door import body_limits
from batchgate.server.door.query import query_int
from batchgate.server.tenancy.registry import BatchRecord, Registry

PATH = "/v1/messages/batches"
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_REQUESTS = 100_000
DEFAULT_LIMIT, MAX_LIMIT = 20, 1000
_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}
_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error",
}  # fmt: skip


def error_type(status: int) -> str:
    return _ERROR_TYPES.get(status, "api_error")


def error_body(status: int, message: str) -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": error_type(status), "message": message}})


class MessageBatchCounts(TypedDict):
    processing: int
    succeeded: int
    errored: int
    canceled: int
    expired: int


class MessageBatch(TypedDict):
    """Anthropic's Message Batch object."""

    id: str
    type: Literal["message_batch"]
    processing_status: str
    request_counts: MessageBatchCounts
    ended_at: str | None
    created_at: str | None
    expires_at: str | None
    archived_at: None
    cancel_initiated_at: str | None
    results_url: str | None


def _iso(seconds: int | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def request_lines(body: Mapping[str, object]) -> bytes:
    """The batch's input JSONL from a create request's `requests`, its envelope checked."""
    requests = body.get("requests")
    if not isinstance(requests, list) or not requests:
        raise ServiceRequestError(400, "requests: must be a non-empty list")
    if len(requests) > MAX_REQUESTS:
        raise ServiceRequestError(400, f"requests: at most {MAX_REQUESTS} requests per batch")
    seen: set[str] = set()
    lines = []
    for i, item in enumerate(requests):
        if not isinstance(item, dict) or not isinstance(item.get("params"), dict):
            raise ServiceRequestError(400, f"requests[{i}]: must be an object with `custom_id` and `params`")
        cid = item.get("custom_id")
        if not isinstance(cid, str) or not CUSTOM_ID.fullmatch(cid):  # `$` would let "a\n" through
            raise ServiceRequestError(400, f"requests[{i}].custom_id: must match {CUSTOM_ID.pattern}")
        if cid in seen:
            raise ServiceRequestError(400, f"requests[{i}].custom_id: {cid!r} is used twice")
        seen.add(cid)
        lines.append(orjson.dumps({"custom_id": cid, "params": item["params"]}))
    return b"".join(line + b"\n" for line in lines)


def parsed_lines(data: bytes) -> tuple[int, bytes | str]:
    """In the worker process: a create request's body as the batch's input JSONL `(200, lines)`,
    or why not `(status, message)` (an exception would not cross the process boundary whole)."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return 400, "The request body is not valid JSON."
    if not isinstance(body, dict):
        return 400, "The request body must be a JSON object."
    try:
        return 200, request_lines(body)
    except ServiceRequestError as exc:
        return exc.status, exc.message


def processing_status(b: BatchRecord) -> str:
    if b.status in ENDED:
        return "ended"
    return "canceling" if b.status == "cancelling" else "in_progress"


def request_counts(b: BatchRecord, counts: dict[str, int]) -> MessageBatchCounts:
    total = max(counts["total"], b.requests)
    if b.status not in ENDED:
        return {"processing": total, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    left = total - counts["completed"] - counts["failed"]
    canceled = left if b.cancel_asked else 0
    expired = left if b.expired and not b.cancel_asked else 0
    errored = counts["failed"] + (0 if b.stopping else left)
    return {"processing": 0, "succeeded": counts["completed"], "errored": errored, "canceled": canceled,
            "expired": expired}  # fmt: skip


def batch_object(b: BatchRecord, counts: dict[str, int], origin: str) -> MessageBatch:
    ended = b.status in ENDED
    end = next((b.times[k] for k in ("completed_at", "cancelled_at", "failed_at") if k in b.times), None)
    return {
        "id": b.id,
        "type": "message_batch",
        "processing_status": processing_status(b),
        "request_counts": request_counts(b, counts),
        "ended_at": _iso(end) if ended else None,
        "created_at": _iso(b.created_at),
        "expires_at": _iso(b.created_at + WINDOW_S),
        "archived_at": None,
        "cancel_initiated_at": _iso(b.times.get("cancelling_at")),
        "results_url": f"{origin}{PATH}/{b.id}/results" if ended else None,
    }


def message_of(body: dict[str, Any], custom_id: str) -> dict[str, Any]:
    """An OpenAI chat completion (what the gateway returns for any provider) as an Anthropic message."""
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    text = message.get("content") or ""
    usage = body.get("usage") or {}
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    raw_id = str(body.get("id") or custom_id)
    calls = [_tool_use(c) for c in message.get("tool_calls") or []]
    return {
        "id": "msg_" + hashlib.blake2b(raw_id.encode(), digest_size=12).hexdigest(),
        "type": "message",
        "role": "assistant",
        "model": body.get("model") or "",
        "content": [{"type": "text", "text": text}] * bool(text or not calls) + calls,
        "stop_reason": _STOP.get(choice.get("finish_reason") or "stop", "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": int(usage.get("prompt_tokens", 0)) - cached,
                  "output_tokens": int(usage.get("completion_tokens", 0)),
                  "cache_read_input_tokens": cached},
    }  # fmt: skip


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool call as a `tool_use` block (its arguments parsed back into `input`)."""
    function = call.get("function") or {}
    try:
        arguments = orjson.loads(function.get("arguments") or "{}")
    except orjson.JSONDecodeError:
        arguments = {"arguments": function.get("arguments")}
    return {"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": arguments}


def result_line(t: TaskRecord, b: BatchRecord) -> bytes:
    line: dict[str, Any] = orjson.loads(t.output_line) if t.output_line else {}
    if t.state is TaskState.SUCCEEDED:
        result = {
            "type": "succeeded",
            "message": message_of((line.get("response") or {}).get("body") or {}, t.custom_id),
        }
    elif t.state is TaskState.FAILED:
        error = line.get("error") or {"message": t.error or "failed"}
        status = (line.get("response") or {}).get("status_code") or 500
        detail = {"type": error_type(int(status)), "message": str(error.get("message"))}
        result = {"type": "errored", "error": {"type": "error", "error": detail}}
    elif b.cancel_asked:
        result = {"type": "canceled"}
    elif b.expired:
        result = {"type": "expired"}
    else:
        reason = (b.errors[0]["message"] if b.errors else None) or "the batch stopped before this request ran"
        result = {
            "type": "errored",
            "error": {"type": "error", "error": {"type": "api_error", "message": reason}},
        }
    return orjson.dumps({"custom_id": t.custom_id, "result": result})


class AnthropicApi:
    def __init__(
        self, registry: Registry, batches: Batches, key_of: Callable[[web.Request], tuple[str, str | None]]
    ) -> None:
        self.registry, self.batches, self.runs = registry, batches, batches.runs
        self._key_of = key_of  # (owner id, viewer: None for an admin key)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post(PATH, self.create),
            web.get(PATH, self.list),
            web.get(PATH + "/{id}", self.get),
            web.post(PATH + "/{id}/cancel", self.cancel),
            web.get(PATH + "/{id}/results", self.results),
        ]

    def _visible(self, request: web.Request) -> BatchRecord:
        return self.batches.visible(request.match_info["id"], self._key_of(request)[1], "anthropic")

    async def _answer(self, request: web.Request, b: BatchRecord) -> web.Response:
        data = batch_object(b, await self.runs.counts(b), str(request.url.origin()))
        return web.Response(body=orjson.dumps(data), content_type="application/json")

    async def create(self, request: web.Request) -> web.Response:
        """The requests parsed in the runs' worker process (`off_loop`), never on the loop."""
        data = await body_limits.read(request)
        status, lines = await self.runs.off_loop.run(parsed_lines, data)
        if isinstance(lines, str):
            raise ServiceRequestError(status, lines)
        made = functools.partial(bytes, lines)
        b = await self.batches.create_inline(self._key_of(request)[0], "anthropic", made)
        return await self._answer(request, b)

    async def get(self, request: web.Request) -> web.Response:
        return await self._answer(request, self._visible(request))

    async def cancel(self, request: web.Request) -> web.Response:
        b = self._visible(request)
        if b.status not in ENDED:
            b = self.runs.cancel(b)
        return await self._answer(request, b)

    async def list(self, request: web.Request) -> web.Response:
        q = request.query
        limit = query_int(q.get("limit"), "limit", DEFAULT_LIMIT, MAX_LIMIT)
        found, more = self.registry.list_batches(
            "anthropic", self._key_of(request)[1], limit, after=q.get("after_id"), before=q.get("before_id")
        )
        origin = str(request.url.origin())
        data = [batch_object(b, await self.runs.counts(b), origin) for b in found]
        page = {"data": data, "has_more": more, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None}  # fmt: skip
        return web.Response(body=orjson.dumps(page), content_type="application/json")

    async def results(self, request: web.Request) -> web.StreamResponse:
        b = self._visible(request)
        if b.status not in ENDED:
            raise ServiceRequestError(
                400, f"Message batch '{b.id}' has not ended yet; its results are not ready."
            )
        response = web.StreamResponse(headers={"Content-Type": "application/x-jsonl"})
        await response.prepare(request)
        async for t in self.runs.parts.store.iter_results(b.job_id, ordered=True):
            await response.write(result_line(t, b) + b"\n")
        await response.write_eof()
        return response
