"""One kept-alive socket to a provider: the asyncio protocol that carries one exchange at a time.

`exchange` writes a request and hands back a future that the protocol completes with the parsed
response (`batchgate.providers.h1.parser`) or fails with what went wrong: the connection dropping
before the answer (`H1Disconnected`), in its middle (`H1BodyBroken`), or a garbled answer. After
a complete answer `reusable` says whether another request may follow on this socket; anything
that leaves the exchange unfinished (a failure, a timeout, the caller cancelled) closes it, since
a late answer would otherwise be read as the next request's.

`stream` is the same exchange for an answer read as it arrives: a `Sink` is told the head, each
piece of the body, and the end or the failure, instead of a future getting the whole response.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, cast

from multidict import CIMultiDictProxy

from batchgate.providers.h1.errors import H1Disconnected, H1Error
from batchgate.providers.h1.parser import Response, ResponseParser


class Sink(Protocol):
    """What a streamed exchange tells (see the module docstring)."""

    def head(self, status: int, headers: CIMultiDictProxy[str]) -> None: ...
    def data(self, piece: bytes) -> None: ...
    def end(self) -> None: ...
    def fail(self, exc: H1Error) -> None: ...


class Connection(asyncio.Protocol):
    """See the module docstring; `on_lost` is told once the socket has closed."""

    __slots__ = ("_headless", "_on_lost", "_parser", "_sink", "_transport", "_waiter", "idle_since", "open")

    def __init__(self, on_lost: Callable[[Connection], None]) -> None:
        self._on_lost = on_lost
        self._transport: asyncio.Transport | None = None
        self._parser: ResponseParser | None = None
        self._waiter: asyncio.Future[Response] | None = None
        self._sink: Sink | None = None
        self._headless = False  # a stream whose head was not told yet
        self.open = True
        self.idle_since = 0.0

    # -- asyncio.Protocol -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast("asyncio.Transport", transport)  # (uvloop's is not a subclass)

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None:  # bytes nobody asked for: the socket cannot be trusted with a request
            self.close()
            return
        try:
            complete = parser.feed(data)
        except H1Error as exc:
            self._fail(exc)
            return
        if complete:
            self._complete(parser)
        elif self._headless and parser.head_done:
            self._tell_head(parser)

    def eof_received(self) -> bool:
        self.open = False
        if self._parser is not None and self._parser.started:
            self._ended(self._parser)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        parser, waiter = self._parser, self._waiter
        if self._sink is not None:
            if parser is not None and parser.started:
                self._ended(parser)
            else:
                self._fail(H1Disconnected("the server closed the connection"))
        if waiter is not None and not waiter.done():
            if parser is not None and parser.started:
                self._ended(parser)
            else:
                why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
                waiter.set_exception(H1Disconnected(f"the server closed the connection{why}"))
        self._parser, self._waiter, self._sink = None, None, None
        self._on_lost(self)

    # -- what the transport asks ----------------------------------------------------------
    def exchange(self, request: bytes, waiter: asyncio.Future[Response]) -> None:
        """Write `request`; `waiter` gets its response (or the failure)."""
        transport = self._transport
        assert transport is not None
        self._parser = ResponseParser()
        self._waiter = waiter
        transport.write(request)

    def stream(self, request: bytes, sink: Sink) -> None:
        """Write `request`; its answer is told to `sink` as it arrives."""
        transport = self._transport
        assert transport is not None
        self._parser = ResponseParser(sink.data)
        self._sink, self._headless = sink, True
        transport.write(request)

    def pause(self, paused: bool) -> None:
        """Stop (or go on) reading the socket: a stream's reader is behind."""
        transport = self._transport
        if transport is not None and not transport.is_closing():
            if paused:
                transport.pause_reading()
            else:
                transport.resume_reading()

    @property
    def reusable(self) -> bool:
        """Open, idle and not closing: another request may be sent on it."""
        transport = self._transport
        idle = self._waiter is None and self._sink is None
        return self.open and idle and transport is not None and not transport.is_closing()

    def close(self) -> None:
        """Close the socket (an unfinished exchange ends with `H1Disconnected`)."""
        self.open = False
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def abort(self) -> None:
        """Drop the socket at once (the exchange was given up: nothing more is read)."""
        self.open = False
        self._parser, self._waiter, self._sink = None, None, None
        if self._transport is not None:
            self._transport.abort()

    # -- the end of an exchange -----------------------------------------------------------
    def _tell_head(self, parser: ResponseParser) -> None:
        self._headless = False
        if self._sink is not None:
            self._sink.head(*parser.head())

    def _complete(self, parser: ResponseParser) -> None:
        if (sink := self._sink) is not None:
            if self._headless:
                self._tell_head(parser)
            self._parser = self._sink = None
            if not parser.keep_alive:
                self.close()
            sink.end()
            return
        waiter = self._waiter
        self._parser = self._waiter = None
        if not parser.keep_alive:
            self.close()
        if waiter is None or waiter.done():
            return
        try:
            waiter.set_result(parser.response())
        except H1Error as exc:
            waiter.set_exception(exc)

    def _ended(self, parser: ResponseParser) -> None:
        """The stream ended with the answer begun: complete (a body read to its end) or broken."""
        try:
            parser.at_eof()
        except H1Error as exc:
            self._fail(exc)
        else:
            self._complete(parser)

    def _fail(self, exc: H1Error) -> None:
        if (sink := self._sink) is not None:
            self._parser = self._sink = None
            self.close()
            sink.fail(exc)
            return
        waiter = self._waiter
        self._parser = self._waiter = None
        self.close()
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
