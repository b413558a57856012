"""OpenAI's object shapes as the service answers them: file and batch objects, list pages, error
bodies, and the lines of a batch's output and error files."""

from __future__ import annotations

import secrets
from typing import Any

import orjson

from batchgate.errors import ServiceRequestError
from batchgate.server.registry import BatchRecord, FileRecord

ENDPOINT = "/v1/chat/completions"
WINDOW = "24h"
WINDOW_S = 24 * 3600
TIME_FIELDS = (
    "in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at",
    "cancelled_at",
)  # fmt: skip
_LINE_KEYS = ("id", "custom_id", "response", "error")


def new_id(prefix: str) -> str:
    """`file-…` / `batch_…`: 24 random hex digits after the prefix."""
    return prefix + secrets.token_hex(12)


def error_body(status: int, message: str, type: str, code: str | None, param: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type, "param": param, "code": code}})


def not_found(kind: str, object_id: str) -> ServiceRequestError:
    """The same answer for an id that does not exist and one that belongs to another key."""
    return ServiceRequestError(404, f"No {kind} found with id '{object_id}'.", code="not_found")


def file_object(f: FileRecord) -> dict[str, Any]:
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


def batch_object(b: BatchRecord, counts: dict[str, int]) -> dict[str, Any]:
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
        **{k: b.times.get(k) for k in TIME_FIELDS},
        "request_counts": counts,
        "metadata": b.metadata,
    }


def page(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
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
    line: dict[str, Any] = {}
    if stored:
        parsed = orjson.loads(stored)
        if isinstance(parsed, dict):
            line = {k: parsed.get(k) for k in _LINE_KEYS}
    if not line:  # a failed task without a stored line: its error text
        line = {"id": None, "response": None, "error": {"code": "failed", "message": error or "failed"}}
    line["custom_id"] = custom_id
    return orjson.dumps({k: line.get(k) for k in _LINE_KEYS})
