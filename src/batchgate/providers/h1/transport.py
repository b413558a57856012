"""`H1Transport`: provider calls over kept-alive HTTP/1.1 connections, one pool per origin.

A call takes the most recently used idle connection to its origin (one idle longer than
`keepalive` seconds is closed instead: a server may have dropped it) or opens one (resolving the
host once per `DNS_CACHE_SECONDS`, the lookups of concurrent callers shared, IPv4 addresses tried
first; TLS verified against the system's trust store, or the context given, for https), tells
the quota pool its bytes leave (`ON_WIRE`, as `WireConnector` does for aiohttp), writes the
request in one write and awaits the answer under one timer for the call's `total` (opening a
connection is bounded by `connect` too). A call that ends any other way
than with a whole answer drops its connection. There is no cap on connections: the scheduler
decides how many calls are in flight. Failures raise `batchgate.providers.h1.errors` types, which
`batchgate.providers.classify` maps; the transport's timers are the event loop's, as aiohttp's are.

Where `proxy` names a proxy for an origin (`batchgate.providers.network.proxy_route`), the socket
goes to the proxy: an https origin through a `CONNECT` tunnel (`proxy.open_tunnel`), then TLS
verified for the origin's host; an http origin's requests in absolute form with
`Proxy-Authorization`. A failed handshake raises `H1TLSError` (the ssl module's reason and verify
message, and the host), never a connect error.

`stream` is one exchange whose answer is read as it arrives (`h1.stream.H1Stream`: a provider's
events), on the same pooled connections; its connection goes back to the pool once its answer was
read to the end.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from batchgate.providers.h1.connection import Connection
from batchgate.providers.h1.errors import H1ConnectError, H1DNSError, H1ProtocolError, H1TLSError
from batchgate.providers.h1.parser import Response
from batchgate.providers.h1.proxy import Proxy, open_tls_proxy, open_tunnel
from batchgate.providers.h1.stream import H1Stream
from batchgate.providers.wire import ON_WIRE

KEEPALIVE_SECONDS = 30.0
DNS_CACHE_SECONDS = 300.0
USER_AGENT = "batchgate"
_Address = tuple[int, int, int, str, Any]  # as getaddrinfo gives them
ProxyRoute = Callable[[str, str, int], Proxy | None]  # (scheme, host, port) -> the proxy, or None


class _Target(NamedTuple):
    """A URL taken apart once: where to connect and what to write."""

    origin: tuple[str, str, int]  # scheme, host, port
    host_header: str
    path: str  # absolute form for an http target through a proxy
    proxy: Proxy | None


class H1Transport:
    """See the module docstring."""

    def __init__(
        self,
        *,
        keepalive: float = KEEPALIVE_SECONDS,
        tls: ssl.SSLContext | None = None,
        proxy: ProxyRoute | None = None,
    ) -> None:
        """`tls`: the context for https (None: the system's trust store, made when first needed);
        `proxy`: the proxy each origin goes through (None: every origin directly)."""
        self._route = proxy
        self._keepalive = keepalive
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._live: set[Connection] = set()
        self._targets: dict[str, _Target] = {}
        self._dns: dict[tuple[str, int], tuple[float, asyncio.Future[list[_Address]]]] = {}
        self._ssl = tls
        self._closed = False

    async def request(
        self,
        method: str,
        url: str,
        data: bytes | None,
        headers: Mapping[str, str],
        *,
        total: float | None,
        connect: float | None,
    ) -> Response:
        """One exchange: (status, headers, body); raises an `H1Error`, `TimeoutError` or `OSError`."""
        if self._closed:
            raise H1ConnectError("the transport is closed")
        target = self._targets.get(url) or self._target(url)
        payload = _request_bytes(method, target, data, headers)  # refused before any connection
        loop = asyncio.get_running_loop()
        now = loop.time()
        conn = self._take(target.origin, now)
        if conn is None:
            wait = connect if total is None else total if connect is None else min(connect, total)
            conn = await self._connect(target, wait)
        on_wire = ON_WIRE.get()
        if on_wire is not None:
            on_wire()
        waiter: asyncio.Future[Response] = loop.create_future()
        timer = None if total is None else loop.call_at(now + total, _expire, waiter)
        try:
            conn.exchange(payload, waiter)
            response = await waiter
        except BaseException:
            conn.abort()
            raise
        finally:
            if timer is not None:
                timer.cancel()
        if conn.reusable:
            self._put_back(target.origin, conn)
        return response

    async def stream(
        self, method: str, url: str, data: bytes | None, headers: Mapping[str, str], *,
        connect: float | None, idle: float,
    ) -> H1Stream:  # fmt: skip
        """One exchange whose answer is read as it arrives, once its head came (`H1Stream`; each
        wait for it bounded by `idle`); raises as `request` does."""
        if self._closed:
            raise H1ConnectError("the transport is closed")
        target = self._targets.get(url) or self._target(url)
        payload = _request_bytes(method, target, data, headers)
        conn = self._take(target.origin, asyncio.get_running_loop().time())
        if conn is None:
            conn = await self._connect(target, connect)
        on_wire = ON_WIRE.get()
        if on_wire is not None:
            on_wire()
        stream = H1Stream(conn, idle, partial(self._put_back, target.origin))
        try:
            conn.stream(payload, stream)
            await stream.wait_head()
        except BaseException:
            stream.close()
            raise
        return stream

    async def close(self) -> None:
        """Close every connection; calls after this fail at once."""
        self._closed = True
        self._idle.clear()
        for conn in list(self._live):
            conn.close()
        if self._live:
            await asyncio.sleep(0)  # let the transports tell their protocols they are gone

    # -- connections ----------------------------------------------------------------------
    def _put_back(self, origin: tuple[str, str, int], conn: Connection) -> None:
        if self._closed:
            conn.close()
            return
        conn.idle_since = asyncio.get_running_loop().time()
        self._idle.setdefault(origin, []).append(conn)

    def _take(self, origin: tuple[str, str, int], now: float) -> Connection | None:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if conn.reusable and now - conn.idle_since < self._keepalive:
                return conn
            conn.close()
        return None

    async def _connect(self, target: _Target, wait: float | None) -> Connection:
        scheme, host, port = target.origin
        context = self._tls() if scheme == "https" else None
        proxy = target.proxy
        dial = (proxy.host, proxy.port) if proxy is not None else (host, port)
        try:
            async with asyncio.timeout(wait):
                addresses = await self._resolve(*dial)
                error: OSError | None = None
                for family, kind, proto, _, address in addresses:
                    sock = socket.socket(family, kind, proto)
                    try:
                        sock.setblocking(False)
                        await asyncio.get_running_loop().sock_connect(sock, address)
                    except OSError as exc:
                        sock.close()
                        error = exc
                        continue
                    except BaseException:  # cancelled or timed out while connecting
                        sock.close()
                        raise
                    if proxy is not None and proxy.tls is not None:
                        return await self._via_tls_proxy(sock, proxy, target.origin, context)
                    if proxy is not None and scheme == "https":
                        await _tunnel(sock, proxy, host, port)
                    return await self._wrap(sock, context, host)
        except ssl.SSLError as exc:
            raise _tls_error(exc, host, port) from None
        where = f"the proxy {proxy.shown}" if proxy is not None else f"{host}:{port}"
        raise H1ConnectError(f"cannot connect to {where}: {error}", error)

    async def _via_tls_proxy(
        self,
        sock: socket.socket,
        proxy: Proxy,
        origin: tuple[str, str, int],
        context: ssl.SSLContext | None,
    ) -> Connection:
        """Through an https:// proxy: TLS to it, then a tunnel and TLS inside it (https targets)
        or the requests in absolute form over it (http targets)."""
        scheme, host, port = origin
        try:
            transport = await open_tls_proxy(sock, proxy, (host, port) if scheme == "https" else None)
        except BaseException:
            sock.close()
            raise
        conn = Connection(self._live.discard)
        try:
            if context is not None:
                loop = asyncio.get_running_loop()
                inner = await loop.start_tls(transport, conn, context, server_hostname=host)
                if inner is None:  # only when the loop is closing
                    raise H1ConnectError("the event loop is closing")
                transport = inner
            else:
                transport.set_protocol(conn)
        except BaseException:
            transport.abort()
            raise
        conn.connection_made(transport)
        self._live.add(conn)
        return conn

    async def _wrap(self, sock: socket.socket, context: ssl.SSLContext | None, host: str) -> Connection:
        loop = asyncio.get_running_loop()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            _, conn = await loop.create_connection(
                lambda: Connection(self._live.discard),
                sock=sock,
                ssl=context,
                server_hostname=host if context is not None else None,
            )
        except BaseException:
            sock.close()
            raise
        self._live.add(conn)
        if self._closed:
            conn.close()
            raise H1ConnectError("the transport is closed")
        return conn

    async def _resolve(self, host: str, port: int) -> list[_Address]:
        loop = asyncio.get_running_loop()
        key = (host, port)
        cached = self._dns.get(key)
        if cached is None or loop.time() - cached[0] > DNS_CACHE_SECONDS or _failed(cached[1]):
            lookup: asyncio.Future[list[_Address]] = asyncio.ensure_future(_lookup(host, port))
            cached = (loop.time(), lookup)
            self._dns[key] = cached
        try:
            return await asyncio.shield(cached[1])
        except socket.gaierror as exc:
            raise H1DNSError(f"cannot resolve {host}: {exc}", exc) from None

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    def _target(self, url: str) -> _Target:
        parts = urlsplit(url)
        scheme, host = parts.scheme.lower(), parts.hostname
        if scheme not in ("http", "https") or not host:
            raise H1ProtocolError(f"not an http(s) URL: {url[:60]!r}")
        default = 443 if scheme == "https" else 80
        port = parts.port or default
        bracketed = f"[{host}]" if ":" in host else host
        host_header = bracketed if port == default else f"{bracketed}:{port}"
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        proxy = self._route(scheme, host, port) if self._route is not None else None
        if proxy is not None and scheme == "http":
            path = f"http://{host_header}{path}"  # absolute form: the proxy forwards it
        target = _Target((scheme, host, port), host_header, path, proxy)
        if len(self._targets) < 1024:  # a client's few URLs; never a cache that grows without end
            self._targets[url] = target
        return target


def _request_bytes(method: str, target: _Target, data: bytes | None, headers: Mapping[str, str]) -> bytes:
    lines = [f"{method} {target.path} HTTP/1.1", f"Host: {target.host_header}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    proxy = target.proxy
    if proxy is not None and proxy.authorization is not None and target.origin[0] == "http":
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    if "Accept-Encoding" not in headers:
        lines.append("Accept-Encoding: gzip, deflate")
    if "User-Agent" not in headers:
        lines.append(f"User-Agent: {USER_AGENT}")
    if data is not None:
        lines.append(f"Content-Length: {len(data)}")
    head = "\r\n".join(lines)
    breaks = len(lines) - 1
    if head.count("\n") != breaks or head.count("\r") != breaks:
        raise ValueError("a header name or value holds a line break")
    encoded = f"{head}\r\n\r\n".encode()
    return encoded + data if data else encoded


async def _lookup(host: str, port: int) -> list[_Address]:
    """The addresses to try; an IP address as it is (no lookup, no thread)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        if ip.version == 4:
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (host, port))]
        return [(socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (host, port, 0, 0))]
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found = [(int(family), int(kind), proto, name, address) for family, kind, proto, name, address in infos]
    # IPv4 first: a network that black-holes IPv6 would otherwise hold each new connection for
    # the whole connect timeout (one without IPv4 refuses those at once and goes on to IPv6)
    return sorted(found, key=lambda info: info[0] != socket.AF_INET)


async def _tunnel(sock: socket.socket, proxy: Proxy, host: str, port: int) -> None:
    try:
        await open_tunnel(sock, proxy, host, port)
    except BaseException:
        sock.close()
        raise


def _tls_error(exc: ssl.SSLError, host: str, port: int) -> H1TLSError:
    """The certificate problem as the ssl module words it (its reason code and verify message)."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    reason = exc.reason or type(exc).__name__
    if isinstance(exc, ssl.SSLCertVerificationError):
        error = H1TLSError(f"{reason}: {exc.verify_message}", where)
        error.verify = True
        return error
    return H1TLSError(str(reason), where)


def _expire(waiter: asyncio.Future[Response]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("no answer within the request's total timeout"))


def _failed(lookup: asyncio.Future[list[_Address]]) -> bool:
    return lookup.done() and (lookup.cancelled() or lookup.exception() is not None)
