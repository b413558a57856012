"""What one client's connections may hold (issue 40): aiohttp has no header-read timeout of its
own (a connection that never finishes its headers was kept 3,630 s, and 1,100 of them from one
client with no key took the server's file descriptors), so every connection passes this door:

- a client address holds at most `per_client` connections at once; one past it is answered
  `429` and closed before anything is read;
- a connection's next request must have its whole head within `head_timeout_s` of the
  connection's start or of its previous answer (a kept-alive connection idle that long closes
  too); a request's body may not stall for `body_timeout_s` while the server is reading it (not
  while the server has paused reading, nor while an answer is still being written).

`deadline` is the pure decision; `Door` applies it with one timer per connection on the
service's clock, armed again only when it fires or when the deadline moved before it (a byte,
a request's start or end moves a time, never a timer: a kept-alive connection's requests arm
nothing), and learns where each request starts and ends from the app's outermost middleware
(`Door.middleware`). Closing is quiet: one DEBUG event per connection closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from batchgate import logs
from batchgate.clock import Clock, TimerHandle

log = logging.getLogger("batchgate.server")
_REFUSAL = (
    b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s"
)
_BODY = (
    b'{"error": {"message": "Too many connections from this address (the server\'s'
    b' --max-connections-per-client).", "type": "rate_limit_error", "param": null,'
    b' "code": "too_many_connections"}}'
)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """`serve --header-timeout`, `--body-timeout`, `--max-connections-per-client`."""

    head_timeout_s: float = 20.0
    body_timeout_s: float = 30.0
    per_client: int = 128


DEFAULT = ConnectionLimits()


def deadline(
    limits: ConnectionLimits, *, in_request: bool, since: float, last_byte: float, body_pending: bool
) -> float | None:
    """When the connection closes unless something happens first (None: nothing to wait for).
    Between requests: `since` (its start, or its last answer) plus the head timeout. In a
    request whose body the server is reading: the last byte plus the body timeout."""
    if not in_request:
        return since + limits.head_timeout_s
    if body_pending:
        return last_byte + limits.body_timeout_s
    return None


class _Watch(asyncio.Protocol):
    """One connection: aiohttp's own protocol inside, the deadlines around it."""

    def __init__(self, door: Door, inner: asyncio.Protocol) -> None:
        self.door, self.inner = door, inner
        self.transport: asyncio.Transport | None = None
        self.address = ""
        self.request: web.BaseRequest | None = None
        self.since = self.last_byte = door.clock.now()
        self.timer: TimerHandle | None = None
        self.armed_at = 0.0  # when `timer` fires

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast("asyncio.Transport", transport)  # uvloop's is no subclass
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        if not self.door.admit(self):
            transport.write(_REFUSAL % (len(_BODY), _BODY))
            transport.close()
            return
        self.inner.connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        self.last_byte = self.door.clock.now()
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.door.release(self):
            self.inner.connection_lost(exc)

    def started(self, request: web.BaseRequest) -> None:
        self.request, self.last_byte = request, self.door.clock.now()
        self._arm(lazy=True)

    def ended(self) -> None:
        self.request, self.since = None, self.door.clock.now()
        self._arm(lazy=True)

    def _deadline(self) -> float | None:
        return deadline(
            self.door.limits,
            in_request=self.request is not None,
            since=self.since,
            last_byte=self.last_byte,
            body_pending=self.request is not None and not self.request.content.is_eof(),
        )

    def _arm(self, *, lazy: bool = False) -> None:
        """The timer set for the deadline; `lazy`: a timer already set no later than the deadline
        is kept (when it fires, `_fire` looks again and arms for the rest)."""
        when = self._deadline()
        if lazy and self.timer is not None and (when is None or self.armed_at <= when):
            return
        self._disarm()
        if when is not None:
            self.timer, self.armed_at = self.door.clock.call_at(when, self._fire), when

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _fire(self) -> None:
        self.timer = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        now = self.door.clock.now()
        if transport.get_write_buffer_size() > 0 or not transport.is_reading():
            self.since = self.last_byte = now  # an answer going out, or reading paused by the server
        when = self._deadline()
        if when is None:
            return
        if when > now:  # bytes came (or the body ended) since the timer was armed
            self.timer, self.armed_at = self.door.clock.call_at(when, self._fire), when
            return
        logs.event(log, logging.DEBUG, "connection_timed_out", in_request=self.request is not None)
        transport.abort()


class Door:
    """Every connection of one listening server: the count per address, and each one's watch."""

    def __init__(self, limits: ConnectionLimits, clock: Clock) -> None:
        self.limits, self.clock = limits, clock
        self.counts: Counter[str] = Counter()
        self.watches: dict[asyncio.Protocol, _Watch] = {}  # aiohttp's protocol -> its watch

    def factory(self, make: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """`loop.create_server`'s protocol factory around aiohttp's (`runner.server`)."""

        def build() -> asyncio.Protocol:
            inner = make()
            watch = _Watch(self, inner)
            self.watches[inner] = watch
            return watch

        return build

    def admit(self, watch: _Watch) -> bool:
        if self.counts[watch.address] >= self.limits.per_client:
            self.watches.pop(watch.inner, None)
            logs.event(log, logging.DEBUG, "connection_refused", open=self.limits.per_client)
            return False
        self.counts[watch.address] += 1
        return True

    def release(self, watch: _Watch) -> bool:
        """Forget a closed connection; whether it had been admitted (aiohttp saw it)."""
        if self.watches.pop(watch.inner, None) is None:
            return False
        self.counts[watch.address] -= 1
        if self.counts[watch.address] <= 0:
            del self.counts[watch.address]
        return True

    @property
    def middleware(self) -> Middleware:
        """The app's outermost middleware: a request's start and end, told to its connection."""

        @web.middleware
        async def watched(request: web.Request, handler: Handler) -> web.StreamResponse:
            watch = self.watches.get(request.protocol)
            if watch is None:
                return await handler(request)
            watch.started(request)
            try:
                return await handler(request)
            finally:
                watch.ended()

        return watched
