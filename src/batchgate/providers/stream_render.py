"""A streamed answer written in the client's format, one upstream event at a time: an event of
the client's own format goes out as its bytes (chat's usage chunk left out when the client did not
ask for it); another is translated (`stream_events` has each format's source): its text and its
tool calls (`stream_tools.ToolDelta`) — chat's `tool_calls` deltas (finish `tool_calls`), Messages'
`tool_use` blocks with `input_json_delta` pieces (stop `tool_use`), Responses' `function_call`
output items with `response.function_call_arguments.delta`/`.done` (the final response's output
holding them). Messages' blocks and Responses' items are opened as their first piece comes, one
after another (text after a tool call is a block of its own), so an answer that only calls a tool
has no empty text block. The one event a translation holds back: Messages' `message_delta`
carries the output usage, which chat sends after its finish chunk, so the finish waits for the
usage (or the end).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from batchgate.models import Usage
from batchgate.providers.stream_events import FINISH, Format, StreamEvent
from batchgate.providers.stream_tools import ToolDelta

_STOP = {chat: anthropic for anthropic, chat in reversed(FINISH.items())}  # chat's names -> Anthropic's


def _sse(name: str | None, data: dict[str, Any]) -> bytes:
    body = orjson.dumps(data)
    if name is None:
        return b"data: " + body + b"\n\n"
    return b"event: " + name.encode() + b"\ndata: " + body + b"\n\n"


# chat's finish reasons that end a Responses answer `incomplete`, and the reason it names
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


@dataclass(slots=True)
class _Item:
    """One of the answer's Messages content blocks or Responses output items: text, or a call."""

    at: int  # its block index / output_index
    call: ToolDelta | None = None  # a tool call's start (its index, id, name); None: text
    parts: list[str] = field(default_factory=list)  # its text, or its arguments' pieces
    closed: bool = False


