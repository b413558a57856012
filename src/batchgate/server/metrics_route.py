"""`GET /metrics` on `batchgate serve`: Prometheus' text format, on the API's own port and loop, with
no client key — nothing in it is secret or per client: the shared gateway's figures per provider,
each job the server shows by its id and priority (`watch`), and the callbacks' counts. The names
are `observe.metrics`'; the collector reads the figures at scrape time, so a scrape costs one
`statistics()` of the gateway and nothing when nobody scrapes.

`prometheus_client` is the `metrics` extra, imported at the first scrape: without it the route
answers a 501 naming the extra, and the server runs on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from batchgate.errors import ServiceRequestError
from batchgate.observe.server_view import JobView, ServerView
from batchgate.server.native import Jobs

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

PATH = "/metrics"
MAX_QUEUED_SHOWN = 50  # jobs waiting for a place shown one by one (the label set stays bounded)
MISSING = "Prometheus metrics need the 'metrics' extra: pip install 'batchgate[metrics]'."


def server_view(jobs: Jobs) -> ServerView:
    """The figures of the server now."""
    watch = jobs.watch
    shown = {  # by job id, the latest state winning (a retried job queued again: queued)
        run.job_id: JobView(run.job_id, run.priority, run.progress, jobs.engine(run.job_id) is not None)
        for run in (*watch.finished, *watch.running.values())
    }
    for b in jobs.queued()[:MAX_QUEUED_SHOWN]:
        shown[b] = JobView(b, jobs.priority(b), None, False)
    deliveries: dict[str, int] = {}
    pending = 0
    if jobs.callbacks is not None:
        f = jobs.callbacks.figures()
        deliveries = {"delivered": f.delivered, "failed_attempt": f.failed_attempts, "given_up": f.given_up}
        pending = f.pending
    stats = jobs.gateway.statistics()
    return ServerView(stats, watch.cost_by_provider(), list(shown.values()), deliveries, pending)


class MetricsRoute:
    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs
        self._registry: CollectorRegistry | None = None

    def routes(self) -> list[web.RouteDef]:
        return [web.get(PATH, self.metrics)]

    async def metrics(self, request: web.Request) -> web.Response:
        try:
            from batchgate.observe import metrics  # noqa: PLC0415 — optional extra
        except ImportError:
            raise ServiceRequestError(501, MISSING, type="server_error", code="metrics_unavailable") from None
        if self._registry is None:
            self._registry = metrics.server_registry(lambda: server_view(self.jobs))
        body = metrics.exposition(self._registry)
        return web.Response(body=body, headers={"Content-Type": metrics.CONTENT_TYPE})
