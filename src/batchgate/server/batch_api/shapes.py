"""OpenAI's object shapes as the service answers them: file and batch objects, list pages, error
bodies, and the lines of a batch's output and error files."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from typing import Literal, TypedDict

import orjson

from batchgate.endpoints import PATHS
from batchgate.errors import ServiceRequestError
from batchgate.server.door.job_fields import checked_metadata
from batchgate.server.tenancy.registry import BatchError, BatchRecord, FileRecord

ENDPOINT = "/v1/chat/completions"  # of Anthropic's batches and native jobs (any endpoint)
ENDPOINTS = tuple(PATHS.values())  # what an OpenAI batch may name (one a batch: PROTOCOLS.md)
WINDOW = "24h"
WINDOW_S = 24 * 3600
TIME_FIELDS = (
    "in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at",
    "cancelled_at",
)  # fmt: skip
_LINE_KEYS = ("id", "custom_id", "response", "error")


class FileObject(TypedDict):
    id: str
    object: Literal["file"]
    bytes: int
    created_at: int
    filename: str
    purpose: str
    status: Literal["processed"]
    status_details: None
    expires_at: None


class ErrorList(TypedDict):
    object: Literal["list"]
    data: list[BatchError]


class Usage(TypedDict):
    input_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens: int
    output_tokens_details: dict[str, int]
    total_tokens: int


class BatchObject(TypedDict):
    """OpenAI's batch object, as `batch_object` makes it (the times: `TIME_FIELDS`)."""

    id: str
    object: Literal["batch"]
    endpoint: str
    errors: ErrorList | None
    input_file_id: str
    completion_window: str
    status: str
    output_file_id: str | None
    error_file_id: str | None
    created_at: int
    expires_at: int
    in_progress_at: int | None
    finalizing_at: int | None
    completed_at: int | None
    failed_at: int | None
    expired_at: int | None
    cancelling_at: int | None
    cancelled_at: int | None
    request_counts: dict[str, int]
    usage: Usage
    metadata: dict[str, str] | None


class Page(TypedDict):
    object: Literal["list"]
    data: Sequence[FileObject] | Sequence[BatchObject]
    first_id: str | None
    last_id: str | None
    has_more: bool


def new_id(prefix: str) -> str:
    """`file-…` / `batch_…`: 24 random hex digits after the prefix."""
    return prefix + secrets.token_hex(12)


def derived_id(prefix: str, *parts: str) -> str:
    """An id of the same shape fixed by `parts` (a batch's output file: the same id however many
    times a restarted server writes it)."""
    return prefix + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def error_body(status: int, message: str, type: str, code: str | None, param: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type, "param": param, "code": code}})


def not_found(kind: str, object_id: str) -> ServiceRequestError:
    """The same answer for an id that does not exist and one that belongs to another key."""
    return ServiceRequestError(404, f"No {kind} found with id '{object_id}'.", code="not_found")


def file_object(f: FileRecord) -> FileObject:
    return {
        "id": f.id,
        "object": "file",
        "bytes": f.bytes,
        "created_at": f.created_at,
        "filename": f.filename,
        "purpose": f.purpose,
        "status": "processed",
        "status_details": None,
        "expires_at": None,
    }


def batch_object(b: BatchRecord, counts: dict[str, int], tokens: tuple[int, int] = (0, 0)) -> BatchObject:
    """OpenAI's batch object; `tokens`: the prompt and completion tokens of its answers so far."""
    if b.status in ("cancelled", "expired"):  # the requests its end left out count as failed
        counts = {**counts, "failed": counts["total"] - counts["completed"]}
    return {
        "id": b.id,
        "object": "batch",
        "endpoint": b.endpoint,
        "errors": None if b.errors is None else {"object": "list", "data": b.errors},
        "input_file_id": b.input_file_id,
        "completion_window": b.completion_window,
        "status": b.status,
        "output_file_id": b.output_file_id,
        "error_file_id": b.error_file_id,
        "created_at": b.created_at,
        "expires_at": b.created_at + WINDOW_S,
        "in_progress_at": b.times.get("in_progress_at"),
        "finalizing_at": b.times.get("finalizing_at"),
        "completed_at": b.times.get("completed_at"),
        "failed_at": b.times.get("failed_at"),
        "expired_at": b.times.get("expired_at"),
        "cancelling_at": b.times.get("cancelling_at"),
        "cancelled_at": b.times.get("cancelled_at"),
        "request_counts": counts,
        "usage": {
            "input_tokens": tokens[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": tokens[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens[0] + tokens[1],
        },
        "metadata": b.metadata,
    }


def page(data: Sequence[FileObject] | Sequence[BatchObject], has_more: bool) -> Page:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }


def output_line(stored: bytes | None, custom_id: str, error: str | None) -> bytes:
    """A task's stored OUT line in OpenAI's batch output line shape (batchgate's own fields,
    such as the provider and attempts, stay in the job's report)."""
    line: dict[str, object] = {}
    if stored:
        parsed = orjson.loads(stored)
        if isinstance(parsed, dict):
            line = {k: parsed.get(k) for k in _LINE_KEYS}
    if not line:  # a failed task without a stored line: its error text
        line = {"id": None, "response": None, "error": {"code": "failed", "message": error or "failed"}}
    line["custom_id"] = custom_id
    return orjson.dumps({k: line.get(k) for k in _LINE_KEYS})


_UNSENT = {
    "cancelled": "This request was not executed because the batch was cancelled.",
    "expired": "This request could not be executed before the completion window expired.",
    "stopped": "This request was not executed because the batch stopped.",
}


def unsent_line(custom_id: str, why: str) -> bytes:
    """The error line of a request the batch's end (`cancelled`, `expired`, `stopped`) left out."""
    error = {"code": f"batch_{why}", "message": _UNSENT[why]}
    return orjson.dumps({"id": None, "custom_id": custom_id, "response": None, "error": error})


def create_fields(body: Mapping[str, object]) -> tuple[str, str, dict[str, str] | None]:
    """The input file id, endpoint and metadata of a create request, its window checked."""
    file_id = body.get("input_file_id")
    if not isinstance(file_id, str) or not file_id:
        raise ServiceRequestError(
            400,
            "Missing required parameter: 'input_file_id'.",
            param="input_file_id",
            code="missing_required_parameter",
        )
    for key, allowed in (("endpoint", ENDPOINTS), ("completion_window", (WINDOW,))):
        if body.get(key) not in allowed:  # a value of any JSON type: compared, never hashed
            supported = ", ".join(f"'{value}'" for value in allowed)
            raise ServiceRequestError(
                400,
                f"Invalid value for '{key}': {body.get(key)!r}. Supported values are: {supported}.",
                param=key,
                code="invalid_value",
            )
    endpoint, metadata = body["endpoint"], body.get("metadata")
    assert isinstance(endpoint, str)  # one of ENDPOINTS: checked above
    return file_id, endpoint, None if metadata is None else checked_metadata(metadata)
