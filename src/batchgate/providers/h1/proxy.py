"""Going through an HTTP proxy: `Proxy` (where it is, what it is shown as, its credentials as a
header), and `open_tunnel`, the `CONNECT host:port` exchange (RFC 9110 §9.3.6) that turns a
socket to the proxy into a tunnel to an https target, over which the transport then speaks TLS.

An http target is not tunnelled: its request goes to the proxy in absolute form
(`POST http://host/path HTTP/1.1`) with `Proxy-Authorization` (the transport writes it). A proxy
that refuses the tunnel (407 credentials wanted, 403 forbidden, 502 the target unreachable from
it) raises `H1ProxyError`, naming the proxy as `shown` (never its credentials) and the status.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import NamedTuple

from batchgate.providers.h1.errors import H1ProxyError

MAX_CONNECT_HEAD = 16 * 1024


class Proxy(NamedTuple):
    """An http:// proxy: its address, how messages name it, and `Proxy-Authorization` (or None)."""

    host: str
    port: int
    shown: str
    authorization: str | None = None
    tls: ssl.SSLContext | None = None  # an https:// proxy: TLS to it first, verified with this

    def __repr__(self) -> str:
        return f"Proxy({self.shown!r})"


async def open_tunnel(sock: socket.socket, proxy: Proxy, host: str, port: int) -> None:
    """Ask `proxy` (connected on `sock`) for a tunnel to `host:port`; returns once it is open."""
    loop = asyncio.get_running_loop()
    await loop.sock_sendall(sock, _connect_request(proxy, host, port))
    head = bytearray()
    while (end := head.find(b"\r\n\r\n")) < 0:
        if len(head) > MAX_CONNECT_HEAD:
            raise H1ProxyError(f"the proxy {proxy.shown} answered CONNECT with a head too large", 0)
        chunk = await loop.sock_recv(sock, 65536)
        if not chunk:
            raise H1ProxyError(f"the proxy {proxy.shown} closed the connection before answering CONNECT", 0)
        head += chunk
    _check_answer(bytes(head), end, proxy, host, port)


async def open_tls_proxy(
    sock: socket.socket, proxy: Proxy, tunnel_to: tuple[str, int] | None
) -> asyncio.Transport:
    """TLS to an https:// `proxy` (connected on `sock`), then, for an https target, its tunnel to
    `tunnel_to`; the transport the target's bytes go over (the caller sets its protocol)."""
    assert proxy.tls is not None
    loop = asyncio.get_running_loop()
    transport, reader = await loop.create_connection(
        _HeadReader, sock=sock, ssl=proxy.tls, server_hostname=proxy.host
    )
    if tunnel_to is None:
        return transport
    try:
        transport.write(_connect_request(proxy, *tunnel_to))
        head = await reader.head(proxy)
        _check_answer(head, head.find(b"\r\n\r\n"), proxy, *tunnel_to)
    except BaseException:
        transport.abort()
        raise
    return transport


class _HeadReader(asyncio.Protocol):
    """Reads a proxy's answer to CONNECT over TLS (nothing may follow it before our own hello)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._done: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if not self._done.done() and (b"\r\n\r\n" in self._buf or len(self._buf) > MAX_CONNECT_HEAD):
            self._done.set_result(bytes(self._buf))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._done.done():
            self._done.set_result(bytes(self._buf))

    async def head(self, proxy: Proxy) -> bytes:
        got = await self._done
        if b"\r\n\r\n" not in got:
            raise H1ProxyError(f"the proxy {proxy.shown} did not answer CONNECT", 0)
        return got


def _connect_request(proxy: Proxy, host: str, port: int) -> bytes:
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if proxy.authorization is not None:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _check_answer(head: bytes, end: int, proxy: Proxy, host: str, port: int) -> None:
    """The tunnel is open (a 2xx, nothing after it), or `H1ProxyError` naming the proxy's answer."""
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    status_line = head[:end].split(b"\r\n", 1)[0].decode("latin-1")
    version, _, rest = status_line.partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or not (code.isdigit() and len(code) == 3):
        raise H1ProxyError(f"the proxy {proxy.shown} answered CONNECT with {status_line[:40]!r}", 0)
    status = int(code)
    if not 200 <= status < 300:
        why = f"HTTP {status} {reason}".strip()
        hint = " (proxy credentials missing or refused)" if status == 407 else ""
        raise H1ProxyError(f"the proxy {proxy.shown} refused CONNECT {authority}: {why}{hint}", status)
    if len(head) > end + 4:  # the target cannot have spoken before our TLS hello
        raise H1ProxyError(f"the proxy {proxy.shown} sent bytes past its CONNECT answer", status)
