"""A live answer streamed to a client that asked `stream: true`: the gateway's streamed request
(`Gateway.stream_chat`) relayed event by event in the client's format
(`providers.stream_render.Renderer`: the provider's own bytes when the formats match, translated
when the route sent it to another kind).

Nothing is written before the provider's first event, so a failure until then (a 429 after the
retries, no provider left) is an ordinary HTTP error and the request may still fail over; from the
first event on, each is written as it arrives (no buffering: aiohttp's sockets have TCP_NODELAY;
events that came in one read from the provider go out in one write; the answer's last event with the
end of the response, before the gateway reads the provider's stream to its end and settles the
quota: the client does not wait for that bookkeeping), and a failure (`timeouts.stream_idle` passed
without an event, the stream broken off) ends the stream with an error event in the client's format.
A client that goes away closes the gateway's stream (`contextlib.aclosing`): the provider's call is
dropped and the quota settled with what was produced.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

from aiohttp import web

from batchgate.errors import BatchgateError
from batchgate.providers.stream_events import StreamEvent
from batchgate.providers.stream_render import Renderer

_SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_MESSAGE_CHARS = 300


class _EventStream(web.StreamResponse):
    """Its head goes out with the first events, in one write (aiohttp's `Response` does so; a
    `StreamResponse` writes its head alone at `prepare` unless told not to)."""

    _send_headers_immediately = False


async def relay(
    request: web.Request,
    events: AsyncGenerator[StreamEvent, None],
    renderer: Renderer,
) -> web.StreamResponse:
    """Write `events` to the client as `renderer` says; a `BatchgateError` before the first event
    is raised to the caller (who answers it as an HTTP error)."""
    async with contextlib.aclosing(events) as stream:
        first = await anext(stream)  # raises before anything is written
        response = _EventStream(headers=_SSE)
        await response.prepare(request)
        ev: StreamEvent | None = first
        held: list[bytes] = []  # events that came in one read, written together
        try:
            while ev is not None:
                held.append(renderer.render(ev))
                if ev.done:  # the answer's last event: the client has it before the settling
                    break
                if not ev.more:
                    await response.write(b"".join(held))
                    held.clear()
                ev = await anext(stream, None)
        except BatchgateError as exc:  # after the first event: the stream ends with an error event
            message = (exc.message or exc.kind)[:_MESSAGE_CHARS]
            held.append(renderer.error(exc.kind, message))
        except ConnectionResetError:  # the client went away: its stream is closed on the way out
            return response
        try:
            await response.write_eof(b"".join(held))  # the last events, with the end (one write)
        except ConnectionResetError:
            return response
        with contextlib.suppress(BatchgateError):  # the upstream read to its end, then settled
            await anext(stream, None)
    return response
