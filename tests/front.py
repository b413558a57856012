"""A loopback server answering like the LiteLLM proxy in front of a provider, on a FakeClock.

Its shapes are LiteLLM 1.108's (shared/PROTOCOLS.md, "Servers in front of providers"): on a
200 `x-ratelimit-{limit,remaining}-{requests,tokens}` (no reset); its own 429 a
`throttling_error` body with only `llm_provider-retry-after` (no plain `retry-after`), its router
counting per calendar minute; an upstream's 429 relayed with its headers prefixed
`llm_provider-`. Besides, a server capped at `cap` in flight answering the excess with a bare 429
(an empty body, no header), where every other request's connection is counted `late` seconds
after it arrived: requests sent together reach its cap out of order, so one sent with 2 in
flight may be the one turned away. Latency and
all waits are on the given FakeClock (`clocks.on_fake_time` moves it), so a pace is judged on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from batchgate.clock import FakeClock
from loopback import serving


@dataclass(frozen=True, slots=True)
class Reply:
    """A scripted answer: a status with its headers and body (None: answer normally)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass(slots=True)
class Seen:
    """What the server saw: arrival times, statuses, the most in flight at once."""

    arrivals: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    peak: int = 0

    def count(self, status: int) -> int:
        return self.statuses.count(status)


def throttling(retry_after: str = "60") -> Reply:
    """LiteLLM's own 429: its router's limit reached, only `llm_provider-retry-after`."""
    body = {
        "error": {"message": "Rate limit exceeded", "type": "throttling_error", "param": None, "code": "429"}
    }
    return Reply(429, {"llm_provider-retry-after": retry_after}, orjson.dumps(body))


class Front:
    """See the module docstring. `script(index)` may answer a request (its 0-based arrival index)
    before anything else is checked."""

    def __init__(
        self,
        clock: FakeClock,
        *,
        rpm: int | None = None,
        cap: int | None = None,
        late: float = 0.0,
        latency: float = 0.5,
        script: Callable[[int], Reply | None] | None = None,
    ) -> None:
        self.clock, self.rpm, self.cap, self.late, self.latency = clock, rpm, cap, late, latency
        self.script = script
        self.seen = Seen()
        self._minutes: dict[int, int] = {}
        self._active = 0
        self._stack = contextlib.AsyncExitStack()
        self.base_url = ""

    async def __aenter__(self) -> Front:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self.base_url = await self._stack.enter_async_context(serving(app, shutdown_timeout=0.5)) + "/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _handle(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        index, now = len(self.seen.arrivals), self.clock.now()
        self.seen.arrivals.append(now)
        if self.late > 0 and index % 2 == 1:
            await self.clock.sleep(self.late)  # its connection opened after the next one's
        reply = self.script(index) if self.script is not None else None
        if reply is None and self.cap is not None and self._active >= self.cap:
            reply = Reply(429)  # bare: no body, no header
        minute = int(now // 60)
        if reply is None and self.rpm is not None and self._minutes.get(minute, 0) >= self.rpm:
            reply = throttling()
        if reply is not None:
            self.seen.statuses.append(reply.status)
            return web.Response(status=reply.status, body=reply.body, headers=reply.headers)
        self._minutes[minute] = self._minutes.get(minute, 0) + 1
        self._active += 1
        self.seen.peak = max(self.seen.peak, self._active)
        try:
            await self.clock.sleep(self.latency)
        finally:
            self._active -= 1
        self.seen.statuses.append(200)
        return web.Response(
            body=_completion(body), headers=self._limits(minute), content_type="application/json"
        )

    def _limits(self, minute: int) -> dict[str, str]:
        if self.rpm is None:
            return {}
        left = max(0, self.rpm - self._minutes.get(minute, 0))
        return {"x-ratelimit-limit-requests": str(self.rpm), "x-ratelimit-remaining-requests": str(left)}


def _completion(body: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "id": "chatcmpl-front",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "m"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        }
    )
