"""`batchgate.providers.wire`: a session from `create_session` calls the sender's `ON_WIRE` once
per request when its bytes leave — after it got a connection, not when it was handed to the
client — and calls nothing for a request sent outside `sending` (real loopback sockets)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web

from batchgate.providers.http import JSON_HEADERS, create_session, send
from batchgate.providers.wire import sending
from loopback import serving

pytestmark = pytest.mark.integration


@asynccontextmanager
async def _server(events: list[str]) -> AsyncIterator[str]:
    """Answers each POST (named by its body) after a short while, logging when it got the
    request and when it answered."""

    async def handle(request: web.Request) -> web.Response:
        name = (await request.read()).decode()
        events.append(f"got {name}")
        await asyncio.sleep(0.05)  # the answer takes a while: the other request waits for the connection
        events.append(f"answered {name}")
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/", handle)
    async with serving(app) as url:
        yield f"{url}/"


async def _post(session: aiohttp.ClientSession, url: str, name: str) -> int:
    timeout = aiohttp.ClientTimeout(total=10)
    status, _, _ = await send(
        session, "POST", url, name.encode(), JSON_HEADERS, timeout, provider="p", api_key=None
    )
    return status


async def test_on_wire_fires_once_per_request_when_it_has_a_connection() -> None:
    events: list[str] = []
    async with _server(events) as url, create_session(connect_timeout=5.0, limit=1) as session:

        def wire(name: str) -> asyncio.Task[int]:
            on_wire = sending(lambda: events.append(f"wire {name}"))
            return asyncio.create_task(_post(session, url, name), context=on_wire)

        first = wire("a")
        await asyncio.sleep(0)  # a takes the only connection
        second = wire("b")
        assert list(await asyncio.gather(first, second)) == [200, 200]
        assert await _post(session, url, "c") == 200  # outside `sending`: nothing to call
    # b was handed to the session at once, but its bytes left only once a's answer freed the
    # connection: that is when the window must count it from
    assert events == ["wire a", "got a", "answered a", "wire b", "got b", "answered b", "got c", "answered c"]
