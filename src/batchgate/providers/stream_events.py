"""A streamed answer's events, whatever their wire: each provider event decoded into one
`StreamEvent` (a start, a text piece, tool-call pieces (`stream_tools`), a finish reason, the
usage, the end), from
- `chat`: OpenAI's `chat.completion.chunk`s and `[DONE]`
  (https://platform.openai.com/docs/api-reference/chat-streaming),
- `responses`: the Responses API's events
  (https://platform.openai.com/docs/api-reference/responses-streaming),
- `messages`: Anthropic's Messages events (https://docs.anthropic.com/en/docs/build-with-claude/streaming),
- `gemini`: `:streamGenerateContent?alt=sse`'s `GenerateContentResponse` chunks, each a piece of
  the candidate's text, the last with its `finishReason` and `usageMetadata`
  (https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent; no end event:
  the chunk with a finish reason ends it, an error comes as a chunk with `error`),
- `bedrock`: ConverseStream's events, decoded from the AWS event-stream frames by
  `bedrock_stream.FrameDecoder` (its own reader: the frames are binary, not SSE).
The event keeps its wire bytes and format, so a proxy forwards it unchanged to a client of the
same format and translates it (`stream_render`) for another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from batchgate.models import Usage
from batchgate.providers import stream_tools
from batchgate.providers.gemini_answer import FINISH_REASONS, usage_of
from batchgate.providers.sse import SSEEvent, SSEReader, parse
from batchgate.providers.stream_tools import Calls, ToolDelta

Format = Literal["chat", "responses", "messages", "gemini", "bedrock"]
# Anthropic's stop reasons as chat's finish reasons (the translation `providers/translate.py` makes)
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


class StreamFailed(ValueError):
    """The provider ended the stream with an error event, or sent one that is not JSON."""


@dataclass(slots=True)
class StreamEvent:
    """One upstream event, decoded. `usage` is whole only on the event that completes it."""

    fmt: Format
    raw: bytes
    data: dict[str, Any] = field(default_factory=dict)
    start: bool = False  # the stream's first event (ids and model in `meta`)
    text: str = ""
    finish: str | None = None  # chat's names: stop, length, tool_calls, content_filter
    usage: Usage | None = None
    done: bool = False  # the stream's last event
    usage_only: bool = False  # chat's usage chunk (left out for a client that did not ask)
    meta: dict[str, Any] = field(default_factory=dict)  # id, model, created
    more: bool = False  # more events came in the same read (a relay writes them together)
    pieces: int = 0  # the pieces of text it carries (counted for what was produced)
    tools: tuple[ToolDelta, ...] = ()  # pieces of tool calls (`stream_tools`)


# What a light decoder parses (the rest only counted): each format's events that start or end a
# stream, carry its usage or an error
_NEEDED = {
    "messages": frozenset({"message_start", "message_delta", "message_stop", "error"}),
    "responses": frozenset({"response.created", "response.completed", "response.incomplete",
                            "response.failed", "error"}),
}  # fmt: skip
# the events that carry a piece of the answer (text, or a tool call's arguments)
_PIECE = {
    "messages": ("content_block_delta",),
    "responses": ("response.output_text.delta", "response.function_call_arguments.delta"),
}
# where an event the gateway must parse may start, by format (chat's by what its data holds)
_MUST_PARSE = {
    "chat": (b'"error"', b'"finish_reason":"', b'"finish_reason": "', b"data: [DONE]"),
    **{fmt: tuple(f"event: {name}\n".encode() for name in names) for fmt, names in _NEEDED.items()},
}
_RESPONSES_TOOLS = frozenset(
    {"response.output_item.added", "response.function_call_arguments.delta", "response.output_item.done"}
)
_PIECE_LINE = {fmt: f"event: {names[0]}\n".encode() for fmt, names in _PIECE.items()}  # text's
_ARGUMENTS_LINE = b"event: response.function_call_arguments.delta\n"


class Decoder:
    """Decodes one stream's events in order (Messages splits its usage over two events). A `light`
    one (its events relayed as they are) parses only what the gateway needs — the first event,
    the usage, the end, an error — and only counts the text pieces (`.text` stays empty, and
    `.tools`). `answer_tool`: the forced tool of a JSON `response_format`, read as text
    (`stream_tools.Calls`)."""

    def __init__(self, fmt: Format, *, light: bool = False, answer_tool: str | None = None) -> None:
        self.fmt = fmt
        self.light = light
        self.calls = Calls(answer_tool)
        self._seen = False
        self._prompt = 0  # Messages: the input tokens `message_start` said
        self.ended = False  # the stream's last event was seen

    def decode(self, event: SSEEvent) -> StreamEvent:
        out = StreamEvent(self.fmt, event.raw)
        if self.fmt == "chat" and event.data == b"[DONE]":
            out.done = self.ended = True
            return out
        if self.light and self._seen and (plain := self._plain(event.raw)) is not None:
            out.pieces = plain
            return out
        try:
            data = orjson.loads(event.data) if event.data else {}
        except orjson.JSONDecodeError:
            raise StreamFailed("an event that is not JSON") from None
        if not isinstance(data, dict):
            raise StreamFailed("an event that is not a JSON object")
        out.data = data
        if event.name == "error" or data.get("type") in ("error", "response.failed"):
            raise StreamFailed(_message(data))
        if self.fmt == "chat":
            self._chat(data, out)
        elif self.fmt == "responses":
            self._responses(data, out)
        elif self.fmt == "gemini":
            self._gemini(data, out)
        else:
            self._messages(data, out)
        if not self._seen:
            self._seen = out.start = True
        if out.finish is not None:
            out.finish = self.calls.finish(out.finish)
        self.ended = self.ended or out.done
        out.pieces = 1 if out.text or out.tools else 0
        return out

    def decode_all(self, raws: list[bytes]) -> list[StreamEvent]:
        """Events' bytes (`SSEReader.split`) decoded, comments left out. A light decoder looks
        into an event's bytes before parsing it: a run it need not parse (text pieces passed on as
        they are) comes as one event, their bytes together, their pieces counted."""
        out: list[StreamEvent] = []
        run: list[bytes] = []
        pieces = 0
        for raw in raws:
            if self.light and self._seen and (plain := self._plain(raw)) is not None:
                run.append(raw)
                pieces += plain
                continue
            event = parse(raw)
            if event is None:
                continue
            if run:
                out.append(StreamEvent(self.fmt, b"".join(run), pieces=pieces))
                run, pieces = [], 0
            out.append(self.decode(event))
        if run:
            out.append(StreamEvent(self.fmt, b"".join(run), pieces=pieces))
        return out

    def decode_read(self, reader: SSEReader, chunk: bytes) -> list[StreamEvent]:
        """One read's events (`reader` holds the part of an event the last read did not end). A
        light decoder passes on the run of events it need not parse as one event, found by
        scanning the read's bytes at once up to the first event it must parse (the stream's
        first, a finish, the usage, the end, an error), not event by event: a relayed answer's
        middle mostly comes so."""
        if reader.holding or not self.light or self.fmt not in _MUST_PARSE or b"\r" in chunk:
            return self.decode_all(reader.split(chunk))
        if chunk.count(b"\n\n") < 2:  # one event (a read under load, mostly): no scan pays
            return self.decode_all(reader.split(chunk))
        out: list[StreamEvent] = []
        if not self._seen:  # the first event is parsed
            end = chunk.find(b"\n\n") + 2
            if end < 2:
                return self.decode_all(reader.split(chunk))
            out, chunk = self.decode_all([chunk[:end]]), chunk[end:]
        n, pieces = self._plain_prefix(chunk)
        if n:
            out.append(StreamEvent(self.fmt, chunk[:n], pieces=pieces))
        return out + self.decode_all(reader.split(chunk[n:])) if n < len(chunk) else out

    def _plain_prefix(self, chunk: bytes) -> tuple[int, int]:
        """(the length of the run of whole events `chunk` starts with that `_plain` would pass
        on, the pieces of text in it); (0, 0) where there is none or the scan cannot tell."""
        stop = min(
            (i for marker in _MUST_PARSE[self.fmt] if (i := chunk.find(marker)) >= 0), default=len(chunk)
        )
        n = chunk.rfind(b"\n\n", 0, stop + 1) + 2  # the end of the last whole event before it
        if n < 2:
            return 0, 0
        run, events = chunk[:n], chunk.count(b"\n\n", 0, n)
        if self.fmt != "chat":
            if not run.startswith(b"event: ") or run.count(b"\n\nevent: ") != events - 1:
                return 0, 0
            pieces = run.count(_PIECE_LINE[self.fmt])
            return n, pieces + run.count(_ARGUMENTS_LINE) if self.fmt == "responses" else pieces
        if (
            not run.startswith(b"data: {")
            or run.count(b"\n\ndata: {") != events - 1
            or run.count(b"\n") != 2 * events
            or run.count(b'"usage"') != run.count(b'"usage":null') + run.count(b'"usage": null')
        ):
            return 0, 0
        pieces = run.count(b'"content":"') + run.count(b'"content": "') + run.count(b'"arguments":')
        return (n, pieces) if pieces <= events else (0, 0)

    def _plain(self, raw: bytes) -> int | None:
        """For an event's bytes the gateway need not parse: 1 if it carries a piece of text, else
        0; None for one it must parse (or cannot tell from its bytes)."""
        if self.fmt == "chat":
            if not raw.startswith(b"data: {") or raw.count(b"\n") != 2:
                return None
            if b'"error"' in raw or b'"finish_reason":"' in raw or b'"finish_reason": "' in raw:
                return None
            if b'"usage"' in raw and b'"usage":null' not in raw and b'"usage": null' not in raw:
                return None
            text = b'"content":"' in raw or b'"content": "' in raw
            return 1 if text or b'"arguments":' in raw else 0  # a piece of text or of a call's arguments
        if not raw.startswith(b"event: "):
            return None
        name = raw[7 : raw.find(b"\n")].decode("utf-8", "replace")
        if name in _NEEDED[self.fmt]:
            return None
        return 1 if name in _PIECE[self.fmt] else 0

    def _chat(self, data: dict[str, Any], out: StreamEvent) -> None:
        out.meta = data
        choices = data.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            choice = choices[0]
            delta = choice.get("delta")
            if isinstance(delta, dict):
                if isinstance(delta.get("content"), str):
                    out.text = delta["content"]
                if "tool_calls" in delta:
                    tools_on(out, stream_tools.chat(delta, self.calls))
            if isinstance(choice.get("finish_reason"), str):
                out.finish = choice["finish_reason"]
        usage = data.get("usage")
        if isinstance(usage, dict):
            out.usage = _usage(usage.get("prompt_tokens"), usage.get("completion_tokens"))
            out.usage_only = not choices

    def _responses(self, data: dict[str, Any], out: StreamEvent) -> None:
        kind = data.get("type")
        if kind == "response.output_text.delta" and isinstance(data.get("delta"), str):
            out.text = data["delta"]
        elif kind in _RESPONSES_TOOLS:
            tools_on(out, stream_tools.responses(kind, data, self.calls))
        elif kind in ("response.created", "response.completed", "response.incomplete"):
            response = data.get("response")
            if isinstance(response, dict):
                out.meta = {
                    "id": response.get("id"),
                    "model": response.get("model"),
                    "created": response.get("created_at"),
                }
                usage = response.get("usage")
                if kind != "response.created" and isinstance(usage, dict):
                    out.usage = _usage(usage.get("input_tokens"), usage.get("output_tokens"))
                if kind != "response.created":
                    out.finish, out.done = ("stop" if kind == "response.completed" else "length"), True

    def _messages(self, data: dict[str, Any], out: StreamEvent) -> None:
        kind = data.get("type")
        if kind == "message_start" and isinstance(data.get("message"), dict):
            message = data["message"]
            out.meta = {"id": message.get("id"), "model": message.get("model")}
            usage = message.get("usage")
            if isinstance(usage, dict) and type(usage.get("input_tokens")) is int:
                self._prompt = usage["input_tokens"]
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            text = data["delta"].get("text")
            out.text = text if isinstance(text, str) else ""
            if data["delta"].get("type") == "input_json_delta":
                tools_on(out, stream_tools.messages(kind, data, self.calls))
        elif kind in ("content_block_start", "content_block_stop"):
            tools_on(out, stream_tools.messages(kind, data, self.calls))
        elif kind == "message_delta":
            delta = data.get("delta")
            reason = delta.get("stop_reason") if isinstance(delta, dict) else None
            out.finish = FINISH.get(reason, "stop") if isinstance(reason, str) else None
            usage = data.get("usage")
            made = usage.get("output_tokens") if isinstance(usage, dict) else None
            out.usage = _usage(self._prompt, made)
        elif kind == "message_stop":
            out.done = True

    def _gemini(self, data: dict[str, Any], out: StreamEvent) -> None:
        if "error" in data:  # an error after the stream began (Google's error body as a chunk)
            raise StreamFailed(_message(data))
        out.meta = {"id": data.get("responseId"), "model": data.get("modelVersion")}
        candidates = data.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        if not isinstance(candidate, dict):
            return
        parts = (candidate.get("content") or {}).get("parts")
        if isinstance(parts, list):  # text parts (thoughts left out, as `gemini_answer` leaves them)
            texts = [p.get("text") for p in parts if isinstance(p, dict) and not p.get("thought")]
            out.text = "".join(t for t in texts if isinstance(t, str))
            tools_on(out, stream_tools.gemini(parts, self.calls))
        reason = candidate.get("finishReason")
        if isinstance(reason, str):  # the last chunk: its usage is the whole answer's
            out.finish, out.done = FINISH_REASONS.get(reason, "stop"), True
            meta = data.get("usageMetadata")
            try:
                counts = usage_of(meta) if isinstance(meta, dict) else None
            except ValueError:
                counts = None
            if counts is None:  # no usage: settled from what was produced
                return
            out.usage = Usage(counts["prompt_tokens"], counts["completion_tokens"])


def tools_on(out: StreamEvent, decoded: stream_tools.Decoded) -> None:
    """Put decoded tool-call pieces on `out` (the forced answer tool's as its text)."""
    tools, text = decoded
    if tools:
        out.tools = (*out.tools, *tools)
    if text:
        out.text += text


def _usage(prompt: Any, completion: Any) -> Usage | None:
    if type(prompt) is not int or type(completion) is not int or prompt < 0 or completion < 0:
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def _message(data: dict[str, Any]) -> str:
    error = data.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])[:300]
    return "the provider ended the stream with an error"
