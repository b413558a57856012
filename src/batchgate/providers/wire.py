"""When a request's bytes leave for its provider: the hook the quota pool restamps admissions on.

The quota pool admits a request before it is sent, and counts it in its window log from when it
left (`batchgate.quota.window`). On a connection already open that is the moment it is handed to
the client; on a new one its bytes leave only once the connection is made — a TCP and TLS
handshake, tens to hundreds of milliseconds to a real provider — and a log that counted it from
before would let it leave the window early. So the chat path's transport
(`batchgate.providers.h1`) and the connector of every aiohttp session `batchgate.providers.http`
builds (`WireConnector` there) call `ON_WIRE` — a callback the sender sets in the context of the
task that sends (`sending`) — as soon as the request has its connection, right before its headers
are written. Elsewhere `ON_WIRE` is unset and nothing is called. (One
call per request, not aiohttp's client tracing: that awaits a handful of trace signals on every
request, whichever are listened to.)
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable

ON_WIRE: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "batchgate_on_wire", default=None
)


def sending(on_wire: Callable[[], None]) -> contextvars.Context:
    """A copy of the current context in which a request sent calls `on_wire` as its bytes leave
    (give it to `asyncio.create_task(..., context=)`)."""
    context = contextvars.copy_context()
    context.run(ON_WIRE.set, on_wire)
    return context
