"""The emulated Batch APIs as a whole: routes of every provider (OpenAI files + batches, Anthropic
Message Batches), authentication and error answers in the family's shape, the per-provider counters
for the operator stats, and the HTTP helpers the two batch API modules share.

`Emulator` owns one `BatchService`: `register(app, runtimes)` adds the routes (before the catch-all),
`stats(name)` feeds `/_emulator/stats`, `reset()` zeroes the counters; timers are dropped on cleanup.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson
from aiohttp import web

from batchgate.clock import Clock
from batchgate.emulator.batch_core import BatchProvider
from batchgate.emulator.provider import ProviderRuntime
from batchgate.emulator.wire import ApiError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Route = tuple[str, str, Handler]
_JSON = "application/json"
_CHUNK = 1 << 16


class BatchAPI(Protocol):
    def routes(self) -> Iterable[Route]: ...


class BatchService:
    """Every emulated provider's Batch API."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.providers: dict[str, BatchProvider] = {}
        self._seq = itertools.count(1)

    def next_id(self) -> int:
        return next(self._seq)

    def register(self, app: web.Application, runtimes: Mapping[str, ProviderRuntime]) -> None:
        """Add the batch routes of every provider (call before any catch-all route)."""
        from batchgate.emulator.batch_anthropic import AnthropicBatchAPI  # noqa: PLC0415 — they import this module
        from batchgate.emulator.batch_openai import OpenAIBatchAPI  # noqa: PLC0415 — they import this module

        for rt in runtimes.values():
            bp = BatchProvider(rt, self._clock)
            self.providers[rt.name] = bp
            api: BatchAPI = (
                OpenAIBatchAPI(bp, self.next_id)
                if rt.family.name == "openai"
                else AnthropicBatchAPI(bp, self.next_id)
            )
            for method, path, handler in api.routes():
                app.router.add_route(method, f"/{rt.name}{path}", self._wrap(bp, handler))
        app.on_cleanup.append(self._cleanup)

    def _wrap(self, bp: BatchProvider, handler: Handler) -> Handler:
        family = bp.family

        async def handle(request: web.Request) -> web.StreamResponse:
            rid = f"req_{next(self._seq):024x}"
            try:
                family.authenticate(request.headers, bp.runtime.config.api_key)
                response = await handler(request)
            except ApiError as err:
                if err.status == 429:
                    bp.stats.refused += 1
                else:
                    bp.stats.rejected += 1
                response = web.Response(
                    status=err.status, body=family.error_body(err, rid), content_type=_JSON
                )
                response.headers.update(err.headers)
            response.headers[family.request_id_header] = rid
            return response

        return handle

    def stats(self, name: str) -> dict[str, Any]:
        bp = self.providers.get(name)
        if bp is None:
            return {}
        out: dict[str, Any] = bp.stats.to_dict()
        out["enqueued_tokens"] = bp.enqueued_tokens
        return out

    def reset(self) -> None:
        """Zero the counters (batches in flight carry on)."""
        for bp in self.providers.values():
            bp.stats.reset()

    async def _cleanup(self, app: web.Application) -> None:
        for bp in self.providers.values():
            bp.close()


# -- helpers shared by the two batch API modules -------------------------------------------------


def json_response(obj: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(obj), content_type=_JSON)


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
