"""A ConverseStream answer (the AWS event-stream binary framing): read whole and put together as
the Converse answer it streams, so one translation serves both (`read_stream`, the client's
`stream: true`); or decoded frame by frame as its bytes arrive (`FrameDecoder`, the gateway's
streamed calls: each event a `stream_events.StreamEvent`).

Frames are decoded by botocore's `EventStreamBuffer` (prelude and message CRCs checked). The
events (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html):
`messageStart{role}`, `contentBlockStart{start{toolUse{toolUseId, name}}, contentBlockIndex}`,
`contentBlockDelta{delta{text | toolUse{input} | reasoningContent{text}}, contentBlockIndex}`,
`contentBlockStop`, `messageStop{stopReason}`, `metadata{usage, metrics}`. An exception frame
(`:message-type: exception`) names its error by `:exception-type` (`throttlingException`, ...):
`StreamFailure` carries it.
"""

from __future__ import annotations

from typing import Any

import orjson

from batchgate.models import Usage
from batchgate.providers import stream_tools
from batchgate.providers.bedrock_answer import STOP_REASONS, converse_usage
from batchgate.providers.stream_events import StreamEvent, StreamFailed, tools_on


class StreamFailure(Exception):
    """An exception event inside a stream: `error_type` as the header names it, and its message."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def read_stream(raw: bytes) -> dict[str, Any]:
    """The Converse answer a whole ConverseStream body streams (`ValueError` if it is not one)."""
    from botocore.eventstream import EventStreamBuffer, ParserError  # noqa: PLC0415 — optional extra

    buffer = EventStreamBuffer()
    buffer.add_data(raw)
    blocks: dict[int, dict[str, Any]] = {}
    answer: dict[str, Any] = {}
    try:
        for message in buffer:
            headers = message.headers
            payload = orjson.loads(message.payload) if message.payload else {}
            if headers.get(":message-type") != "event":
                error_type = str(headers.get(":exception-type") or headers.get(":error-code") or "")
                raise StreamFailure(error_type, str(payload.get("message", "")))
            _apply(str(headers.get(":event-type")), payload, blocks, answer)
        content = [_finished(blocks[i]) for i in sorted(blocks)]
    except (ParserError, orjson.JSONDecodeError, AttributeError, TypeError, KeyError) as exc:
        raise ValueError(f"not an event stream of Converse events ({type(exc).__name__})") from None
    if "stopReason" not in answer or "usage" not in answer:
        raise ValueError("the stream ended before messageStop and metadata")
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": answer["stopReason"],
        "usage": answer["usage"],
        "metrics": answer.get("metrics", {}),
    }


_Blocks = dict[int, dict[str, Any]]


def _apply(event: str, payload: dict[str, Any], blocks: _Blocks, answer: dict[str, Any]) -> None:
    index = payload.get("contentBlockIndex", 0)
    if event == "contentBlockStart":
        use = payload.get("start", {}).get("toolUse")
        if use is not None:
            start = {"toolUseId": use.get("toolUseId"), "name": use.get("name")}
            blocks[index] = {"toolUse": start, "input": ""}
    elif event == "contentBlockDelta":
        delta = payload.get("delta", {})
        block = blocks.setdefault(index, {})
        if "text" in delta:
            block["text"] = block.get("text", "") + delta["text"]
        elif "toolUse" in delta:
            block["input"] = block.get("input", "") + delta["toolUse"].get("input", "")
        elif "reasoningContent" in delta and "text" in delta["reasoningContent"]:
            block["reasoning"] = block.get("reasoning", "") + delta["reasoningContent"]["text"]
    elif event == "messageStop":
        answer["stopReason"] = payload.get("stopReason")
    elif event == "metadata":
        answer["usage"] = payload.get("usage")
        answer["metrics"] = payload.get("metrics", {})


def _finished(block: dict[str, Any]) -> dict[str, Any]:
    """A streamed block as Converse's answer holds it (a tool's input parsed from its pieces)."""
    if "toolUse" in block:
        text = block.get("input") or "{}"
        return {"toolUse": {**block["toolUse"], "input": orjson.loads(text)}}
    if "reasoning" in block:
        return {"reasoningContent": {"reasoningText": {"text": block["reasoning"]}}}
    return {"text": block.get("text", "")}


class FrameDecoder:
    """Decodes one ConverseStream's events as its bytes arrive (a frame split over reads is kept
    until whole): `messageStart` starts it, a `contentBlockDelta`'s text is a piece, a `toolUse`
    block's start, input pieces and stop a tool call's (`stream_tools`), `messageStop` gives the
    finish reason, `metadata` the usage and the end. An exception frame: `StreamFailure`
    (its type: the caller names the error by it); a frame that does not parse (its CRC checked) or
    a payload that is not JSON: `StreamFailed`. `request_id` (the answer's `x-amzn-RequestId`) is
    the stream's id, as it is a Converse answer's; `answer_tool`: the forced tool of a JSON
    `response_format` (`bedrock_translate.output_tool`), its input read as the answer's text."""

    def __init__(self, request_id: str | None = None, answer_tool: str | None = None) -> None:
        from botocore.eventstream import EventStreamBuffer  # noqa: PLC0415 — optional extra

        self._buffer = EventStreamBuffer()
        self._id = request_id
        self.calls = stream_tools.Calls(answer_tool)
        self._seen = False
        self.ended = False  # the stream's last event (metadata) was seen

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        """The events of the frames `chunk` completed, in order."""
        from botocore.eventstream import ParserError  # noqa: PLC0415 — optional extra

        self._buffer.add_data(chunk)
        out: list[StreamEvent] = []
        try:
            for message in self._buffer:
                out.append(self._event(message.headers, message.payload))
        except ParserError as exc:
            raise StreamFailed(f"not an AWS event stream ({type(exc).__name__})") from None
        return out

    def _event(self, headers: dict[str, Any], raw: bytes) -> StreamEvent:
        try:
            payload = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            raise StreamFailed("an event that is not JSON") from None
        if not isinstance(payload, dict):
            raise StreamFailed("an event that is not a JSON object")
        if headers.get(":message-type") != "event":
            kind = str(headers.get(":exception-type") or headers.get(":error-code") or "")
            raise StreamFailure(kind, str(payload.get("message", "")))
        out = StreamEvent("bedrock", raw, payload)
        name = headers.get(":event-type")
        if name == "contentBlockDelta":
            delta = payload.get("delta")
            text = delta.get("text") if isinstance(delta, dict) else None
            out.text = text if isinstance(text, str) else ""
        if name in ("contentBlockStart", "contentBlockDelta", "contentBlockStop"):
            tools_on(out, stream_tools.bedrock(name, payload, self.calls))
        elif name == "messageStop":
            reason = payload.get("stopReason")
            finish = STOP_REASONS.get(reason, "stop") if isinstance(reason, str) else "stop"
            out.finish = self.calls.finish(finish)
        elif name == "metadata":
            try:
                counts = converse_usage(payload.get("usage"))
            except ValueError:
                counts = None  # no usage: settled from what was produced
            if counts is not None:
                out.usage = Usage(counts["prompt_tokens"], counts["completion_tokens"])
            out.done = self.ended = True
        if not self._seen:
            self._seen = out.start = True
            out.meta = {"id": self._id}
        out.pieces = 1 if out.text or out.tools else 0
        return out