class Renderer:
    """Writes one stream for a client of format `fmt`; see the module docstring."""

    def __init__(self, fmt: Format, *, include_usage: bool, model: str, now: float) -> None:
        """`now`: the wall time (an id and `created` where the provider's events give none)."""
        self.fmt = fmt
        self._now = int(now)
        self.include_usage = include_usage
        self.model = model
        self._meta: dict[str, Any] = {}
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._ended = False
        self._seq = 0
        self._items: list[_Item] = []
        self._open: _Item | None = None
        self._calls: dict[int, _Item] = {}  # a call's index -> its item

    def render(self, ev: StreamEvent) -> bytes:
        if ev.fmt == self.fmt:
            return b"" if ev.usage_only and not self.include_usage else ev.raw
        out = []
        if ev.start:
            self._meta = {k: v for k, v in ev.meta.items() if v is not None}
            out.append(self._start())
        if ev.text:
            out.append(self._piece(ev.text))
        for tool in ev.tools:
            out.append(self._tool(tool))
        if ev.finish is not None:
            self._finish = ev.finish
        if ev.usage is not None:
            self._usage = ev.usage
        if (ev.done or (ev.usage is not None and self._finish is not None)) and not self._ended:
            self._ended = True
            out.append(self._end())
        return b"".join(out)

    def error(self, kind: str, message: str) -> bytes:
        """The event a stream broken mid-way ends with, in the client's format."""
        if self.fmt == "messages":
            return _sse("error", {"type": "error", "error": {"type": "api_error", "message": message}})
        if self.fmt == "responses":
            return _sse("error", {"type": "error", "code": kind, "message": message, "param": None})
        return _sse(None, {"error": {"type": "server_error", "code": kind, "message": message}})

    # -- each format ----------------------------------------------------------------------------
    def _id(self, prefix: str) -> str:
        return str(self._meta.get("id") or f"{prefix}{self._now:x}")

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": self._id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": int(self._meta.get("created") or self._now),
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def _event(self, name: str, **fields: Any) -> bytes:
        self._seq += 1
        return _sse(name, {"type": name, "sequence_number": self._seq - 1, **fields})

    def _response(self, status: str) -> dict[str, Any]:
        usage = self._usage or Usage(0, 0)
        done = status != "in_progress"
        return {
            "id": self._id("resp_"),
            "object": "response",
            "created_at": self._now,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": self.model,
            "output": [self._output(item) for item in self._items] if done else [],
            # as `responses_translate.anthropic_to_response` says them (the SDK's types require them)
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            }
            if done
            else None,
        }

    def _ended_response(self, finish: str) -> bytes:
        """`response.completed`, or `response.incomplete` with its reason where the answer was cut
        (https://platform.openai.com/docs/api-reference/responses-streaming/response/incomplete)."""
        reason = _INCOMPLETE.get(finish)
        if reason is None:
            return self._event("response.completed", response=self._response("completed"))
        response = {**self._response("incomplete"), "incomplete_details": {"reason": reason}}
        return self._event("response.incomplete", response=response)

    def _start(self) -> bytes:
        if self.fmt == "chat":
            return _sse(None, self._chunk({"role": "assistant", "content": ""}))
        if self.fmt == "responses":
            return self._event("response.created", response=self._response("in_progress"))
        message: dict[str, Any] = {
            "id": self._id("msg_"),
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self.model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return _sse("message_start", {"type": "message_start", "message": message})

    def _piece(self, text: str) -> bytes:
        if self.fmt == "chat":
            return _sse(None, self._chunk({"content": text}))
        out = b""
        item = self._open
        if item is None or item.call is not None:
            item, out = self._opened(None)
        item.parts.append(text)
        if self.fmt == "responses":
            where = self._where(item)
            return out + self._event("response.output_text.delta", **where, delta=text, logprobs=[])
        delta = {"type": "text_delta", "text": text}
        return out + _sse(
            "content_block_delta", {"type": "content_block_delta", "index": item.at, "delta": delta}
        )

    def _tool(self, tool: ToolDelta) -> bytes:
        if self.fmt == "chat":
            return self._chat_tool(tool)
        out = b""
        item = self._calls.get(tool.index)
        if item is None:
            start = ToolDelta(tool.index, tool.id, tool.name, start=True)
            item, out = self._opened(start)
            self._calls[tool.index] = item
        if tool.arguments:
            item.parts.append(tool.arguments)
            out += self._arguments(item, tool.arguments)
        if tool.end and not item.closed:
            out += self._close(item)
        return out

    def _chat_tool(self, tool: ToolDelta) -> bytes:
        """A `tool_calls` delta: the call's id, type and name at its start, then its arguments."""
        call: dict[str, Any] = {"index": tool.index}
        if tool.start:
            call["id"] = _call_id(tool)
            call["type"] = "function"
            call["function"] = {"name": tool.name or "", "arguments": tool.arguments}
        elif tool.arguments:
            call["function"] = {"arguments": tool.arguments}
        else:
            return b""  # an end: chat's calls end with the finish
        return _sse(None, self._chunk({"tool_calls": [call]}))

    def _opened(self, call: ToolDelta | None) -> tuple[_Item, bytes]:
        """A new block or item (the open one closed first), and the events that open it."""
        out = self._close(self._open) if self._open is not None and not self._open.closed else b""
        item = _Item(len(self._items), call)
        self._items.append(item)
        self._open = item
        if self.fmt == "responses":
            out += self._event("response.output_item.added", output_index=item.at, item=self._output(item))
            if call is None:
                part = {"type": "output_text", "text": "", "annotations": []}
                out += self._event("response.content_part.added", **self._where(item), part=part)
            return item, out
        block: dict[str, Any] = {"type": "text", "text": ""}
        if call is not None:
            block = {"type": "tool_use", "id": _call_id(call, "toolu_"), "name": call.name or "", "input": {}}
        start = {"type": "content_block_start", "index": item.at, "content_block": block}
        return item, out + _sse("content_block_start", start)

    def _arguments(self, item: _Item, piece: str) -> bytes:
        if self.fmt == "responses":
            return self._event(
                "response.function_call_arguments.delta", **self._where(item, content=False), delta=piece
            )
        delta = {"type": "input_json_delta", "partial_json": piece}
        return _sse("content_block_delta", {"type": "content_block_delta", "index": item.at, "delta": delta})

    def _close(self, item: _Item) -> bytes:
        item.closed = True
        if self._open is item:
            self._open = None
        if self.fmt == "messages":
            return _sse("content_block_stop", {"type": "content_block_stop", "index": item.at})
        done = self._output(item)
        if item.call is not None:
            where = self._where(item, content=False)
            return self._event(
                "response.function_call_arguments.done", **where, arguments=done["arguments"]
            ) + self._event("response.output_item.done", output_index=item.at, item=done)
        text, where = done["content"][0]["text"], self._where(item)
        return b"".join(
            (
                self._event("response.output_text.done", **where, text=text, logprobs=[]),
                self._event("response.content_part.done", **where, part=done["content"][0]),
                self._event("response.output_item.done", output_index=item.at, item=done),
            )
        )

    def _output(self, item: _Item) -> dict[str, Any]:
        """A Responses output item as it stands (done once closed)."""
        status = "completed" if item.closed else "in_progress"
        if item.call is not None:
            return {
                "id": self._item_id(item),
                "type": "function_call",
                "status": status,
                "call_id": _call_id(item.call),
                "name": item.call.name or "",
                "arguments": "".join(item.parts),
            }
        part = {"type": "output_text", "text": "".join(item.parts), "annotations": []}
        return {
            "id": self._item_id(item),
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": [part] if item.closed else [],
        }

    def _item_id(self, item: _Item) -> str:
        if item.call is not None:
            return "fc_" + _call_id(item.call)
        return "msg_" + self._id("resp_") + (f"_{item.at}" if item.at else "")

    def _where(self, item: _Item, *, content: bool = True) -> dict[str, Any]:
        where = {"item_id": self._item_id(item), "output_index": item.at}
        return {**where, "content_index": 0} if content else where

    def _end(self) -> bytes:
        finish = self._finish or "stop"
        usage = self._usage
        if self.fmt == "chat":
            out = [_sse(None, self._chunk({}, finish))]
            if self.include_usage and usage is not None:
                total = usage.prompt_tokens + usage.completion_tokens
                counts = {
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "total_tokens": total,
                }
                out.append(_sse(None, {**self._chunk({}), "choices": [], "usage": counts}))
            out.append(b"data: [DONE]\n\n")
            return b"".join(out)
        out = [self._opened(None)[1]] if not self._items else []  # an empty answer: one empty text
        out += [self._close(item) for item in self._items if not item.closed]
        if self.fmt == "responses":
            return b"".join((*out, self._ended_response(finish)))
        made = usage.completion_tokens if usage is not None else 0
        delta = {"stop_reason": _STOP.get(finish, "end_turn"), "stop_sequence": None}
        return b"".join(
            (
                *out,
                _sse(
                    "message_delta",
                    {"type": "message_delta", "delta": delta, "usage": {"output_tokens": made}},
                ),
                _sse("message_stop", {"type": "message_stop"}),
            )
        )


def _call_id(call: ToolDelta, prefix: str = "call_") -> str:
    """The call's id (the provider's; one made of its index where none came)."""
    return call.id or f"{prefix}{call.index}"
