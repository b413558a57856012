"""The AWS event-stream binary framing (`application/vnd.amazon.eventstream`), and a Converse
answer told as ConverseStream's events in it (shared/PROTOCOLS.md "AWS Bedrock";
https://docs.aws.amazon.com/transcribe/latest/dg/streaming-setting-up.html#streaming-event-stream
gives the frame; https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html
the events).

A frame: total length (uint32, big-endian), headers length (uint32), the CRC32 of those 8 bytes,
the headers (name length uint8, name, value type uint8 — 7 is a string —, value length uint16,
value), the payload, and the CRC32 of everything before it. Each event carries `:event-type`,
`:content-type: application/json` and `:message-type: event`; its payload is the event's JSON.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7
_PRELUDE = 12
DELTA_WORDS = 4  # words per contentBlockDelta: an answer arrives in pieces, as a real stream does


def frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message."""
    head = b"".join(_header(name.encode(), value.encode()) for name, value in headers.items())
    total = _PRELUDE + len(head) + len(payload) + 4
    prelude = struct.pack(">II", total, len(head))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


def _header(name: bytes, value: bytes) -> bytes:
    return struct.pack(">B", len(name)) + name + struct.pack(">BH", _STRING, len(value)) + value


def event(event_type: str, payload: Mapping[str, Any]) -> bytes:
    """One event (`:message-type: event`) with its JSON payload."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, orjson.dumps(payload))


def exception(exception_type: str, message: str) -> bytes:
    """An exception message inside a stream (`:message-type: exception`)."""
    headers = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, orjson.dumps({"message": message}))


def converse_stream(answer: Mapping[str, Any]) -> bytes:
    """A Converse answer as the ConverseStream body telling it."""
    return b"".join(frame for _, frame in converse_events(answer, DELTA_WORDS))


def converse_events(answer: Mapping[str, Any], words: int = 1) -> Iterator[tuple[bool, bytes]]:
    """(is a piece of text, frame) of each ConverseStream event telling a Converse answer, its text
    `words` words a `contentBlockDelta` (`emulator.streaming` paces them, a token each)."""
    message = answer["output"]["message"]
    yield False, event("messageStart", {"role": message["role"]})
    for index, block in enumerate(message["content"]):
        if "toolUse" in block:
            use = block["toolUse"]
            start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
            yield False, event("contentBlockStart", {"start": start, "contentBlockIndex": index})
            delta = {"toolUse": {"input": orjson.dumps(use["input"]).decode()}}
            yield False, event("contentBlockDelta", {"delta": delta, "contentBlockIndex": index})
        else:
            for piece in _pieces(block.get("text", ""), words):
                text = {"delta": {"text": piece}, "contentBlockIndex": index}
                yield True, event("contentBlockDelta", text)
        yield False, event("contentBlockStop", {"contentBlockIndex": index})
    yield False, event("messageStop", {"stopReason": answer["stopReason"]})
    metadata = {"usage": answer["usage"], "metrics": answer.get("metrics", {"latencyMs": 0})}
    yield False, event("metadata", metadata)


def _pieces(text: str, size: int) -> Iterator[str]:
    words = text.split(" ")
    for i in range(0, len(words), size):
        piece = " ".join(words[i : i + size])
        yield piece if i + size >= len(words) else piece + " "
