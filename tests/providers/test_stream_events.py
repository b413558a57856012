"""Streamed answers' events: SSE read across any split of its bytes, each format decoded, and each
written in another format (the translation a failover across kinds makes) or passed through."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from batchgate.models import Usage
from batchgate.providers.sse import MAX_EVENT, SSEError, SSEReader
from batchgate.providers.stream_events import Decoder, Format, StreamEvent, StreamFailed
from batchgate.providers.stream_render import Renderer

CHAT = (
    b'data: {"id":"c1","created":5,"model":"g","choices":[{"index":0,"delta":{"role":"assistant",'
    b'"content":""},"finish_reason":null}],"usage":null}\n\n'
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],'
    b'"usage":null}\n\n'
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}],'
    b'"usage":null}\n\n'
    b'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":null}\n\n'
    b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)
MESSAGES = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","model":"c",'
    b'"usage":{"input_tokens":9,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: ping\ndata: {"type":"ping"}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Hi"}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":" there"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"max_tokens"},'
    b'"usage":{"output_tokens":2}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def _decoded(fmt: Format, raw: bytes, step: int) -> list[StreamEvent]:
    reader, decoder = SSEReader(), Decoder(fmt)
    out: list[StreamEvent] = []
    for i in range(0, len(raw), step):
        out += [decoder.decode(e) for e in reader.feed(raw[i : i + step])]
    assert decoder.ended
    return out


@pytest.mark.parametrize("step", [1, 7, 64, 100_000])
def test_events_come_whole_whatever_the_reads_split(step: int) -> None:
    chat = _decoded("chat", CHAT, step)
    assert [e.raw for e in chat] == [part + b"\n\n" for part in CHAT.split(b"\n\n")[:-1]]
    assert "".join(e.text for e in chat) == "Hi there"
    assert chat[0].start
    assert [e.finish for e in chat if e.finish] == ["length"]
    assert [e.usage for e in chat if e.usage] == [Usage(7, 2)]
    assert [e.usage_only for e in chat] == [False, False, False, False, True, False]
    messages = _decoded("messages", MESSAGES, step)
    assert "".join(e.text for e in messages) == "Hi there"
    assert [e.finish for e in messages if e.finish] == ["length"]
    assert [e.usage for e in messages if e.usage] == [Usage(9, 2)]  # the prompt from message_start


def test_crlf_comments_and_an_oversized_event() -> None:
    reader = SSEReader()
    assert reader.feed(b": keep-alive\r\n\r\n") == []
    (event,) = reader.feed(b"event: x\r\ndata: a\r\ndata: b\r\n\r\n")
    assert (event.name, event.data) == ("x", b"a\nb")
    with pytest.raises(SSEError):
        reader.feed(b"data: " + b"x" * (MAX_EVENT + 1))


def test_an_error_event_fails_the_stream() -> None:
    (event,) = SSEReader().feed(b'event: error\ndata: {"type":"error","error":{"message":"Overloaded"}}\n\n')
    with pytest.raises(StreamFailed, match="Overloaded"):
        Decoder("messages").decode(event)


def _rendered(client: Format, upstream: Format, raw: bytes, include_usage: bool = True) -> bytes:
    renderer = Renderer(client, include_usage=include_usage, model="route-model", now=1_700_000_000)
    return b"".join(renderer.render(e) for e in _decoded(upstream, raw, 1000))


def _datas(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for ev in SSEReader().feed(raw):
        if ev.data != b"[DONE]":
            out.append(orjson.loads(ev.data))
    return out


def test_a_format_passes_through_and_only_the_unasked_usage_chunk_is_left_out() -> None:
    assert _rendered("chat", "chat", CHAT) == CHAT
    assert _rendered("messages", "messages", MESSAGES) == MESSAGES
    stripped = _rendered("chat", "chat", CHAT, include_usage=False)
    assert b'"completion_tokens"' not in stripped
    assert stripped.endswith(b"data: [DONE]\n\n")


def test_messages_become_chat_chunks_and_chat_becomes_messages() -> None:
    chat = _datas(_rendered("chat", "messages", MESSAGES))
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chat if c["choices"]) == "Hi there"
    assert [c["choices"][0]["finish_reason"] for c in chat if c["choices"]][-1] == "length"
    assert chat[-1]["usage"] == {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
    assert {c["model"] for c in chat} == {"route-model"}
    messages = _datas(_rendered("messages", "chat", CHAT))
    kinds = [m["type"] for m in messages]
    assert kinds[0] == "message_start"
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    delta = next(m for m in messages if m["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "max_tokens"
    assert delta["usage"] == {"output_tokens": 2}  # held back until chat's usage chunk came


@pytest.mark.parametrize(("finish", "ending"), [("stop", "completed"), ("length", "incomplete")])
def test_chat_becomes_a_responses_stream_ending_in_the_whole_response(finish: str, ending: str) -> None:
    upstream = CHAT.replace(b'"finish_reason":"length"', f'"finish_reason":"{finish}"'.encode())
    events = _datas(_rendered("responses", "chat", upstream))
    assert events[0]["type"] == "response.created"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    done = events[-1]
    assert done["type"] == f"response.{ending}"
    assert done["response"]["status"] == ending
    assert done["response"]["output"][0]["content"][0]["text"] == "Hi there"
    assert done["response"]["usage"]["output_tokens"] == 2
    cut = {"reason": "max_output_tokens"} if finish == "length" else None
    assert done["response"].get("incomplete_details") == cut


@pytest.mark.parametrize("spaced", [False, True])
def test_a_light_decoder_counts_pieces_and_still_reads_the_usage(spaced: bool) -> None:
    raw = CHAT.replace(b'":', b'": ').replace(b'",', b'", ') if spaced else CHAT  # vLLM's spacing
    reader, light = SSEReader(), Decoder("chat", light=True)
    events = [light.decode(e) for e in reader.feed(raw)]
    assert [e.text for e in events] == ["", "", "", "", "", ""]  # relayed as they are: not parsed
    assert sum(e.pieces for e in events) == 2
    assert [e.usage for e in events if e.usage] == [Usage(7, 2)]
    assert light.ended


@pytest.mark.parametrize(("fmt", "raw"), [("chat", CHAT), ("messages", MESSAGES)])
def test_a_light_decoder_hands_on_a_run_of_pieces_as_one_event_with_its_bytes(
    fmt: Format, raw: bytes
) -> None:
    light = Decoder(fmt, light=True)
    events = light.decode_all(SSEReader().split(raw))  # the whole stream in one read
    assert b"".join(e.raw for e in events) == raw  # every byte relayed, in order
    assert sum(e.pieces for e in events) == 2
    assert len(events) < raw.count(b"\n\n")  # the pieces came together
    usage = [e.usage for e in events if e.usage]
    assert usage == ([Usage(7, 2)] if fmt == "chat" else [Usage(9, 2)])
    assert events[-1].done
    assert light.ended


def _groupings(parts: list[bytes]) -> list[list[bytes]]:
    """Every split of `parts` (whole events, in order) into contiguous reads."""
    out = []
    for cuts in range(2 ** (len(parts) - 1)):
        reads, current = [], parts[0]
        for i, part in enumerate(parts[1:]):
            if cuts >> i & 1:
                reads.append(current)
                current = part
            else:
                current += part
        out.append([*reads, current])
    return out


def _summary(decoder: Decoder, read: Callable[[], list[StreamEvent]]) -> tuple[object, ...]:
    try:
        events = read()
    except StreamFailed as exc:
        return ("failed", str(exc))
    usage = [e.usage for e in events if e.usage]
    finish = [e.finish for e in events if e.finish]
    return b"".join(e.raw for e in events), sum(e.pieces for e in events), usage, finish, decoder.ended


def _one_by_one(fmt: Format, reads: list[bytes], first: bytes = b"") -> tuple[object, ...]:
    """What a light decoder makes of `reads` event by event (after `first`, decoded apart)."""
    reference, by_one = SSEReader(), Decoder(fmt, light=True)
    by_one.decode_all(reference.split(first))
    return _summary(by_one, lambda: [by_one.decode(e) for r in reads for e in reference.feed(r)])


@pytest.mark.parametrize(
    ("fmt", "raw"),
    [
        ("chat", CHAT),
        ("chat", CHAT.replace(b'":', b'": ').replace(b'",', b'", ')),
        ("messages", MESSAGES),
        ("responses", None),
    ],
)
@pytest.mark.parametrize("shift", [0, 1, 9])
def test_a_read_scanned_whole_is_what_its_events_decoded_one_by_one_would_be(
    fmt: Format, raw: bytes | None, shift: int
) -> None:
    """Every split of a stream into reads (at event ends, or `shift` bytes into the next event):
    the same bytes, pieces, usage and finish as event by event."""
    if raw is None:  # a Responses stream: the chat stream rendered as one
        raw = _rendered("responses", "chat", CHAT)
    parts = [part + b"\n\n" for part in raw.split(b"\n\n")[:-1]]
    for grouping in _groupings(parts):
        ends = list(itertools.accumulate(len(r) for r in grouping))
        cuts = [0, *(min(e + shift, len(raw)) for e in ends[:-1]), len(raw)]
        reads = [raw[a:b] for a, b in itertools.pairwise(cuts) if b > a]
        reader, light = SSEReader(), Decoder(fmt, light=True)
        events: list[StreamEvent] = []
        for read in reads:
            events += light.decode_read(reader, read)
        expected = _one_by_one(fmt, reads)
        assert _summary(light, lambda: events) == expected  # noqa: B023 — called at once
        assert expected[0] == raw
        assert events[0].start
    whole = Decoder(fmt, light=True).decode_read(SSEReader(), raw)  # the answer in one read
    assert [e.pieces for e in whole][1] == 2  # its middle passed on as one event


@pytest.mark.parametrize(
    ("fmt", "read"),
    [
        ("chat", b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}\n\n'),
        ("chat", b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\n'),
        ("chat", b'data: {"error":{"message":"overloaded"}}\n\n'),
        ("chat", b"data: [DONE]\n\n"),
        ("chat", b": keep-alive\n\n"),
        ("chat", b'data: {"choices":[{"delta":{"content":"a"}}]}\ndata: {"choices":[]}\n\n'),
        ("messages", b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":3}}\n\n'),
        ("messages", b'event: error\ndata: {"type":"error","error":{"message":"overloaded"}}\n\n'),
        ("messages", b'event: message_stop\r\ndata: {"type":"message_stop"}\r\n\r\n'),
    ],
)
def test_what_must_be_parsed_is_parsed_after_a_run_passed_on(fmt: Format, read: bytes) -> None:
    """A read of pieces then an event the gateway must see: the same as event by event."""
    first = (CHAT if fmt == "chat" else MESSAGES).split(b"\n\n")[0] + b"\n\n"
    piece = (CHAT.split(b"\n\n")[1] if fmt == "chat" else MESSAGES.split(b"\n\n")[3]) + b"\n\n"
    light = Decoder(fmt, light=True)
    light.decode_all([first])
    expected = _one_by_one(fmt, [piece * 3 + read], first)
    assert _summary(light, lambda: light.decode_read(SSEReader(), piece * 3 + read)) == expected
