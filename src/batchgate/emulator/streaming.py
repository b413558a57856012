"""The emulator's streamed answers: a request with `stream: true` (chat, Responses, Messages) is
answered as server-sent events, paced as a provider generates — the first event after the
time to first token (`latency.ttft_p50_ms`), then one event a token (`latency.per_token_ms`);
the `stall` fault stops mid-answer and hangs until the client goes (or the emulator stops).

Every event is written as it is made (aiohttp's connections have TCP_NODELAY). The events are the
providers' own (the answer's ids, usage and stop reason from the same body a request not streamed
gets):
- chat: `chat.completion.chunk`s, a role delta first, `data: [DONE]` last; with
  `stream_options.include_usage` every chunk has `"usage": null` and a last chunk with empty
  `choices` carries the usage (https://platform.openai.com/docs/api-reference/chat-streaming);
- Responses: `response.created`, `response.output_item.added`, `response.content_part.added`,
  `response.output_text.delta`s, their `.done`s and `response.completed` with the whole response
  (https://platform.openai.com/docs/api-reference/responses-streaming);
- Messages: `message_start`, `content_block_start`, `ping`, `content_block_delta`s,
  `content_block_stop`, `message_delta` (the output usage), `message_stop`
  (https://docs.anthropic.com/en/docs/build-with-claude/streaming);
- Gemini (`:streamGenerateContent?alt=sse`): `data:` events (CRLF-ended, as Google sends them) of
  `GenerateContentResponse` chunks, a piece of the text each, every one with the prompt's counts
  and the last with the `finishReason` and the whole `usageMetadata`
  (https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent);
- Bedrock (`/converse-stream`): ConverseStream's events in the AWS event-stream binary frames
  (`event_stream.converse_events`, a `contentBlockDelta` a token).
`Streams` keeps when each stream sent its first event, by the answer's id (the loop's monotonic
clock: a benchmark compares it with its own receive times), served at `GET /_emulator/streams`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import orjson
from aiohttp import web

from batchgate.clock import Clock
from batchgate.emulator.event_stream import CONTENT_TYPE, converse_events
from batchgate.emulator.provider import Plan
from batchgate.emulator.wire import ParsedRequest

_PIECE = re.compile(r"\s*\S+")  # about a token each: a word with the space before it
_SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_FRAMES = {"Content-Type": CONTENT_TYPE}  # Bedrock's
Event = tuple[str | None, bytes] | bytes  # the SSE event name (None: data only) and its data; framed
STREAMING_ACTIONS = (":streamGenerateContent", "/converse-stream")  # addresses that always stream


class Streams:
    """Streamed answers, and when each sent its first event (clock time, by the answer's id)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.first_sent: dict[str, float] = {}

    def reset(self) -> None:
        self.first_sent.clear()

    async def endpoint(self, request: web.Request) -> web.Response:
        body = orjson.dumps({"first_event_at": self.first_sent})
        return web.Response(body=body, content_type="application/json")

    async def respond(
        self,
        request: web.Request,
        provider: str,
        req: ParsedRequest,
        plan: Plan,
        answer: bytes,
        headers: dict[str, str],
        hang: Callable[[str], Awaitable[None]],
        rid: str = "",
    ) -> web.StreamResponse:
        """Stream `answer` (the body a request not streamed gets) as its family's events: the
        headers at once, the first event after the time to first token, the text's pieces
        `plan.per_token` seconds apart (by deadline, so the pace does not drift); the `stall`
        fault hangs halfway through the pieces instead of ending. `rid`: the request's id (the
        stream's name in `first_sent` when its answer has no id)."""
        clock = self._clock
        ttft = max(0.0, plan.delay - plan.per_token * plan.tokens * req.n)
        stall_after = plan.tokens // 2 if plan.fault == "stall" else None
        body = orjson.loads(answer)
        kind = _FRAMES if "stopReason" in body else _SSE
        response = web.StreamResponse(headers={**headers, **kind})
        await response.prepare(request)
        if ttft > 0:
            await clock.sleep(ttft)
        first, pieces = True, 0
        started = clock.now()
        name = str(body.get("id") or body.get("responseId") or rid)
        for is_piece, event in _events(req, body):
            if is_piece:
                pieces += 1
                if stall_after is not None and pieces > stall_after:
                    await hang(provider)
                    return response
                due = started + pieces * plan.per_token
                if due > clock.now():
                    await clock.sleep(due - clock.now())
            if first:  # when it is handed to the socket
                first = False
                self.first_sent[name] = clock.now()
            await response.write(_frame(event))
        await response.write_eof()
        return response


def mark(req: ParsedRequest, body: Any, path: str = "") -> None:
    """Note on `req` whether `body` asks to stream (and chat's usage chunk), or its address does
    (Gemini's `:streamGenerateContent`, Bedrock's `/converse-stream`)."""
    if path.endswith(STREAMING_ACTIONS):
        req.stream = True
    elif isinstance(body, dict) and body.get("stream") is True:
        req.stream = True
        options = body.get("stream_options")
        req.include_usage = isinstance(options, dict) and options.get("include_usage") is True


def _frame(event: Event) -> bytes:
    if isinstance(event, bytes):
        return event
    name, data = event
    if name is None:
        return b"data: " + data + b"\n\n"
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"


def _events(req: ParsedRequest, body: dict[str, Any]) -> Iterator[tuple[bool, Event]]:
    """(is a text piece, event) in order, for the request's family and endpoint."""
    if body.get("type") == "message":
        return _messages(body)
    if body.get("object") == "response":
        return _responses(body)
    if "candidates" in body:
        return _gemini(body)
    if "stopReason" in body:
        return converse_events(body)
    return _chat(body, req.include_usage)


def _text_of_chat(body: dict[str, Any]) -> str:
    choices = body.get("choices") or [{}]
    return str((choices[0].get("message") or {}).get("content") or "")


def _chat(body: dict[str, Any], include_usage: bool) -> Iterator[tuple[bool, Event]]:
    base: dict[str, Any] = {key: body.get(key) for key in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    if include_usage:
        base["usage"] = None

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return None, orjson.dumps({**base, "choices": [choice]})

    yield False, chunk({"role": "assistant", "content": "", "refusal": None})
    for piece in _PIECE.findall(_text_of_chat(body)):
        yield True, chunk({"content": piece})
    finish = (body.get("choices") or [{}])[0].get("finish_reason") or "stop"
    yield False, chunk({}, finish)
    if include_usage:
        yield False, (None, orjson.dumps({**base, "choices": [], "usage": body.get("usage")}))
    yield False, (None, b"[DONE]")


def _responses(body: dict[str, Any]) -> Iterator[tuple[bool, Event]]:
    seq = iter(range(1 << 30))

    def ev(name: str, **fields: Any) -> Event:
        return name, orjson.dumps({"type": name, "sequence_number": next(seq), **fields})

    output = (body.get("output") or [{}])[0]
    part = (output.get("content") or [{}])[0]
    text = str(part.get("text") or "")
    item_id = output.get("id")
    open_body = {**body, "status": "in_progress", "output": [], "usage": None}
    yield False, ev("response.created", response=open_body)
    yield False, ev("response.in_progress", response=open_body)
    open_item = {**output, "status": "in_progress", "content": []}
    yield False, ev("response.output_item.added", output_index=0, item=open_item)
    empty = {**part, "text": ""}
    where = {"item_id": item_id, "output_index": 0, "content_index": 0}
    yield False, ev("response.content_part.added", **where, part=empty)
    for piece in _PIECE.findall(text):
        yield True, ev("response.output_text.delta", **where, delta=piece, logprobs=[])
    yield False, ev("response.output_text.done", **where, text=text, logprobs=[])
    yield False, ev("response.content_part.done", **where, part=part)
    yield False, ev("response.output_item.done", output_index=0, item=output)
    yield False, ev("response.completed", response=body)


def _gemini(body: dict[str, Any]) -> Iterator[tuple[bool, Event]]:
    candidate = (body.get("candidates") or [{}])[0]
    parts = (candidate.get("content") or {}).get("parts") or []
    usage = body.get("usageMetadata") or {}
    counted = usage.get("promptTokenCount", 0)
    prompt = {"promptTokenCount": counted, "totalTokenCount": counted}  # before any output
    ids = {"modelVersion": body.get("modelVersion"), "responseId": body.get("responseId")}

    def chunk(some: list[Any], last: bool) -> bytes:
        piece: dict[str, Any] = {"content": {"parts": some, "role": "model"}, "index": 0}
        if last:
            piece["finishReason"] = candidate.get("finishReason")
        data = {"candidates": [piece], "usageMetadata": usage if last else prompt, **ids}
        return b"data: " + orjson.dumps(data) + b"\r\n\r\n"

    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    words = _PIECE.findall("".join(texts)) if len(texts) == len(parts) else []
    if not words:  # a function call (or nothing): one chunk
        yield False, chunk(parts, True)
    for i, word in enumerate(words):
        yield True, chunk([{"text": word}], i == len(words) - 1)


def _messages(body: dict[str, Any]) -> Iterator[tuple[bool, Event]]:
    def ev(name: str, **fields: Any) -> Event:
        return name, orjson.dumps({"type": name, **fields})

    usage = body.get("usage") or {}
    start_usage = {**usage, "output_tokens": 1}
    start = {**body, "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}
    yield False, ev("message_start", message=start)
    block = (body.get("content") or [{}])[0]
    yield False, ev("content_block_start", index=0, content_block={"type": "text", "text": ""})
    yield False, ev("ping")
    for piece in _PIECE.findall(str(block.get("text") or "")):
        yield True, ev("content_block_delta", index=0, delta={"type": "text_delta", "text": piece})
    yield False, ev("content_block_stop", index=0)
    end = {"stop_reason": body.get("stop_reason"), "stop_sequence": body.get("stop_sequence")}
    yield False, ev("message_delta", delta=end, usage={"output_tokens": usage.get("output_tokens", 0)})
    yield False, ev("message_stop")
