"""`GET /metrics` on `batchgate serve`: Prometheus' text format, on the API's own port and loop. Without
a key it holds nothing secret and no tenant's ids: the shared gateway's figures per provider, the
callbacks' counts and the process's. Scraped with an admin key (`Authorization: Bearer <admin key>`,
Prometheus' `authorization` setting) it adds the job families, each job the server shows by its id
and priority (`watch`); a client key scrapes what a keyless scrape does, and a key that is not one
is a 401. The names
are `observe.metrics`'; the collector reads the figures at scrape time, so a scrape costs one
`statistics()` of the gateway and nothing when nobody scrapes.

`prometheus_client` is the `metrics` extra, imported at the first scrape: without it the route
answers a 501 naming the extra, and the server runs on.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from aiohttp import web

from batchgate.errors import ServiceRequestError
from batchgate.observe.server_view import JobView, ServerView
from batchgate.server.batch_api.runs import Runs
from batchgate.server.tenancy.keys import authenticate

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

PATH = "/metrics"
MAX_QUEUED_SHOWN = 50  # jobs waiting for a place shown one by one (the label set stays bounded)
MISSING = "Prometheus metrics need the 'metrics' extra: pip install 'batchgate[metrics]'."


def server_view(runs: Runs, *, with_jobs: bool = True) -> ServerView:
    """The figures of the server now; `with_jobs` False leaves out the jobs (and their ids)."""
    watch = runs.watch
    shown = {  # by job id, the latest state winning (a retried job queued again: queued)
        run.job_id: JobView(run.job_id, run.priority, run.progress, runs.engine(run.job_id) is not None)
        for run in (*watch.finished, *watch.running.values())
    }
    for b in runs.queued()[:MAX_QUEUED_SHOWN]:
        shown[b] = JobView(b, runs.priority(b), None, False)
    deliveries: dict[str, int] = {}
    pending = 0
    callbacks = runs.parts.callbacks
    if callbacks is not None:
        f = callbacks.figures()
        deliveries = {"delivered": f.delivered, "failed_attempt": f.failed_attempts, "given_up": f.given_up}
        pending = f.pending
    stats = runs.parts.gateway.statistics()
    shown_jobs = list(shown.values()) if with_jobs else []
    return ServerView(stats, watch.cost_by_provider(), shown_jobs, deliveries, pending)


class MetricsRoute:
    def __init__(self, runs: Runs) -> None:
        self.runs = runs
        self._registries: dict[bool, CollectorRegistry] = {}  # by whether it shows the jobs

    def routes(self) -> list[web.RouteDef]:
        return [web.get(PATH, self.metrics)]

    async def metrics(self, request: web.Request) -> web.Response:
        try:
            from batchgate.observe import metrics  # noqa: PLC0415 — optional extra
        except ImportError:
            raise ServiceRequestError(501, MISSING, type="server_error", code="metrics_unavailable") from None
        admin = self._admin(request)
        registry = self._registries.get(admin)
        if registry is None:
            view = functools.partial(server_view, self.runs, with_jobs=admin)
            registry = self._registries[admin] = metrics.server_registry(view)
        body = metrics.exposition(registry)
        return web.Response(body=body, headers={"Content-Type": metrics.CONTENT_TYPE})

    def _admin(self, request: web.Request) -> bool:
        """Whether the scrape carries an admin key (a 401 for a key that is none of the server's)."""
        headers = request.headers
        given = headers.get("Authorization"), headers.get("x-api-key")
        if given == (None, None):
            return False
        key = authenticate(self.runs.parts.registry, *given)
        if key is None:
            raise ServiceRequestError(401, "Incorrect API key for /metrics.", code="invalid_api_key")
        return key.admin
