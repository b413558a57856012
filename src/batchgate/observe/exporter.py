"""`/metrics` served on the run's own event loop (aiohttp), so a scrape reads the job's figures
between two steps of the run — never while another thread changes them — and costs nothing when
nobody scrapes. `linger` keeps it up after the run, so a scraper gets the final counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Callable

from aiohttp import web
from prometheus_client.registry import CollectorRegistry

from batchgate.clock import Clock, LoopClock
from batchgate.errors import JobError
from batchgate.observe.metrics import CONTENT_TYPE, RunSource, exposition, registry_for


class MetricsServer:
    """An HTTP server answering `GET /metrics` from `registry`; `port` is the one bound (0 asks
    the system for a free one)."""

    def __init__(self, registry: CollectorRegistry, host: str = "127.0.0.1", port: int = 0) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=exposition(self.registry), headers={"Content-Type": CONTENT_TYPE})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except OSError as exc:
            await runner.cleanup()
            raise JobError(
                f"--metrics-port {self.port}: cannot listen on {self.host} ({exc.strerror or exc})"
            ) from None
        self._runner = runner
        self.port = int(runner.addresses[0][1])

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"


@contextlib.asynccontextmanager
async def serving(source: RunSource, host: str, port: int) -> AsyncIterator[MetricsServer]:
    """`/metrics` for the jobs `source` yields, while the block runs."""
    server = MetricsServer(registry_for(source), host, port)
    await server.start()
    try:
        yield server
    finally:
        await server.close()


async def linger(
    seconds: float, announce: Callable[[], None] = lambda: None, clock: Clock | None = None
) -> None:
    """Wait `seconds`, or until SIGINT or SIGTERM (handled here, so neither ends the process);
    `announce` is called once they are handled (a signal from then on only ends the wait)."""
    clock = clock or LoopClock()
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    timer = clock.call_at(clock.now() + seconds, done.set)
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, done.set)
    try:
        announce()
        await done.wait()
    finally:
        timer.cancel()
        for sig in signals:
            loop.remove_signal_handler(sig)
