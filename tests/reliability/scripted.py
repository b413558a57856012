"""A tiny scripted provider on a loopback socket, for answers the emulator cannot give: absurd
retry hints (86400, negative, NaN, text), HTML or usage-less 200s, a reset after part of the body,
an error body that echoes the API key. Each request's answer comes from a `Script` callable.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from loopback import serving


@dataclass(frozen=True, slots=True)
class Answer:
    status: int = 200
    body: bytes | None = None  # None: a valid chat.completion for the request
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    action: str = "respond"  # respond | reset (no answer) | partial (half the body, then RST) | hang


@dataclass(frozen=True, slots=True)
class Arrival:
    index: int
    at: float  # time.monotonic() when the handler ran
    prompt: str
    authorization: str


Script = Callable[[int, dict[str, Any]], Answer]


def completion(body: dict[str, Any], text: str = "ok") -> bytes:
    return orjson.dumps(
        {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "m"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        }
    )


def error_body(kind: str, message: str, code: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": kind, "code": code, "param": None}})


class ScriptedServer:
    """An OpenAI-compatible `/v1/chat/completions` answering by script, on 127.0.0.1."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.arrivals: list[Arrival] = []
        self.hooks: list[Callable[[Arrival, Answer], None]] = []
        self._serving = contextlib.AsyncExitStack()
        self._hangs: list[asyncio.Future[None]] = []
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> ScriptedServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        url = await self._serving.enter_async_context(serving(app, shutdown_timeout=0.5))
        self.port = int(url.rsplit(":", 1)[1])
        return self

    async def stop(self) -> None:
        for fut in self._hangs:
            if not fut.done():
                fut.set_result(None)
        await self._serving.aclose()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        messages = body.get("messages") or [{}]
        arrival = Arrival(
            len(self.arrivals),
            time.monotonic(),
            str(messages[-1].get("content", "")),
            request.headers.get("Authorization", ""),
        )
        self.arrivals.append(arrival)
        answer = self.script(arrival.index, body)
        for hook in self.hooks:
            hook(arrival, answer)
        if answer.action == "reset":
            return _abort(request)
        if answer.action == "hang":
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._hangs.append(fut)
            await fut
            return _abort(request)
        payload = completion(body) if answer.body is None else answer.body
        if answer.action == "partial":
            resp = web.StreamResponse(status=answer.status, headers={"Content-Type": answer.content_type})
            resp.content_length = len(payload)
            await resp.prepare(request)
            await resp.write(payload[: len(payload) // 2])
            await asyncio.sleep(0.05)
            return _abort(request)
        headers = {"Content-Type": answer.content_type, **answer.headers}
        return web.Response(status=answer.status, body=payload, headers=headers)


def _abort(request: web.Request) -> web.Response:
    transport = request.transport
    if transport is not None:
        with contextlib.suppress(OSError):
            transport.abort()
    return web.Response(status=499)
