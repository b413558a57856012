"""When a request's bytes leave for its provider: the hook the quota pool restamps admissions on.

The quota pool admits a request before it is sent, and counts it in its window log from when it
left (`batchgate.quota.window`). On a connection already open that is the moment it is handed to
the client; on a new one its bytes leave only once the connection is made — a TCP and TLS
handshake, tens to hundreds of milliseconds to a real provider — and a log that counted it from
before would let it leave the window early. So the session's tracing (`trace_config`, in every
session `batchgate.providers.http` builds) calls `ON_WIRE` — a callback the sender sets in the
context of the task that sends (`sending`) — when the request's headers are written, after the
connection is made. Elsewhere `ON_WIRE` is unset and nothing is called.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from types import SimpleNamespace

import aiohttp

ON_WIRE: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "batchgate_on_wire", default=None
)


def sending(on_wire: Callable[[], None]) -> contextvars.Context:
    """A copy of the current context in which a request sent calls `on_wire` as its bytes leave
    (give it to `asyncio.create_task(..., context=)`)."""
    context = contextvars.copy_context()
    context.run(ON_WIRE.set, on_wire)
    return context


async def _headers_sent(
    session: aiohttp.ClientSession, ctx: SimpleNamespace, params: aiohttp.TraceRequestHeadersSentParams
) -> None:
    on_wire = ON_WIRE.get()
    if on_wire is not None:
        on_wire()


def trace_config() -> aiohttp.TraceConfig:
    """The tracing that calls `ON_WIRE` when a request's headers are written."""
    config = aiohttp.TraceConfig()
    config.on_request_headers_sent.append(_headers_sent)
    return config
