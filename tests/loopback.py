"""The one loopback server of the in-process tests: an aiohttp app served on 127.0.0.1 at a free
port for as long as a block runs (a canned provider, a scripted one, a middleware under test)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web


@asynccontextmanager
async def serving(app: web.Application, **runner_options: Any) -> AsyncIterator[str]:
    """`app` on 127.0.0.1 at a port the system picks; yields its base URL, `http://127.0.0.1:PORT`
    (no trailing slash). `runner_options` go to `web.AppRunner` (access logging is off)."""
    runner = web.AppRunner(app, access_log=None, **runner_options)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
