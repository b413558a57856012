"""`batchgate serve`'s process: one `Gateway` (so one quota pool per provider for every job), the
job store, the registry, and the HTTP app, started in that order and stopped in reverse on SIGINT
or SIGTERM. Batches a stopped server left unfinished resume at start.

Where things live: the job store (`--store`, SQLite by default) and a data folder (`--data`,
default the store file's folder) holding `server.db` (keys, files, batches), `files/` and
`batches/<id>/` (each batch's input copy, and the job's own output and report).

The event loop is the CLI's choice (`serve --loop`: uvloop when installed, by default); the
service's clock is that loop's, with whole-millisecond timers on uvloop (`WholeMillisecondClock`),
and the log's `serving` event names the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from batchgate import logs
from batchgate.clock import LoopClock
from batchgate.config import GatewayConfig
from batchgate.gateway import Gateway
from batchgate.jobs.progress.timeline import DEFAULT_EVERY_S
from batchgate.jobs.store.location import StoreLocation, open_store
from batchgate.observe.tracing.middleware import middlewares as tracing_middlewares
from batchgate.quota.store.location import StoreSpec
from batchgate.server.app import Service, make_app
from batchgate.server.batch_api.batches import Batches
from batchgate.server.batch_api.files import Files
from batchgate.server.batch_api.run_parts import MAX_JOBS, RunParts
from batchgate.server.batch_api.runs import Runs
from batchgate.server.batch_api.shapes import WINDOW_S
from batchgate.server.callbacks.delivery import Callbacks, CallbackSettings
from batchgate.server.door.body_limits import DEFAULT as DEFAULT_LIMITS
from batchgate.server.door.body_limits import BodyLimits
from batchgate.server.door.connections import DEFAULT as DEFAULT_CONNECTIONS
from batchgate.server.door.connections import ConnectionLimits, Door
from batchgate.server.door.request_log import MalformedLog
from batchgate.server.job_api.job_table import JobTable
from batchgate.server.job_api.native import Jobs, JobTerms
from batchgate.server.tenancy.rates import DEFAULT_TENANTS, TenantLimits
from batchgate.server.tenancy.registry import REGISTRY_FILE, Registry
from batchgate.server.views.quota_ring import QuotaRing

LISTENING_PREFIX = "batchgate serve listening on "
DEFAULT_DATA = Path(".batchgate") / "server"
DEFAULT_STORE = DEFAULT_DATA / "jobs.db"
GRACE_S = 2.0  # a cancelled or interrupted job's in-flight calls get this long to finish
SHUTDOWN_TIMEOUT = 5.0
log = logging.getLogger("batchgate.server")


@dataclass(frozen=True, slots=True)
class ServeLimits:
    """What the door bounds: each route class's body, each client's connections, each key's
    creations a minute and each address's failed authentications."""

    body: BodyLimits = DEFAULT_LIMITS
    connections: ConnectionLimits = DEFAULT_CONNECTIONS
    tenants: TenantLimits = DEFAULT_TENANTS


DEFAULT_SERVE_LIMITS = ServeLimits()


@dataclass(frozen=True, slots=True)
class ServerPlace:
    """Where the service keeps its state."""

    store: StoreLocation = DEFAULT_STORE
    data: Path | None = None

    @property
    def folder(self) -> Path:
        if self.data is not None:
            return self.data
        return self.store.parent if isinstance(self.store, Path) else DEFAULT_DATA

    @property
    def registry(self) -> Path:
        return self.folder / REGISTRY_FILE


