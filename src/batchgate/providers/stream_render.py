"""A streamed answer written in the client's format, one upstream event at a time: an event of
the client's own format goes out as its bytes (chat's usage chunk left out when the client did not
ask for it); another is translated (`stream_events` has each format's source). The one event a
translation holds back: Messages' `message_delta` carries the output usage, which chat sends after
its finish chunk, so the finish waits for the usage (or the end).
"""

from __future__ import annotations

from typing import Any

import orjson

from batchgate.models import Usage
from batchgate.providers.stream_events import FINISH, Format, StreamEvent

_STOP = {chat: anthropic for anthropic, chat in reversed(FINISH.items())}  # chat's names -> Anthropic's


def _sse(name: str | None, data: dict[str, Any]) -> bytes:
    body = orjson.dumps(data)
    if name is None:
        return b"data: " + body + b"\n\n"
    return b"event: " + name.encode() + b"\ndata: " + body + b"\n\n"


# chat's finish reasons that end a Responses answer `incomplete`, and the reason it names
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


class Renderer:
    """Writes one stream for a client of format `fmt`; see the module docstring."""

    def __init__(self, fmt: Format, *, include_usage: bool, model: str, now: float) -> None:
        """`now`: the wall time (an id and `created` where the provider's events give none)."""
        self.fmt = fmt
        self._now = int(now)
        self.include_usage = include_usage
        self.model = model
        self._meta: dict[str, Any] = {}
        self._text: list[str] = []
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._ended = False
        self._seq = 0

    def render(self, ev: StreamEvent) -> bytes:
        if ev.fmt == self.fmt:
            return b"" if ev.usage_only and not self.include_usage else ev.raw
        out = []
        if ev.start:
            self._meta = {k: v for k, v in ev.meta.items() if v is not None}
            out.append(self._start())
        if ev.text:
            self._text.append(ev.text)
            out.append(self._piece(ev.text))
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
        output = [self._item(done)] if done else []
        return {
            "id": self._id("resp_"),
            "object": "response",
            "created_at": self._now,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": {
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
                "input_tokens_details": {"cached_tokens": 0},
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

    def _item(self, done: bool) -> dict[str, Any]:
        part = {"type": "output_text", "text": "".join(self._text), "annotations": []}
        return {
            "id": "msg_" + self._id("resp_"),
            "type": "message",
            "role": "assistant",
            "status": "completed" if done else "in_progress",
            "content": [part] if done else [],
        }

    def _where(self) -> dict[str, Any]:
        return {"item_id": "msg_" + self._id("resp_"), "output_index": 0, "content_index": 0}

    def _start(self) -> bytes:
        if self.fmt == "chat":
            return _sse(None, self._chunk({"role": "assistant", "content": ""}))
        if self.fmt == "responses":
            part = {"type": "output_text", "text": "", "annotations": []}
            return b"".join(
                (
                    self._event("response.created", response=self._response("in_progress")),
                    self._event("response.output_item.added", output_index=0, item=self._item(False)),
                    self._event("response.content_part.added", **self._where(), part=part),
                )
            )
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
        block = {"type": "text", "text": ""}
        return _sse("message_start", {"type": "message_start", "message": message}) + _sse(
            "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
        )

    def _piece(self, text: str) -> bytes:
        if self.fmt == "chat":
            return _sse(None, self._chunk({"content": text}))
        if self.fmt == "responses":
            return self._event("response.output_text.delta", **self._where(), delta=text, logprobs=[])
        delta = {"type": "text_delta", "text": text}
        return _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})

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
        if self.fmt == "responses":
            text, item = "".join(self._text), self._item(True)
            return b"".join(
                (
                    self._event("response.output_text.done", **self._where(), text=text, logprobs=[]),
                    self._event("response.content_part.done", **self._where(), part=item["content"][0]),
                    self._event("response.output_item.done", output_index=0, item=item),
                    self._ended_response(finish),
                )
            )
        made = usage.completion_tokens if usage is not None else 0
        delta = {"stop_reason": _STOP.get(finish, "end_turn"), "stop_sequence": None}
        return b"".join(
            (
                _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
                _sse(
                    "message_delta",
                    {"type": "message_delta", "delta": delta, "usage": {"output_tokens": made}},
                ),
                _sse("message_stop", {"type": "message_stop"}),
            )
        )
