"""Gemini's and Bedrock's streamed answers decoded into `StreamEvent`s: Gemini's `alt=sse` chunks
(CRLF-ended, as Google sends them) across any split of their bytes, Bedrock's ConverseStream
frames fed a byte at a time (a frame is whole only once its last byte came), their finish reason
and usage on the right event, an error or an exception frame a `StreamFailed`, and both rendered
in each client's format."""

from __future__ import annotations

import orjson
import pytest

from batchgate.emulator.event_stream import event, exception, frame
from batchgate.errors import RateLimitError
from batchgate.models import Usage
from batchgate.providers.bedrock import stream_exception
from batchgate.providers.bedrock_stream import FrameDecoder, StreamFailure
from batchgate.providers.sse import SSEReader
from batchgate.providers.stream_events import Decoder, Format, StreamEvent, StreamFailed
from batchgate.providers.stream_render import Renderer

# The shape https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent shows:
# every chunk has the prompt's counts, the last one the finish reason and the whole usage.
GEMINI = (
    b'data: {"candidates": [{"content": {"parts": [{"text": "Hi"}],"role": "model"},"index": 0}],'
    b'"usageMetadata": {"promptTokenCount": 7,"totalTokenCount": 7},"modelVersion": "gemini-2.5-flash",'
    b'"responseId": "r1"}\r\n\r\n'
    b'data: {"candidates": [{"content": {"parts": [{"text": "thinking","thought": true},'
    b'{"text": " there"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 7,'
    b'"totalTokenCount": 7},"modelVersion": "gemini-2.5-flash","responseId": "r1"}\r\n\r\n'
    b'data: {"candidates": [{"content": {"parts": [{"text": "!"}],"role": "model"},'
    b'"finishReason": "MAX_TOKENS","index": 0}],"usageMetadata": {"promptTokenCount": 7,'
    b'"candidatesTokenCount": 3,"thoughtsTokenCount": 2,"totalTokenCount": 12},'
    b'"modelVersion": "gemini-2.5-flash","responseId": "r1"}\r\n\r\n'
)


def _bedrock(stop: str = "max_tokens") -> bytes:
    return b"".join(
        (
            event("messageStart", {"role": "assistant"}),
            event("contentBlockDelta", {"delta": {"text": "Hi"}, "contentBlockIndex": 0}),
            event("contentBlockDelta", {"delta": {"text": " there"}, "contentBlockIndex": 0}),
            event("contentBlockStop", {"contentBlockIndex": 0}),
            event("messageStop", {"stopReason": stop}),
            event("metadata", {"usage": {"inputTokens": 9, "outputTokens": 2, "totalTokens": 11},
                               "metrics": {"latencyMs": 40}}),
        )
    )  # fmt: skip


def _gemini_events(raw: bytes, size: int) -> list[StreamEvent]:
    reader, decoder = SSEReader(), Decoder("gemini")
    out: list[StreamEvent] = []
    for i in range(0, len(raw), size):
        out.extend(decoder.decode_all(reader.split(raw[i : i + size])))
    assert decoder.ended
    return out


@pytest.mark.parametrize("size", [1, 7, 64, len(GEMINI)])
def test_gemini_chunks_decode_across_any_split(size: int) -> None:
    events = _gemini_events(GEMINI, size)
    assert [ev.text for ev in events] == ["Hi", " there", "!"]  # the thought left out
    assert events[0].start
    assert events[0].meta == {"id": "r1", "model": "gemini-2.5-flash"}
    assert [ev.done for ev in events] == [False, False, True]
    assert events[-1].finish == "length"
    assert events[-1].usage == Usage(7, 5)  # thinking tokens are output, as OpenAI counts them
    assert all(ev.usage is None for ev in events[:-1])  # the prompt's counts alone: no usage yet


FIRST_CHUNK = GEMINI[: GEMINI.index(b"\r\n\r\n") + 4]


def test_a_gemini_stream_without_its_finish_chunk_has_not_ended() -> None:
    decoder = Decoder("gemini")
    decoder.decode_all(SSEReader().split(FIRST_CHUNK))
    assert not decoder.ended  # the stream that stops here broke off (`UpstreamStream` says so)


