"""A connection reset as the `reset` and `hang` faults end one: RST, no answer."""

from __future__ import annotations

import contextlib
import socket
import struct

from aiohttp import web


def abort(request: web.Request) -> web.Response:
    """Reset the connection (RST, no answer); the returned response is never written."""
    transport = request.transport
    if transport is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    return web.Response(status=499)