async def serve(
    config: GatewayConfig,
    host: str,
    port: int,
    place: ServerPlace,
    *,
    ready: Callable[[str], None] = print,
    stop: asyncio.Event | None = None,
    expire_after_s: float = WINDOW_S,
    max_jobs: int = MAX_JOBS,
    callbacks: CallbackSettings | None = None,
    quota_store: StoreSpec | None = None,
    sample_every_s: float = DEFAULT_EVERY_S,
    limits: ServeLimits = DEFAULT_SERVE_LIMITS,
) -> None:
    """Serve until SIGINT/SIGTERM (or `stop`), telling `ready(url)` the address; the rest: how runs
    expire, run at once, share quotas and are sampled, and the door's bounds (`ServeLimits`)."""
    stopping, clock = stop or asyncio.Event(), loop_clock(asyncio.get_running_loop())
    registry = Registry(place.registry)
    table = JobTable(place.registry)
    try:
        store = await open_store(place.store, create=True)
        try:
            async with Gateway(config, clock=clock, quota_store=quota_store) as gateway:
                files = Files(registry, place.folder / "files", clock, limits.body.upload)
                hooks = Callbacks(registry, clock, callbacks)
                parts = RunParts(
                    registry,
                    files,
                    store,
                    config=config,
                    store_path=place.store,
                    folder=place.folder / "batches",
                    gateway=gateway,
                    clock=clock,
                    grace_s=GRACE_S,
                    expire_after_s=expire_after_s,
                    max_jobs=max_jobs,
                    max_jobs_per_key=limits.tenants.jobs_per_key,
                    callbacks=hooks,
                    timeline_s=sample_every_s,
                )
                jobs = Jobs(Runs(parts, JobTerms(table, config)), table)
                ring = QuotaRing(gateway, clock, sample_every_s)
                hooks.start()  # the events a stopped server left pending
                ring.start()
                try:
                    service = Service(
                        registry, files, Batches(jobs.runs), jobs, ring, limits.body, limits.tenants
                    )
                    await _listen(service, Door(limits.connections, clock), (host, port), stopping, ready)
                finally:
                    ring.close()
                    await jobs.close()
                    await hooks.close()
        finally:
            await store.close()
    finally:
        table.close()
        registry.close()


async def _listen(
    service: Service,
    door: Door,
    address: tuple[str, int],
    stopping: asyncio.Event,
    ready: Callable[[str], None],
) -> None:
    """Listen through the connection door (`loop.create_server` with its protocol factory around
    aiohttp's: a `TCPSite` takes aiohttp's own) until `stopping`."""
    await service.jobs.runs.off_loop.start()  # the batch-parsing worker process, before any tenant
    app = make_app(service, [door.middleware, *tracing_middlewares()])  # none unless tracing is on
    quiet = MalformedLog(door.clock)  # a request aiohttp cannot parse: one line a client a minute
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT, logger=quiet)
    await runner.setup()
    assert runner.server is not None
    host, port = address
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(door.factory(runner.server), host, port, reuse_address=True)
    try:
        service.jobs.resume_all()
        ready(f"{LISTENING_PREFIX}http://{host}:{int(listener.sockets[0].getsockname()[1])}")
        logs.event(log, logging.INFO, "serving", loop=loop_name(loop))
        with _signals(stopping):
            await stopping.wait()
    finally:
        listener.close()
        await runner.cleanup()


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """`uvloop` or `asyncio`: whose event loop the server runs on (`serve --loop`)."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


class WholeMillisecondClock(LoopClock):
    """The clock of a loop that counts whole milliseconds (uvloop): its `time()` is whole ms, and it
    rounds a timer's delay to the nearest ms, running one under half a ms at once. A waiter woken
    before its time (the quota gate) would look, find it early, arm again and spin until the next
    tick — hundreds of wakes per admission. Here a timer is armed for the first whole ms at or after
    `when`, so it wakes once, when `now()` has reached `when`."""

    def call_at(self, when: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        loop = asyncio.get_running_loop()
        return loop.call_later(max(0.0, math.ceil((when - loop.time()) * 1000.0) / 1000.0), callback)


def loop_clock(loop: asyncio.AbstractEventLoop) -> LoopClock:
    """The service's clock on `loop`: the loop's own, with whole-ms timers on uvloop."""
    return WholeMillisecondClock() if loop_name(loop) == "uvloop" else LoopClock()


@contextlib.contextmanager
def _signals(stopping: asyncio.Event) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    sigs = (signal.SIGINT, signal.SIGTERM)
    for sig in sigs:
        loop.add_signal_handler(sig, stopping.set)
    try:
        yield
    finally:
        for sig in sigs:
            loop.remove_signal_handler(sig)
