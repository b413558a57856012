"""`H1Transport.stream` over real loopback sockets: an answer read as it arrives (its chunks
undone, what came together handed over together), its connection back in the pool once read to
the end and dropped when left midway, and a stall that ends in `TimeoutError`, not a hang."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from batchgate.providers.h1 import H1Transport
from batchgate.providers.h1.stream import H1Stream
from loopback import serving

pytestmark = pytest.mark.integration

HEADERS = {"Accept-Encoding": "identity"}


@asynccontextmanager
async def _server(peers: list[object], go_on: asyncio.Event) -> AsyncIterator[str]:
    """`/stream` writes `one`, waits for `go_on`, writes `two` and ends (`/stall` writes no more)."""

    async def stream(request: web.Request) -> web.StreamResponse:
        peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        await request.read()
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"one")
        await go_on.wait()
        if request.path == "/stall":  # the client has gone by now
            return response
        await response.write(b"two")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/{name}", stream)
    async with serving(app) as url:
        yield url


async def _read_all(stream: H1Stream) -> bytes:
    out = b""
    while piece := await stream.read():
        out += piece
    return out


async def test_a_stream_is_read_as_it_arrives_and_its_connection_is_reused() -> None:
    peers: list[object] = []
    go_on = asyncio.Event()
    h1 = H1Transport()
    async with _server(peers, go_on) as url:
        stream = await h1.stream("POST", f"{url}/stream", b"{}", HEADERS, connect=2.0, idle=5.0)
        assert stream.status == 200
        assert await stream.read() == b"one"  # before the rest was written
        go_on.set()
        assert await _read_all(stream) == b"two"
        stream.close()
        again = await h1.stream("POST", f"{url}/stream", b"{}", HEADERS, connect=2.0, idle=5.0)
        assert await _read_all(again) == b"onetwo"
        again.close()
    await h1.close()
    assert peers[0] == peers[1]  # one connection, kept alive


async def test_a_stream_left_midway_drops_its_connection() -> None:
    peers: list[object] = []
    go_on = asyncio.Event()
    h1 = H1Transport()
    async with _server(peers, go_on) as url:
        stream = await h1.stream("POST", f"{url}/stream", b"{}", HEADERS, connect=2.0, idle=5.0)
        assert await stream.read() == b"one"
        stream.close()  # the rest never read
        go_on.set()
        again = await h1.stream("POST", f"{url}/stream", b"{}", HEADERS, connect=2.0, idle=5.0)
        assert await _read_all(again) == b"onetwo"
        again.close()
    await h1.close()
    assert peers[0] != peers[1]  # a new connection: the first was not the next request's


async def test_a_stream_that_stalls_raises_timeout_after_its_idle_bound() -> None:
    peers: list[object] = []
    h1 = H1Transport()
    go_on = asyncio.Event()
    async with _server(peers, go_on) as url:
        stream = await h1.stream("POST", f"{url}/stall", b"{}", HEADERS, connect=2.0, idle=0.2)
        assert await stream.read() == b"one"
        with pytest.raises(TimeoutError):
            await stream.read()
        stream.close()
        go_on.set()
    await h1.close()
