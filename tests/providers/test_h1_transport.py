"""`batchgate.providers.h1.H1Transport` over real loopback sockets: connections kept and dropped,
`ON_WIRE` once a request leaves, timeouts, and each way a call fails classified as the aiohttp
path classifies it (`providers.http.call`)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from batchgate.config import TimeoutConfig
from batchgate.errors import (
    ConnectError,
    GarbledHead,
    MalformedResponse,
    RequestTimeout,
    TLSError,
    UnreachableError,
)
from batchgate.providers.h1 import H1Transport
from batchgate.providers.http import JSON_HEADERS
from batchgate.providers.transport import call
from batchgate.providers.wire import sending
from loopback import serving

pytestmark = pytest.mark.integration

TIMEOUTS = TimeoutConfig(connect=2.0, total=5.0)


@asynccontextmanager
async def _server(peers: list[object], arrived: asyncio.Event | None = None) -> AsyncIterator[str]:
    """`/echo` answers the body it got; `/slow` after 0.5 s; `/close` with `Connection: close`;
    `/gzip` compressed and chunked. Every request's client address is logged in `peers`."""

    async def echo(request: web.Request) -> web.StreamResponse:
        peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        body = await request.read()
        if arrived is not None:
            arrived.set()
        if request.path == "/slow":
            await asyncio.sleep(0.5)
        if request.path == "/gzip":
            response = web.Response(body=gzip.compress(body), headers={"Content-Encoding": "gzip"})
            response.enable_chunked_encoding()
            return response
        headers = {"Connection": "close"} if request.path == "/close" else {}
        return web.Response(body=body, headers=headers)

    app = web.Application()
    app.router.add_post("/{name}", echo)
    async with serving(app) as url:
        yield url


async def _post(h1: H1Transport, url: str, body: bytes, timeouts: TimeoutConfig = TIMEOUTS) -> bytes:
    status, _, raw = await call(h1, "POST", url, body, JSON_HEADERS, timeouts, provider="p", api_key=None)
    assert status == 200
    return raw


async def test_requests_in_turn_share_one_connection_and_each_calls_on_wire_once() -> None:
    peers: list[object] = []
    wired: list[int] = []
    h1 = H1Transport()
    async with _server(peers) as url:
        for i in range(3):
            task = asyncio.create_task(
                _post(h1, f"{url}/echo", b"%d" % i), context=sending(lambda: wired.append(1))
            )
            assert await task == b"%d" % i
        assert await _post(h1, f"{url}/gzip", b'{"x": 1}') == b'{"x": 1}'  # chunked and gzip
        await h1.close()
    assert len(wired) == 3
    assert len(peers) == 4
    assert len(set(peers)) == 1


async def test_concurrent_requests_each_get_a_connection_then_reuse_them() -> None:
    peers: list[object] = []
    h1 = H1Transport()
    async with _server(peers) as url:
        for _ in range(2):
            assert await asyncio.gather(*(_post(h1, f"{url}/echo", b"x") for _ in range(5))) == [b"x"] * 5
        await h1.close()
    assert len(set(peers)) == 5  # the second round found the first round's five idle


async def test_a_server_that_closes_and_an_idle_connection_past_keepalive_are_not_reused() -> None:
    peers: list[object] = []
    async with _server(peers) as url:
        h1 = H1Transport()
        await _post(h1, f"{url}/close", b"a")
        await _post(h1, f"{url}/echo", b"b")
        await h1.close()
        stale = H1Transport(keepalive=0.0)
        await _post(stale, f"{url}/echo", b"c")
        await _post(stale, f"{url}/echo", b"d")
        await stale.close()
    assert len(set(peers)) == 4


async def test_a_timed_out_or_cancelled_call_drops_its_connection() -> None:
    peers: list[object] = []
    arrived = asyncio.Event()
    h1 = H1Transport()
    async with _server(peers, arrived) as url:
        with pytest.raises(RequestTimeout):
            await _post(h1, f"{url}/slow", b"t", TimeoutConfig(connect=2.0, total=0.1))
        arrived.clear()
        cancelled = asyncio.ensure_future(_post(h1, f"{url}/slow", b"c"))
        await arrived.wait()  # the server has the request: cancel while its answer is pending
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert await _post(h1, f"{url}/echo", b"after") == b"after"
        await h1.close()
    assert len(set(peers)) == 3  # the late answers were never read as the next request's


