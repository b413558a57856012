"""HTTP helpers the emulated Batch API modules share: route tuples, JSON answers, bounded body
reads, list paging and Anthropic's timestamps."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web

from batchgate.emulator.wire import ApiError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Route = tuple[str, str, Handler]
JSON_TYPE = "application/json"
_CHUNK = 1 << 16


def json_response(obj: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(obj), content_type=JSON_TYPE)


async def read_limited(request: web.Request, limit: int) -> bytes | None:
    """The whole body, or None when it is larger than `limit` (the rest is drained, not kept)."""
    length = request.content_length
    buf = bytearray()
    too_large = length is not None and length > limit
    async for chunk in request.content.iter_chunked(_CHUNK):
        if too_large:
            continue
        buf += chunk
        if len(buf) > limit:
            too_large = True
            buf.clear()
    return None if too_large else bytes(buf)


def json_object(raw: bytes, bad_json: ApiError, not_object: ApiError) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_json from None
    if not isinstance(body, dict):
        raise not_object
    return body


def rfc3339_exact(epoch_seconds: float) -> str:
    """`2024-01-01T00:00:00.123456Z` (Anthropic's timestamps)."""
    return datetime.fromtimestamp(epoch_seconds, UTC).isoformat().replace("+00:00", "Z")


def query_limit(request: web.Request, default: int = 20, maximum: int = 100) -> int:
    raw = request.query.get("limit")
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "invalid_request_error", f"limit must be an integer, got {raw!r}") from None
    if not 1 <= value <= maximum:
        raise ApiError(400, "invalid_request_error", f"limit must be between 1 and {maximum}, got {value}")
    return value


def page(ids: list[str], request: web.Request, after_key: str) -> tuple[list[str], bool]:
    """Newest-first ids after the cursor named by query parameter `after_key`, and has_more."""
    newest = list(reversed(ids))
    after = request.query.get(after_key)
    if after is not None and after in newest:
        newest = newest[newest.index(after) + 1 :]
    limit = query_limit(request)
    return newest[:limit], len(newest) > limit
