"""A lean HTTP/1.1 client for the chat path: one request at a time per kept-alive connection.

A chat call is one small JSON POST and one small JSON answer, thousands of times a second against
a fast provider; aiohttp's general client (its request and response objects, traces, timers and
stream readers) costs about as much CPU per call as all of batchgate's scheduling. This package
does only what a provider call needs: `parser` reads one response (status, headers, a body by
length, chunks or to the end, gzip/deflate), `connection` is the asyncio protocol of one socket,
`proxy` opens a `CONNECT` tunnel through an HTTP proxy, `transport` keeps connections alive
per origin, times calls out and tells the quota pool when a request's bytes leave
(`batchgate.providers.wire.ON_WIRE`), and `stream` reads a streamed answer (a provider's events)
as it arrives. `errors` holds what it raises; `batchgate.providers.classify` turns those into the
one error hierarchy, as it does aiohttp's.

May import: `providers.wire` (the on-wire hook), the standard library and multidict (for the
headers); nothing else of batchgate.
"""

from batchgate.providers.h1.transport import H1Transport

__all__ = ["H1Transport"]