@asynccontextmanager
async def _raw_server(answer: Callable[[asyncio.StreamWriter], Awaitable[None]]) -> AsyncIterator[str]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            await answer(writer)
        finally:
            writer.close()
            await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()
        await server.wait_closed()


async def _broken_body(writer: asyncio.StreamWriter) -> None:
    writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"half')
    await writer.drain()


async def _garbled(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTX/9 what\r\n\r\n")
    await writer.drain()


async def _nothing(writer: asyncio.StreamWriter) -> None:
    return None


@pytest.mark.parametrize(
    ("answer", "cls", "what"),
    [
        (_broken_body, MalformedResponse, "response body broke off"),
        (_garbled, GarbledHead, "invalid HTTP response"),  # a MalformedResponse no retry can read
        (_nothing, ConnectError, "connection failed"),
    ],
    ids=["body-broke-off", "garbled", "closed-without-answer"],
)
async def test_each_broken_answer_is_classified(
    answer: Callable[[asyncio.StreamWriter], Awaitable[None]], cls: type[Exception], what: str
) -> None:
    h1 = H1Transport()
    async with _raw_server(answer) as url:
        with pytest.raises(cls, match=what) as caught:
            await call(h1, "POST", url, b"{}", JSON_HEADERS, TIMEOUTS, provider="p", api_key=None)
    await h1.close()
    assert type(caught.value) is cls


async def test_a_refused_connection_is_unreachable_and_a_closed_transport_refuses() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        h1 = H1Transport()
        with pytest.raises(UnreachableError) as caught:
            await call(
                h1, "POST", f"http://127.0.0.1:{port}/", b"{}", {}, TIMEOUTS, provider="p", api_key=None
            )
    assert caught.value.cause == "connection refused"
    await h1.close()
    with pytest.raises(UnreachableError):
        await call(h1, "POST", "http://127.0.0.1:9/", b"{}", {}, TIMEOUTS, provider="p", api_key=None)


async def test_a_header_with_a_line_break_is_never_written() -> None:
    h1 = H1Transport()
    with pytest.raises(ValueError, match="line break"):
        await h1.request(
            "POST", "http://127.0.0.1:9/", b"{}", {"X-Evil": "a\r\nB: 1"}, total=1.0, connect=1.0
        )
    await h1.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (cert, key), made with the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate with")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_https_is_verified_against_the_trust_store(certificate: tuple[str, str]) -> None:
    cert, key = certificate
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    app = web.Application()
    app.router.add_post("/echo", echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_tls).start()
    url = f"https://127.0.0.1:{runner.addresses[0][1]}/echo"
    try:
        trusting = H1Transport(tls=ssl.create_default_context(cafile=cert))
        assert await _post(trusting, url, b"over tls") == b"over tls"
        assert await _post(trusting, url, b"again") == b"again"
        await trusting.close()
        system = H1Transport()  # the system's trust store does not know this certificate
        with pytest.raises(TLSError, match=r"CERTIFICATE_VERIFY_FAILED: self.signed certificate \(127"):
            await _post(system, url, b"x")
        await system.close()
    finally:
        await runner.cleanup()


async def test_a_connect_that_times_out_leaves_no_socket_open() -> None:
    # a listening socket whose accept queue is full: connecting to it hangs until the timeout
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        fillers = [socket.socket() for _ in range(8)]
        for filler in fillers:  # fill the queue (never accepted)
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(listener.getsockname())
        h1 = H1Transport()
        before = len(os.listdir("/proc/self/fd"))
        try:
            timeouts = TimeoutConfig(connect=0.2, total=5.0)
            with pytest.raises(RequestTimeout):
                await call(h1, "POST", url, b"{}", {}, timeouts, provider="p", api_key=None)
            assert len(os.listdir("/proc/self/fd")) == before  # the hung socket was closed
        finally:
            for filler in fillers:
                filler.close()
            await h1.close()
