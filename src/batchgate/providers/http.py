"""The pooled aiohttp session: the Batch API clients, uploads and downloads (`send`), and chat
calls over aiohttp (`SessionTransport`, a `batchgate.providers.transport.ChatTransport` whose
aiohttp failures come out as the lean client's types, `batchgate.providers.h1.errors`; a config's
`transport: aiohttp` builds one from its `NetworkSettings`, `session_transport`).

One `ClientSession` per gateway: a `TCPConnector` with no per-host cap (the quota pool and the
scheduler decide concurrency, not the pool), keep-alive, a DNS cache, no cookie jar (API calls are
stateless; a jar would only cost CPU and leak state between providers), `raise_for_status` off
(status codes are classified by `batchgate.providers.classify`), orjson for any `json=` use, and
a connector that tells the quota pool when a request's bytes leave (`WireConnector`, calling
`batchgate.providers.wire.ON_WIRE` once a request has its connection).
The clients themselves serialise with orjson to bytes and parse the bytes they read.

`send` is where the Batch API's bytes go out and come back: it turns every transport failure into
a `TransportError` (a hung call into `RequestTimeout`, after which aiohttp closes the connection
rather than returning it to the pool) and leaves status codes to the caller.

Bounds hold after decompression. aiohttp (3.14) inflates a gzip or deflate body in bounded steps
as it is read, but `read()` would gather all of it: a 299 KiB bomb became 300 MiB in memory (issue
38). Every answer is read step by step and given up past its bound (`MAX_BODY`, the lean client's,
for an API answer; `MAX_DOWNLOAD` for a Batch API results file): `H1TooLarge`, classified as
`AnswerTooLarge`.

Each request passes its own `aiohttp.ClientTimeout` (`request_timeout`); the session default only
bounds connecting.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson
from aiohttp.client_reqrep import ClientRequest
from aiohttp.connector import Connection
from aiohttp.tracing import Trace

from batchgate.config import NetworkSettings, Secret, TimeoutConfig
from batchgate.config.network import proxy_for_url, tls_context
from batchgate.providers.classify import error_for_exception
from batchgate.providers.h1.errors import ForeignHTTPError, H1TooLarge
from batchgate.providers.h1.parser import MAX_BODY
from batchgate.providers.h1.transport import USER_AGENT
from batchgate.providers.redirects import follow
from batchgate.providers.transport import Answer
from batchgate.providers.wire import ON_WIRE

KEEPALIVE_SECONDS = 30.0
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}  # a chat call's
DNS_CACHE_SECONDS = 300
MAX_DOWNLOAD = 4 * 1024 * 1024 * 1024  # a Batch API results file, decompressed


class SessionTransport:
    """An aiohttp session as a `ChatTransport`: each call through `network`'s proxy and TLS
    context (None: directly, the system's CAs); `owns`: `close` closes the session (else its
    creator does)."""

    def __init__(
        self, session: aiohttp.ClientSession, network: NetworkSettings | None = None, *, owns: bool = False
    ) -> None:
        self.session = session
        self.network = network
        self._owns = owns
        self._timeouts: dict[tuple[float | None, float | None], aiohttp.ClientTimeout] = {}

    async def request(
        self,
        method: str,
        url: str,
        data: bytes | None,
        headers: Mapping[str, str],
        *,
        total: float | None,
        connect: float | None,
    ) -> Answer:
        timeout = self._timeouts.get((total, connect))
        if timeout is None:
            timeout = self._timeouts[(total, connect)] = aiohttp.ClientTimeout(
                total=total, sock_connect=connect
            )
        try:
            return await _exchange(self.session, method, url, data, headers, timeout, network=self.network)
        except aiohttp.ClientError as exc:
            raise ForeignHTTPError(exc) from exc

    async def close(self) -> None:
        if self._owns:
            await self.session.close()


def session_transport(net: NetworkSettings) -> SessionTransport:
    """A chat transport of its own aiohttp session that reaches targets as `net` says (its proxy
    per URL, `NO_PROXY` applied; its CA bundle or directory and client certificate); call it from
    a running event loop."""
    session = create_session(connect_timeout=TimeoutConfig().connect, headers={"User-Agent": USER_AGENT})
    return SessionTransport(session, net, owns=True)  # named as the lean client names itself


class WireConnector(aiohttp.TCPConnector):
    """A `TCPConnector` that calls `ON_WIRE` once a request has its connection (pooled or new)."""

    async def connect(
        self,
        req: ClientRequest,
        traces: list[Trace],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 (aiohttp's)
    ) -> Connection:
        conn = await super().connect(req, traces, timeout)
        on_wire = ON_WIRE.get()
        if on_wire is not None:
            on_wire()
        return conn


def _json_serialize(obj: Any) -> str:
    return orjson.dumps(obj).decode()


def create_session(
    *, connect_timeout: float, limit: int = 0, headers: Mapping[str, str] | None = None
) -> aiohttp.ClientSession:
    """A pooled session; `limit` caps open connections in total (0: no cap); `headers`: sent
    with every request unless it gives its own.

    Call it from a running event loop (aiohttp binds the connector to it); close it with
    `await session.close()` or `async with`.
    """
    connector = WireConnector(
        limit=limit,
        limit_per_host=0,
        use_dns_cache=True,
        ttl_dns_cache=DNS_CACHE_SECONDS,
        keepalive_timeout=KEEPALIVE_SECONDS,
    )
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        json_serialize=_json_serialize,
        raise_for_status=False,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout),
        auto_decompress=True,
        trust_env=False,
        headers=headers,
    )


def proxy_header(authorization: str | None) -> dict[str, str] | None:
    """A proxy's credentials as aiohttp's `proxy_headers` (None: it has none)."""
    return None if authorization is None else {"Proxy-Authorization": authorization}


def request_timeout(timeouts: TimeoutConfig) -> aiohttp.ClientTimeout:
    """The per-request timeout: `total` for the whole call, `connect` for opening the socket."""
    return aiohttp.ClientTimeout(total=timeouts.total, sock_connect=timeouts.connect)


async def send(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    data: bytes | aiohttp.FormData | None,
    headers: Mapping[str, str],
    client_timeout: aiohttp.ClientTimeout,
    *,
    provider: str,
    api_key: Secret | None,
    limit: int = MAX_BODY,
    network: NetworkSettings | None = None,
) -> Answer:
    """Send one request; (status, headers, body bytes), or a `TransportError` without the API key
    (`AnswerTooLarge` for a body past `limit` bytes, decompressed). `network`: its proxy and TLS
    context; redirects are followed or refused as `batchgate.providers.redirects` says (as on the
    chat path; aiohttp's own following is off)."""

    async def exchange(method: str, url: str, with_body: bool) -> Answer:
        try:
            body = data if with_body else None
            return await _exchange(session, method, url, body, headers, client_timeout, limit, network)
        except (aiohttp.ClientError, TimeoutError, OSError, H1TooLarge) as exc:
            raise error_for_exception(exc, provider=provider, api_key=api_key) from None

    return await follow(exchange, method, url, provider=provider, api_key=api_key)


async def _exchange(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    data: bytes | aiohttp.FormData | None,
    headers: Mapping[str, str],
    client_timeout: aiohttp.ClientTimeout,
    limit: int = MAX_BODY,
    network: NetworkSettings | None = None,
) -> Answer:
    tls: ssl.SSLContext | bool = True
    proxy, proxy_headers = None, None
    if network is not None:
        tls = tls_context(network) if network.custom_tls else True
        chosen = proxy_for_url(network, url)
        if chosen is not None:  # its credentials apart: no URL holding a password is ever made
            proxy, proxy_headers = chosen.shown, proxy_header(chosen.authorization)
            if proxy_headers and not url.startswith("https:"):  # absolute form: no CONNECT to carry it
                headers = {**headers, **proxy_headers}
    async with session.request(
        method,
        url,
        data=data,
        headers=headers,
        timeout=client_timeout,
        allow_redirects=False,
        ssl=tls,
        proxy=proxy,
        proxy_headers=proxy_headers,
    ) as resp:
        body = bytearray()
        async for piece in resp.content.iter_any():  # inflated by aiohttp in bounded steps
            if len(body) + len(piece) > limit:
                raise H1TooLarge(f"the body is past the bound ({limit} bytes, decompressed)")
            body += piece
        return resp.status, resp.headers, bytes(body)
