"""`H1Stream`: an answer read as it arrives (a provider's event stream), over one connection of
the lean client (`transport.H1Transport.stream`).

It is the connection's `Sink`: the head, the body's pieces (chunks undone) and the end or the
failure are told to it as they come, and `read` hands over everything that arrived since the last
read in one piece (events that came together are handled together). Reading waits at most `idle`
seconds with nothing new (a `TimeoutError`: the stream stalled), kept by one timer per stream
that moves on lazily rather than one per read. A reader that falls behind pauses the socket
(`MAX_BUFFERED`). `close` gives a connection whose answer was read to its end back to its pool,
and drops any other (the server sees it go: a provider stops generating).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from multidict import CIMultiDict, CIMultiDictProxy

from batchgate.providers.h1.connection import Connection
from batchgate.providers.h1.errors import H1Disconnected, H1Error

MAX_BUFFERED = 256 * 1024  # bytes held for a reader before the socket is paused
_NO_HEADERS: CIMultiDictProxy[str] = CIMultiDictProxy(CIMultiDict())


class H1Stream:
    """See the module docstring; `put_back` takes the connection once its answer was read whole."""

    __slots__ = (
        "_conn", "_ended", "_error", "_idle", "_last", "_loop", "_paused", "_pieces", "_put_back",
        "_size", "_timer", "_waiter", "headers", "status",
    )  # fmt: skip

    def __init__(self, conn: Connection, idle: float, put_back: Callable[[Connection], None]) -> None:
        self._conn, self._idle, self._put_back = conn, idle, put_back
        self._loop = asyncio.get_running_loop()
        self._pieces: list[bytes] = []
        self._size = 0
        self._paused = False
        self._ended = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._last = self._loop.time()
        self._timer: asyncio.TimerHandle | None = self._loop.call_at(self._last + idle, self._check)
        self.status = 0
        self.headers = _NO_HEADERS

    # -- the connection's Sink ----------------------------------------------------------------
    def head(self, status: int, headers: CIMultiDictProxy[str]) -> None:
        self.status, self.headers = status, headers
        self._last = self._loop.time()
        self._wake()

    def data(self, piece: bytes) -> None:
        self._pieces.append(piece)
        self._size += len(piece)
        self._last = self._loop.time()
        if self._size > MAX_BUFFERED and not self._paused:
            self._paused = True
            self._conn.pause(True)
        self._wake()

    def end(self) -> None:
        self._ended = True
        self._stop_timer()
        self._wake()

    def fail(self, exc: H1Error) -> None:
        if self._error is None:
            self._error = exc
        self._stop_timer()
        self._wake()

    # -- the reader -----------------------------------------------------------------------------
    async def wait_head(self) -> None:
        """Until the head came (`status`, `headers`); raises what ended the exchange before it."""
        while not self.status:
            if self._error is not None:
                raise self._error
            if self._ended:  # (the connection tells the head before the end: never so)
                raise H1Disconnected("the answer ended without a head")
            await self._wait()

    async def read(self) -> bytes:
        """What arrived since the last read; b"" once the body ended. Raises the failure (after
        the bytes before it), or `TimeoutError` when nothing came within `idle` seconds."""
        while not self._pieces:
            if self._error is not None:
                raise self._error
            if self._ended:
                return b""
            await self._wait()
        pieces = self._pieces
        out = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        pieces.clear()
        self._size = 0
        if self._paused:
            self._paused = False
            self._conn.pause(False)
        return out

    def close(self) -> None:
        """End the exchange (see the module docstring); again: nothing."""
        self._stop_timer()
        conn = self._conn
        if self._ended and self._error is None and conn.reusable:
            self._put_back(conn)
        else:
            conn.abort()
        self._ended = True
        if self._error is None:
            self._error = H1Disconnected("the stream was closed")

    # -- the inside -----------------------------------------------------------------------------
    async def _wait(self) -> None:
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _check(self) -> None:
        """The idle timer: fire only if nothing came for `idle` seconds while the reader waited."""
        now, due = self._loop.time(), self._last + self._idle
        if self._pieces or now < due:  # (bytes the reader has not taken: not idle)
            self._timer = self._loop.call_at(due if now < due else now + self._idle, self._check)
            return
        self._timer = None
        self._error = TimeoutError(f"nothing arrived within {self._idle:g} s")
        self._wake()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
