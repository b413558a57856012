"""The web dashboard: its page and static files at `/` and `/static/...` (public: they hold no
data), and the JSON it polls under `/v1/dashboard/` (behind the client-key auth, each key seeing
its own jobs as in `/v1/jobs`; an admin key sees all):

    GET /v1/dashboard/jobs          every job of the key — native jobs (`submit` too) and the batches
                                    made with the OpenAI or Anthropic SDKs (`kind`) — with progress,
                                    priority, ETA, cost and state
    GET /v1/dashboard/jobs/{id}     one job's page data (`web.job_page`) with its job object
    GET /v1/dashboard/providers     the shared gateway's quota samples (`quota_ring`)

Cancel is the job API's `POST /v1/jobs/{id}/cancel` (a batch's own API for a batch: each row's
`cancel_path`). No provider key is on any of them. The page and its files may not be framed by
another site (`frame-ancestors 'none'`, `X-Frame-Options: DENY`), and it polls at most 4 times a
second (`?poll=` has a floor of 250 ms).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import orjson
from aiohttp import web

from batchgate.config.job_spec import JobSpec
from batchgate.jobs.store.protocol import JobStore
from batchgate.server.batch_api.shapes import not_found
from batchgate.server.job_api.job_table import JobFilter
from batchgate.server.job_api.job_view import (
    JobObject,
    JobProgress,
    JobProviderFigures,
    ProviderFigures,
    Tokens,
    figures,
    job_counts,
    job_object,
)
from batchgate.server.job_api.native import Jobs
from batchgate.server.tenancy.registry import BatchRecord
from batchgate.server.views.quota_ring import QuotaRing
from batchgate.web.assets import asset_names, content_type
from batchgate.web.job_page import page_data

PATH = "/v1/dashboard"
JOBS_PATH = "/v1/jobs/{id}/cancel"
CANCEL_PATHS = {"openai": "/v1/batches/{id}/cancel", "anthropic": "/v1/messages/batches/{id}/cancel"}
LISTED = 100  # the newest jobs the list shows
KeyOf = Callable[[web.Request], tuple[str, str | None]]
_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


class JobRow(JobObject):
    """A row of the dashboard's job list: the job object, its figures but no providers, its kind."""

    progress: JobProgress
    cost_usd: float
    tokens: Tokens
    kind: str
    cancel_path: str


def _json(data: Mapping[str, object]) -> web.Response:
    return web.Response(body=orjson.dumps(data), content_type="application/json", headers=_HEADERS)


class Dashboard:
    def __init__(self, jobs: Jobs, key_of: KeyOf, ring: QuotaRing | None) -> None:
        self.jobs, self._key_of, self._ring = jobs, key_of, ring
        self._assets = asset_names()

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.index),
            web.get("/static/{name:.+}", self.static),
            web.get(PATH + "/jobs", self.list),
            web.get(PATH + "/jobs/{id}", self.job),
            web.get(PATH + "/providers", self.providers),
        ]

    async def index(self, request: web.Request) -> web.Response:
        return self._file("index.html")

    async def static(self, request: web.Request) -> web.Response:
        return self._file(request.match_info["name"])

    def _file(self, name: str) -> web.Response:
        found = self._assets.get(name)
        if found is None:
            raise web.HTTPNotFound()
        csp = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:"
        csp += "; frame-ancestors 'none'"  # never framed by another site (nor by X-Frame-Options)
        headers = {**_HEADERS, "Content-Security-Policy": csp, "X-Frame-Options": "DENY"}
        return web.Response(body=found.read_bytes(), content_type=content_type(name), headers=headers)

    async def list(self, request: web.Request) -> web.Response:
        viewer = self._key_of(request)[1]
        found, _ = self.jobs.table.page(JobFilter(owner=viewer), LISTED, None)
        for kind in CANCEL_PATHS:  # the SDKs' batches are jobs of the key too
            batches, _ = self.jobs.parts.registry.list_batches(kind, viewer, LISTED)
            found += [(b, batch_spec(b)) for b in batches]
        found.sort(key=lambda row: row[0].created_at, reverse=True)  # stable: newest first
        data = [await self._row(b, spec_object) for b, spec_object in found[:LISTED]]
        return _json({"object": "list", "data": data})

    async def _row(self, b: BatchRecord, spec: JobSpec) -> JobRow:
        store: JobStore = self.jobs.parts.store
        extra = await figures(
            store, b, self.jobs.runs.engine(b.id), self.jobs.parts.clock.wall(), _NoProviders()
        )
        return {
            **job_object(b, spec, await job_counts(store, b)),
            "progress": extra["progress"],
            "cost_usd": extra["cost_usd"],
            "tokens": extra["tokens"],  # not its providers: the list shows none
            "kind": b.kind,
            "cancel_path": CANCEL_PATHS.get(b.kind, JOBS_PATH).format(id=b.id),
        }

    def _visible(self, job_id: str, owner: str | None) -> tuple[BatchRecord, JobSpec]:
        """A native job or a batch, if `owner` may see it (None: an admin key); a 404 otherwise."""
        b = self.jobs.parts.registry.get_batch(job_id)
        if b is None or (owner is not None and b.owner != owner):
            raise not_found("job", job_id)
        return (b, batch_spec(b)) if b.kind in CANCEL_PATHS else self.jobs.job(job_id, owner)

    async def job(self, request: web.Request) -> web.Response:
        b, spec = self._visible(request.match_info["id"], self._key_of(request)[1])
        row = await self._row(b, spec)
        record = await self.jobs.parts.store.get_job(b.job_id)
        page = await page_data(self.jobs.parts.store, record, row["state"]) if record is not None else None
        return _json({"job": row, "page": page})

    async def providers(self, request: web.Request) -> web.Response:
        self._key_of(request)  # the key is checked by the auth middleware; any key may look
        return _json(self._ring.view() if self._ring is not None else {"every_s": 0, "samples": []})


class _NoProviders(ProviderFigures):
    """The list leaves out the per-provider figures (a scan of each job's items)."""

    async def of(self, store: JobStore, job_id: str, done: int) -> dict[str, JobProviderFigures]:
        return {}


def batch_spec(b: BatchRecord) -> JobSpec:
    """A batch seen as a job: normal priority, its metadata (a batch has no other job options)."""
    return JobSpec(metadata=dict(b.metadata or {}))
