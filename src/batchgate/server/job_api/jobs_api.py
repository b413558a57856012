"""The native job API under `/v1/jobs` (bearer keys and per-key isolation as for batches; errors
in the same `{"error": {...}}` shape, `param` naming the field):

    POST /v1/jobs                   create from `input_file_id` or inline `requests` (201)
    GET  /v1/jobs                   filter by `state`, `name`, `priority`, `metadata=key=value`;
                                    `limit`, `after` (cursor: the last id of the previous page)
    GET  /v1/jobs/{id}              the job with progress, ETA, cost and per-provider figures
    POST /v1/jobs/{id}/cancel       /pause  /resume  /retry (the failed items)
    GET  /v1/jobs/{id}/results      the finished items so far, streamed as JSONL
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import orjson
from aiohttp import web

from batchgate.config.job_spec import PRIORITIES, JobSpec
from batchgate.server.door.job_fields import bad, checked_metadata
from batchgate.server.door.query import query_int
from batchgate.server.door.request_body import json_object
from batchgate.server.job_api.job_table import STATES, JobFilter, status_of
from batchgate.server.job_api.job_view import (
    FINISHED,
    ProviderFigures,
    figures,
    job_counts,
    job_object,
    result_line,
)
from batchgate.server.job_api.native import Jobs, conflict
from batchgate.server.tenancy.registry import BatchRecord

PATH = "/v1/jobs"
DEFAULT_LIMIT, MAX_LIMIT = 20, 100
CANCELLABLE = ("scheduled", "validating", "in_progress", "paused", "cancelling")
KeyOf = Callable[[web.Request], tuple[str, str | None]]


def _json(data: Mapping[str, object], status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


class JobsApi:
    def __init__(self, jobs: Jobs, key_of: KeyOf) -> None:
        self.jobs = jobs
        self._key_of = key_of  # (owner id, viewer: None for an admin key)
        self._providers = ProviderFigures()

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post(PATH, self.create),
            web.get(PATH, self.list),
            web.get(PATH + "/{id}", self.get),
            web.post(PATH + "/{id}/cancel", self.cancel),
            web.post(PATH + "/{id}/pause", self.pause),
            web.post(PATH + "/{id}/resume", self.resume),
            web.post(PATH + "/{id}/retry", self.retry),
            web.get(PATH + "/{id}/results", self.results),
        ]

    def _job(self, request: web.Request) -> tuple[BatchRecord, JobSpec]:
        return self.jobs.job(request.match_info["id"], self._key_of(request)[1])

    async def _answer(
        self, b: BatchRecord, spec: JobSpec, status: int = 200, **extra: object
    ) -> web.Response:
        return _json({**job_object(b, spec, await job_counts(self.jobs.parts.store, b)), **extra}, status)

    async def create(self, request: web.Request) -> web.Response:
        body = await json_object(request, lambda message: bad("body", message))
        owner, viewer = self._key_of(request)
        b, spec = await self.jobs.create_job(owner, viewer, body)
        return await self._answer(b, spec, 201)

    async def get(self, request: web.Request) -> web.Response:
        b, spec = self._job(request)
        engine = self.jobs.runs.engine(b.id)
        extra = await figures(self.jobs.parts.store, b, engine, self.jobs.parts.clock.wall(), self._providers)
        return await self._answer(b, spec, **extra)

    async def list(self, request: web.Request) -> web.Response:
        f, limit, after = _query(request, self._key_of(request)[1])
        found, more = self.jobs.table.page(f, limit, after)
        counts = [await job_counts(self.jobs.parts.store, b, self.jobs.runs.running(b.id)) for b, _ in found]
        data = [job_object(b, spec, c) for (b, spec), c in zip(found, counts, strict=True)]
        return _json({
            "object": "list", "data": data, "has_more": more,
            "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None,
        })  # fmt: skip

    async def cancel(self, request: web.Request) -> web.Response:
        b, spec = self._job(request)
        if b.status not in CANCELLABLE:
            raise conflict(b, "cancel")
        return await self._answer(self.jobs.runs.cancel(b), spec)

    async def pause(self, request: web.Request) -> web.Response:
        b, spec = self._job(request)
        return await self._answer(self.jobs.pause(b), spec)

    async def resume(self, request: web.Request) -> web.Response:
        b, spec = self._job(request)
        return await self._answer(await self.jobs.resume(b, spec), spec)

    async def retry(self, request: web.Request) -> web.Response:
        b, spec = self._job(request)
        b, requeued = await self.jobs.retry(b)
        return await self._answer(b, spec, requeued=requeued)

    async def results(self, request: web.Request) -> web.StreamResponse:
        b, _ = self._job(request)
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        if await self.jobs.parts.store.get_job(b.job_id) is not None:
            async for t in self.jobs.parts.store.iter_results(b.job_id, ordered=True, states=FINISHED):
                await response.write(result_line(t) + b"\n")
        await response.write_eof()
        return response


def _query(request: web.Request, owner: str | None) -> tuple[JobFilter, int, str | None]:
    q = request.query
    states = tuple(q.getall("state", []))
    for s in states:
        if s not in STATES:
            raise bad("state", f"expected one of {', '.join(STATES)}; got {s!r}")
    priority = q.get("priority")
    if priority is not None and priority not in PRIORITIES:
        raise bad("priority", f"expected one of {', '.join(PRIORITIES)}; got {priority!r}")
    pairs = []
    for item in q.getall("metadata", []):
        key, sep, value = item.partition("=")
        if not sep:
            raise bad("metadata", f"expected key=value; got {item!r}")
        pairs.append((key, value))
    checked_metadata(dict(pairs))  # the same bounds as a job's own metadata
    f = JobFilter(owner, tuple(status_of(s) for s in states), q.get("name"), priority, tuple(pairs))
    return f, query_int(q.get("limit"), "limit", DEFAULT_LIMIT, MAX_LIMIT), q.get("after") or None
