"""The emulated Batch APIs as a whole: routes of every provider (OpenAI files + batches, Azure's at
`/openai/files` and `/openai/batches`, Anthropic Message Batches, Gemini's batch mode),
authentication and error answers in the family's shape, the per-provider counters for the operator
stats. The HTTP helpers the batch API modules share are in `http`.

`Emulator` owns one `BatchService`: `register(app, runtimes)` adds the routes (before the catch-all),
`stats(name)` feeds `/_emulator/stats`, `reset()` zeroes the counters; timers are dropped on cleanup.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from aiohttp import web

from batchgate.clock import Clock
from batchgate.emulator.batch.anthropic import AnthropicBatchAPI
from batchgate.emulator.batch.core import BatchProvider
from batchgate.emulator.batch.files import AZURE_ENDPOINTS
from batchgate.emulator.batch.gemini import GeminiBatchAPI
from batchgate.emulator.batch.http import JSON_TYPE, Handler, Route
from batchgate.emulator.batch.openai import OpenAIBatchAPI
from batchgate.emulator.provider import EmulatedProvider
from batchgate.emulator.wire import ApiError


class BatchAPI(Protocol):
    def routes(self) -> Iterable[Route]: ...


def _paths(family: str, path: str) -> tuple[str, ...]:
    """Where a Batch API route is served: as OpenAI names it, or at Azure's `/openai/files`
    (with `api-version`) and `/openai/v1/files` (`emulator.azure_api`)."""
    if family != "azure":
        return (path,)
    rest = path.removeprefix("/v1")
    return (f"/openai{rest}", f"/openai/{{v1:v1}}{rest}")


class BatchService:
    """Every emulated provider's Batch API."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.providers: dict[str, BatchProvider] = {}
        self._seq = itertools.count(1)

    def next_id(self) -> int:
        return next(self._seq)

    def register(self, app: web.Application, runtimes: Mapping[str, EmulatedProvider]) -> None:
        """Add the batch routes of every provider (call before any catch-all route)."""
        for rt in runtimes.values():
            bp = BatchProvider(rt, self._clock)
            self.providers[rt.name] = bp
            if rt.family.name == "bedrock":  # its batch inference reads S3: not played
                continue
            api: BatchAPI
            if rt.family.name == "openai":
                api = OpenAIBatchAPI(bp, self.next_id)
            elif rt.family.name == "azure":
                api = OpenAIBatchAPI(bp, self.next_id, AZURE_ENDPOINTS)
            elif rt.family.name == "gemini":
                api = GeminiBatchAPI(bp, self.next_id)
            else:
                api = AnthropicBatchAPI(bp, self.next_id)
            for method, path, handler in api.routes():
                for served in _paths(rt.family.name, path):
                    app.router.add_route(method, f"/{rt.name}{served}", self._wrap(bp, handler))
        app.on_cleanup.append(self._cleanup)

    def _wrap(self, bp: BatchProvider, handler: Handler) -> Handler:
        family = bp.family

        async def handle(request: web.Request) -> web.StreamResponse:
            rid = f"req_{next(self._seq):024x}"
            try:
                family.route_model(request.match_info, request.query)  # Azure: its api-version
                family.authenticate(request.headers, bp.runtime.config.api_key)
                response = await handler(request)
            except ApiError as err:
                if err.status == 429:
                    bp.stats.refused += 1
                else:
                    bp.stats.rejected += 1
                response = web.Response(
                    status=err.status, body=family.error_body(err, rid), content_type=JSON_TYPE
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
