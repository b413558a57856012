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
from typing import NamedTuple

from batchgate.providers.h1.errors import H1ProxyError

MAX_CONNECT_HEAD = 16 * 1024


class Proxy(NamedTuple):
    """An http:// proxy: its address, how messages name it, and `Proxy-Authorization` (or None)."""

    host: str
    port: int
    shown: str
    authorization: str | None = None

    def __repr__(self) -> str:
        return f"Proxy({self.shown!r})"


async def open_tunnel(sock: socket.socket, proxy: Proxy, host: str, port: int) -> None:
    """Ask `proxy` (connected on `sock`) for a tunnel to `host:port`; returns once it is open."""
    loop = asyncio.get_running_loop()
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if proxy.authorization is not None:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    await loop.sock_sendall(sock, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    head = bytearray()
    while (end := head.find(b"\r\n\r\n")) < 0:
        if len(head) > MAX_CONNECT_HEAD:
            raise H1ProxyError(f"the proxy {proxy.shown} answered CONNECT with a head too large", 0)
        chunk = await loop.sock_recv(sock, 65536)
        if not chunk:
            raise H1ProxyError(f"the proxy {proxy.shown} closed the connection before answering CONNECT", 0)
        head += chunk
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