def test_an_error_chunk_in_a_gemini_stream_fails_it() -> None:
    error = {"error": {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}}
    raw = FIRST_CHUNK + b"data: " + orjson.dumps(error) + b"\r\n\r\n"
    with pytest.raises(StreamFailed, match="internal error"):
        Decoder("gemini").decode_all(SSEReader().split(raw))


def _bedrock_events(raw: bytes, size: int) -> list[StreamEvent]:
    decoder = FrameDecoder("rid-1")
    out: list[StreamEvent] = []
    for i in range(0, len(raw), size):
        out.extend(decoder.feed(raw[i : i + size]))
    assert decoder.ended
    return out


@pytest.mark.parametrize("size", [1, 13, len(_bedrock())])
def test_bedrock_frames_decode_as_their_bytes_arrive(size: int) -> None:
    events = _bedrock_events(_bedrock(), size)
    assert len(events) == 6
    assert events[0].start
    assert events[0].meta == {"id": "rid-1"}  # the request's id, as a Converse answer's
    assert not events[0].text
    assert "".join(ev.text for ev in events) == "Hi there"
    assert [ev.pieces for ev in events] == [0, 1, 1, 0, 0, 0]
    assert events[4].finish == "length"
    assert events[5].usage == Usage(9, 2)
    assert events[5].done


def test_a_frame_is_handed_on_only_once_whole() -> None:
    decoder, one = FrameDecoder(), event("messageStart", {"role": "assistant"})
    assert decoder.feed(one[:-1]) == []  # its CRC not yet come
    assert len(decoder.feed(one[-1:])) == 1


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (event("messageStart", {"role": "assistant"})[:-1] + b"\x00", "not an AWS event stream"),
        (frame({":event-type": "metadata", ":message-type": "event"}, b"{not json"), "not JSON"),
    ],
    ids=["bad-crc", "not-json"],
)
def test_a_broken_bedrock_stream_fails(raw: bytes, words: str) -> None:
    with pytest.raises(StreamFailed, match=words):
        FrameDecoder().feed(event("messageStart", {"role": "assistant"}) + raw)


def test_an_exception_frame_is_named_by_its_type() -> None:
    with pytest.raises(StreamFailure) as caught:
        FrameDecoder().feed(
            event("messageStart", {"role": "assistant"}) + exception("throttlingException", "Slow")
        )
    assert caught.value.error_type == "throttlingException"
    error = stream_exception("br", 200, {}, caught.value, "http://x/converse-stream")
    assert isinstance(error, RateLimitError)  # the quota learns from it, as from a 429
    assert "ThrottlingException in the stream: Slow" in str(error)


def _rendered(events: list[StreamEvent], fmt: Format) -> bytes:
    renderer = Renderer(fmt, include_usage=True, model="route", now=1000.0)
    return b"".join(renderer.render(ev) for ev in events)


@pytest.mark.parametrize("fmt", ["chat", "responses", "messages"])
@pytest.mark.parametrize("kind", ["gemini", "bedrock"])
def test_each_kind_is_rendered_in_each_clients_format(kind: str, fmt: Format) -> None:
    events = _gemini_events(GEMINI, 64) if kind == "gemini" else _bedrock_events(_bedrock(), 64)
    written = [e for e in SSEReader().feed(_rendered(events, fmt)) if e.data != b"[DONE]"]
    bodies = [orjson.loads(e.data) for e in written]
    if fmt == "chat":
        assert bodies[-1]["usage"]["completion_tokens"] == events[-1].usage.completion_tokens  # type: ignore[union-attr]
        assert bodies[-2]["choices"][0]["finish_reason"] == "length"
    elif fmt == "responses":
        assert bodies[-1]["type"] == "response.incomplete"  # cut at max_tokens ("length")
        assert bodies[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
        text = bodies[-1]["response"]["output"][0]["content"][0]["text"]
        assert text == "".join(ev.text for ev in events)
    else:
        assert [b["type"] for b in bodies][-2:] == ["message_delta", "message_stop"]
        assert bodies[-2]["delta"]["stop_reason"] == "max_tokens"
