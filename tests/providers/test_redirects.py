"""Redirects on both HTTP clients (the lean chat client's `call`, the aiohttp `send` of the Batch
API), against a redirecting server on loopback: 307/308 followed with the same method and body,
a 301/302/303 to a POST an error naming the new URL, a loop stopped after 5 hops, another host or
a downgrade to http never followed. The one rule is `batchgate.providers.redirects`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from batchgate.config import TimeoutConfig
from batchgate.errors import BadRequestError
from batchgate.providers.h1 import H1Transport
from batchgate.providers.http import create_session, request_timeout, send
from batchgate.providers.redirects import next_hop
from batchgate.providers.transport import Answer, call
from loopback import serving

TIMEOUTS = TimeoutConfig(connect=5, total=10)
Client = Callable[[str, str, bytes | None], Awaitable[Answer]]


@pytest.fixture
async def site() -> AsyncIterator[tuple[str, list[tuple[str, str, bytes]]]]:
    seen: list[tuple[str, str, bytes]] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        seen.append((request.method, request.path, body))
        where = {
            "/old": (307, "/new"),
            "/perm": (308, "new"),  # relative to /perm's directory
            "/moved": (302, "/new"),
            "/other": (303, "/new"),
            "/loop": (307, "/loop"),
            "/away": (307, f"http://localhost:{request.url.port}/new"),
        }.get(request.path)
        if where is not None:
            return _redirect(*where)
        return web.json_response({"method": request.method, "body": body.decode()})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    async with serving(app) as url:
        yield url, seen


def _redirect(status: int, location: str) -> web.Response:
    return web.Response(status=status, headers={"Location": location})


@pytest.fixture(params=["h1", "aiohttp"])
async def client(request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    if request.param == "h1":
        h1 = H1Transport()

        async def via_h1(method: str, url: str, data: bytes | None) -> Answer:
            return await call(h1, method, url, data, {}, TIMEOUTS, provider="p", api_key=None)

        yield via_h1
        await h1.close()
        return
    session = create_session(connect_timeout=5)

    async def via_aiohttp(method: str, url: str, data: bytes | None) -> Answer:
        return await send(
            session, method, url, data, {}, request_timeout(TIMEOUTS), provider="p", api_key=None
        )

    yield via_aiohttp
    await session.close()


@pytest.mark.parametrize(("path", "status"), [("/old", 307), ("/perm", 308)])
async def test_307_and_308_are_followed_with_the_same_method_and_body(
    site: tuple[str, list[Any]], client: Client, path: str, status: int
) -> None:
    url, seen = site
    code, _, body = await client("POST", url + path, b'{"x": 1}')
    assert code == 200
    assert body == b'{"method": "POST", "body": "{\\"x\\": 1}"}'
    assert seen == [("POST", path, b'{"x": 1}'), ("POST", "/new", b'{"x": 1}')]


@pytest.mark.parametrize("path", ["/moved", "/other"])
async def test_a_301_302_303_to_a_post_is_an_error_naming_the_new_url(
    site: tuple[str, list[Any]], client: Client, path: str
) -> None:
    url, seen = site
    with pytest.raises(BadRequestError, match=rf"redirect to {url}/new not followed: a POST is not re-sent"):
        await client("POST", url + path, b"{}")
    assert len(seen) == 1


async def test_a_302_to_a_get_is_followed_as_a_get(site: tuple[str, list[Any]], client: Client) -> None:
    url, seen = site
    code, _, _ = await client("GET", url + "/moved", None)
    assert code == 200
    assert [(m, p) for m, p, _ in seen] == [("GET", "/moved"), ("GET", "/new")]


async def test_a_loop_stops_after_five_hops(site: tuple[str, list[Any]], client: Client) -> None:
    url, seen = site
    with pytest.raises(BadRequestError, match="5 redirects followed already"):
        await client("POST", url + "/loop", b"{}")
    assert len(seen) == 6


async def test_another_host_is_never_sent_the_request(site: tuple[str, list[Any]], client: Client) -> None:
    url, seen = site
    with pytest.raises(
        BadRequestError, match=r"redirect to http://localhost:\d+/new not followed: another host"
    ):
        await client("POST", url + "/away", b"{}")
    assert len(seen) == 1


def test_https_is_never_redirected_to_http() -> None:
    with pytest.raises(BadRequestError, match="https is never redirected"):
        next_hop("POST", "https://a/v1/x", 307, {"Location": "http://a/v1/x"}, hops=0, provider="p")
    assert next_hop("POST", "http://a/v1/x", 307, {"Location": "https://a/v2/x"}, hops=0, provider="p") == (
        "POST",
        "https://a/v2/x",
    )
    assert next_hop("POST", "https://a/x", 200, {"Location": "/y"}, hops=0, provider="p") is None
    assert next_hop("POST", "https://a/x", 307, {}, hops=0, provider="p") is None
