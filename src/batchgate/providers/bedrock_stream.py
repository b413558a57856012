"""A ConverseStream answer (the AWS event-stream binary framing) read whole and put together as
the Converse answer it streams, so one translation serves both.

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
