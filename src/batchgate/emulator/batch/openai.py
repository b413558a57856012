"""The emulated OpenAI Batch API: `POST/GET /v1/batches`, `GET /v1/batches/{id}`,
`POST /v1/batches/{id}/cancel` (the files endpoints are `batch_files`).

Lifecycle: a created batch is `validating` until the next clock tick, then `in_progress` (or
`failed`, with `errors.data` from `batch_files.parse_input`); then `completed`, `expired` (the
window ended: done lines are returned, the rest get `batch_expired`), or `cancelling` → `cancelled`
(done lines are kept, the rest get `batch_cancelled`). A batch names one `endpoint` (chat,
embeddings, responses or completions: shared/PROTOCOLS.md, "one endpoint per batch"); every
line's url must be it, and each line is answered in that endpoint's body shape with its usage. A
line whose body fails the endpoint's validation is answered in the error file with the status and
body the live endpoint gives. Creation is refused
with a 429 (`token_limit_exceeded`) when the batch's prompt tokens would pass the provider's
enqueued-token limit, with a 400 when they alone pass it. Output lines come in a deterministic
shuffled order, as the real files are unordered.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from batchgate.emulator.batch.core import BatchItem, BatchProvider, BatchRun
from batchgate.emulator.batch.files import ENDPOINTS, OpenAIFiles, line_error, parse_input
from batchgate.emulator.batch.http import Route, json_object, json_response, page
from batchgate.emulator.wire import ApiError

WINDOW = "24h"
_LINE_ERRORS = {
    "expired": ("batch_expired", "This request could not be executed before the completion window expired."),
    "cancelled": ("batch_cancelled", "This request was not executed because the batch was cancelled."),
}
_END_STATUS = {"completed": "completed", "expired": "expired", "cancelled": "cancelled"}


def _invalid(message: str, param: str | None = None, code: str | None = None, status: int = 400) -> ApiError:
    return ApiError(status, "invalid_request_error", message, param=param, code=code)


def _create_fields(body: dict[str, Any], endpoints: Mapping[str, str]) -> tuple[str, str, Any]:
    """The input file id, endpoint and metadata of a create request, its window checked."""
    file_id = body.get("input_file_id")
    if not isinstance(file_id, str):
        raise _invalid(
            "Missing required parameter: 'input_file_id'.", "input_file_id", "missing_required_parameter"
        )
    endpoint, window = body.get("endpoint"), body.get("completion_window")
    if not isinstance(endpoint, str) or endpoint not in endpoints:
        supported = ", ".join(f"'{path}'" for path in endpoints)
        raise _invalid(
            f"Invalid value: {endpoint!r}. Supported values are: {supported}.",
            "endpoint",
            "invalid_value",
        )
    if window != WINDOW:
        raise _invalid(
            f"Invalid value: {window!r}. Supported values are: '{WINDOW}'.",
            "completion_window",
            "invalid_value",
        )
    metadata = body.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())
    ):
        raise _invalid("Invalid 'metadata': expected an object of strings.", "metadata", "invalid_type")
    return file_id, endpoint, metadata


@dataclass(slots=True)
class OpenAIBatch:
    id: str
    endpoint: str
    input_file_id: str
    metadata: dict[str, Any] | None
    created_at: int
    expires_at: int
    model: str | None
    total: int
    errors: list[dict[str, Any]] | None = None  # validation errors: the batch fails
    run: BatchRun | None = None
    validated: bool = False
    times: dict[str, int | None] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None

    @property
    def status(self) -> str:
        run = self.run
        if run is not None:
            if run.end_reason is not None:
                return _END_STATUS[run.end_reason]
            if run.status == "cancelling":
                return "cancelling"
        if not self.validated:
            return "validating"
        return "failed" if run is None else "in_progress"

    def to_dict(self) -> dict[str, Any]:
        run = self.run
        completed = failed = 0
        prompt = completion = 0
        if run is not None:
            completed, prompt, completion = run.succeeded, run.prompt_tokens, run.completion_tokens
            failed = run.errored + (run.total - run.done if run.ended else 0)
        times = {
            k: self.times.get(k)
            for k in (
                "in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at",
                "cancelling_at", "cancelled_at",
            )
        }  # fmt: skip
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "model": self.model,
            "errors": None if self.errors is None else {"object": "list", "data": self.errors},
            "input_file_id": self.input_file_id,
            "completion_window": WINDOW,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            **times,
            "request_counts": {"total": self.total, "completed": completed, "failed": failed},
            "usage": {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + completion,
            },
            "metadata": self.metadata,
        }


class OpenAIBatchAPI:
    """The files and batches endpoints of one OpenAI-family provider."""

    def __init__(
        self, bp: BatchProvider, next_id: Callable[[], int], endpoints: Mapping[str, str] = ENDPOINTS
    ) -> None:
        self.bp = bp
        self._next_id = next_id
        self._endpoints = endpoints  # a batch's `endpoint` → its name (Azure's lack `/v1`)
        self.files = OpenAIFiles(bp, next_id)

    def routes(self) -> Iterable[Route]:
        return (
            *self.files.routes(),
            ("POST", "/v1/batches", self.create),
            ("GET", "/v1/batches", self.list_batches),
            ("GET", "/v1/batches/{batch_id}", self.get_batch),
            ("POST", "/v1/batches/{batch_id}/cancel", self.cancel),
        )

    def _wall(self) -> int:
        return int(self.bp.clock.wall())

    # -- batches ---------------------------------------------------------------------------------

    async def create(self, request: web.Request) -> web.StreamResponse:
        body = json_object(
            await request.read(),
            _invalid("We could not parse the JSON body of your request."),
            _invalid("The request body must be a JSON object."),
        )
        file_id, endpoint, metadata = _create_fields(body, self._endpoints)
        stored = self.bp.files.get(file_id)
        if stored is None:
            raise _invalid(f"No such File object: {file_id}", "input_file_id", status=404)
        items, errors, model = parse_input(stored.data, self.bp, endpoint, self._endpoints)
        if self.bp.config.fail_validation:
            errors.append(line_error("invalid_file", "The batch input file failed validation.", None, None))
        now, wall = self.bp.clock.now(), self._wall()
        batch_id = f"batch_{self._next_id():024x}"
        window_end = wall + int(self.bp.window_seconds)
        record = OpenAIBatch(
            batch_id, endpoint, file_id, metadata, wall, window_end, model, 0 if errors else len(items)
        )
        if errors:
            record.errors = errors
        else:
            self._enqueue(items, model)
            record.run = self.bp.start_run(items, batch_id, lambda run: self._ended(record, run))
        self.bp.batches[batch_id] = record
        self.bp.stats.created += 1
        self.bp.clock.call_at(now, lambda: self._validated(record))
        return json_response(record.to_dict())

    def _enqueue(self, items: list[BatchItem], model: str | None) -> None:
        """Charge the batch's prompt tokens to the enqueued-token limit, or refuse it."""
        tokens = sum(item.request.prompt_tokens for item in items if item.request is not None)
        limit = self.bp.config.enqueued_token_limit
        if limit is not None and tokens > limit:
            raise _invalid(
                f"This batch holds {tokens} prompt tokens, more than the whole enqueued token limit "
                f"of {limit}; split it into smaller batches.",
                None,
                "token_limit_exceeded",
            )
        if not self.bp.reserve(tokens):
            raise ApiError(
                429,
                "invalid_request_error",
                f"Enqueued token limit reached for {model} in organization org-emulator. Limit: {limit} "
                f"enqueued tokens, {self.bp.enqueued_tokens} in use. Please try again once some "
                "in_progress batches have been completed.",
                code="token_limit_exceeded",
            )

    def _validated(self, record: OpenAIBatch) -> None:
        record.validated = True
        if record.run is None:
            record.times["failed_at"] = self._wall()
            self.bp.stats.failed += 1
        else:
            record.times["in_progress_at"] = record.created_at

    def _ended(self, record: OpenAIBatch, run: BatchRun) -> None:
        wall = int(run.ended_wall if run.ended_wall is not None else self.bp.clock.wall())
        reason = run.end_reason or "completed"
        record.times[f"{reason}_at"] = wall
        if reason != "cancelled":
            record.times["finalizing_at"] = wall
        out: list[bytes] = []
        err: list[bytes] = []
        tag = record.id[-12:]
        order = list(range(run.total))
        random.Random(record.id).shuffle(order)
        for i in order:
            item = run.items[i]
            head = b'{"id":"batch_req_%s%06x","custom_id":%s,' % (
                tag.encode(),
                i,
                orjson.dumps(item.custom_id),
            )
            rid = b'"req_%s%012x"' % (tag.encode(), i)
            if item.outcome == "succeeded" and item.body is not None:
                resp = b'"response":{"status_code":200,"request_id":%s,"body":%s},"error":null}' % (
                    rid,
                    item.body,
                )
                out.append(head + resp)
            elif item.outcome == "errored" and item.error is not None:
                e = item.error
                body = {"error": {"message": e.message, "type": e.etype, "param": e.param, "code": e.code}}
                response = {"status_code": e.status, "request_id": rid[1:-1].decode(), "body": body}
                err.append(head + b'"response":%s,"error":null}' % orjson.dumps(response))
            elif item.outcome in _LINE_ERRORS:
                code, message = _LINE_ERRORS[item.outcome]
                err.append(
                    head + b'"response":null,"error":%s}' % orjson.dumps({"code": code, "message": message})
                )
        record.output_file_id = self.files.store(record.id, "output", out)
        record.error_file_id = self.files.store(record.id, "error", err)

    def _batch(self, request: web.Request) -> OpenAIBatch:
        batch_id = request.match_info["batch_id"]
        record: OpenAIBatch | None = self.bp.batches.get(batch_id)
        if record is None:
            raise _invalid(f"No batch found with id '{batch_id}'.", "batch_id", status=404)
        if record.run is not None:
            record.run.advance(self.bp.clock.now())
        return record

    async def get_batch(self, request: web.Request) -> web.StreamResponse:
        return json_response(self._batch(request).to_dict())

    async def list_batches(self, request: web.Request) -> web.StreamResponse:
        ids, has_more = page(list(self.bp.batches), request, "after")
        now = self.bp.clock.now()
        data = []
        for batch_id in ids:
            record: OpenAIBatch = self.bp.batches[batch_id]
            if record.run is not None:
                record.run.advance(now)
            data.append(record.to_dict())
        return json_response(
            {
                "object": "list",
                "data": data,
                "first_id": ids[0] if ids else None,
                "last_id": ids[-1] if ids else None,
                "has_more": has_more,
            }
        )

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        record = self._batch(request)
        run = record.run
        if run is None or run.status != "in_progress":
            raise _invalid(f"Cannot cancel a batch with status '{record.status}'.")
        run.cancel(self.bp.clock.now())
        record.times["cancelling_at"] = self._wall()
        return json_response(record.to_dict())
