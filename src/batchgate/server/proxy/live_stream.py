"""A live answer as server-sent events, for clients that ask `stream: true`: the gateway's answer is
whole before it is written (the provider call itself is not streamed), so the stream carries it in
one delta — OpenAI's `chat.completion.chunk` events and `data: [DONE]`, or Anthropic's
`message_start` … `message_stop` — which is what the SDKs' stream readers expect.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

_SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


async def _open(request: web.Request, headers: dict[str, str]) -> web.StreamResponse:
    response = web.StreamResponse(headers={**_SSE, **headers})
    await response.prepare(request)
    return response


async def openai_events(
    request: web.Request, answer: dict[str, Any], include_usage: bool, headers: dict[str, str]
) -> web.StreamResponse:
    """The chat completion `answer` as OpenAI's chunk stream."""
    response = await _open(request, headers)
    base = {key: answer.get(key) for key in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    choices = answer.get("choices") or [{}]
    for choice in choices:
        message = choice.get("message") or {}
        delta = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        index = choice.get("index", 0)
        first = {"index": index, "delta": delta, "finish_reason": None}
        last = {"index": index, "delta": {}, "finish_reason": choice.get("finish_reason") or "stop"}
        for part in (first, last):
            await _data(response, {**base, "choices": [part]})
    if include_usage:
        await _data(response, {**base, "choices": [], "usage": answer.get("usage")})
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def anthropic_events(
    request: web.Request, message: dict[str, Any], headers: dict[str, str]
) -> web.StreamResponse:
    """The Anthropic `message` as the Messages API's event stream."""
    response = await _open(request, headers)
    usage = message.get("usage") or {}
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": usage.get("input_tokens", 0), "output_tokens": 0}}  # fmt: skip
    await _event(response, "message_start", {"type": "message_start", "message": start})
    for i, block in enumerate(message.get("content") or []):
        empty: dict[str, Any] = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block.get("text") or ""}
        if block.get("type") == "tool_use":  # a tool call streams its input as JSON deltas
            empty = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": orjson.dumps(block.get("input")).decode()}
        await _event(response, "content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": empty})  # fmt: skip
        await _event(response, "content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": delta})  # fmt: skip
        await _event(response, "content_block_stop", {"type": "content_block_stop", "index": i})
    end = {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")}
    output = {"output_tokens": usage.get("output_tokens", 0)}
    await _event(response, "message_delta", {"type": "message_delta", "delta": end, "usage": output})
    await _event(response, "message_stop", {"type": "message_stop"})
    await response.write_eof()
    return response


async def _data(response: web.StreamResponse, data: dict[str, Any]) -> None:
    await response.write(b"data: " + orjson.dumps(data) + b"\n\n")


async def _event(response: web.StreamResponse, name: str, data: dict[str, Any]) -> None:
    await response.write(b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n")
