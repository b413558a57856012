"""Server-sent events read as they arrive: bytes in, whole events out, nothing held but the part of
an event not yet ended (https://html.spec.whatwg.org/multipage/server-sent-events.html: an event
ends at a blank line; `event:` names it, `data:` lines are joined by newlines, `:` lines are
comments). Each event keeps its own bytes, so a proxy can forward it unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_EVENT = 4 * 1024 * 1024  # one event's bytes: past this the stream is garbled, not an answer


class SSEError(ValueError):
    """The bytes are not an event stream (an event past `MAX_EVENT`)."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    name: str | None  # the `event:` field (None: unnamed, as OpenAI's chat chunks are)
    data: bytes  # the `data:` lines joined
    raw: bytes  # the event's bytes as received, its blank line included


class SSEReader:
    """Feed it bytes; it returns the events they complete."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    @property
    def holding(self) -> bool:
        """Whether part of an event not yet ended is held (the next bytes go on from it)."""
        return bool(self._buffer)

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        return [event for raw in self.split(chunk) if (event := parse(raw)) is not None]

    def split(self, chunk: bytes) -> list[bytes]:
        """The bytes of each event `chunk` completes, not parsed (its blank line included)."""
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        raws: list[bytes] = []
        start = 0
        while (end := buffer.find(b"\n\n", start)) >= 0:
            raws.append(buffer[start : end + 2])
            start = end + 2
        self._buffer = buffer[start:]
        if len(self._buffer) > MAX_EVENT:
            raise SSEError(f"an event longer than {MAX_EVENT} bytes")
        return raws


def parse(raw: bytes) -> SSEEvent | None:
    """One event's bytes parsed (None: a comment or keep-alive only)."""
    if raw.startswith(b"data: ") and raw.count(b"\n") == 2:  # the usual shapes, at once
        return SSEEvent(None, raw[6:-2], raw)
    if raw.startswith(b"event: ") and raw.count(b"\n") == 3:
        end = raw.find(b"\n")
        if raw.startswith(b"data: ", end + 1):
            return SSEEvent(raw[7:end].decode("utf-8", "replace"), raw[end + 7 : -2], raw)
    name: str | None = None
    data: list[bytes] = []
    for line in raw.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value.decode("utf-8", "replace")
    if not data and name is None:
        return None  # a comment or keep-alive only
    return SSEEvent(name, b"\n".join(data), raw)
