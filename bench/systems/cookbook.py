"""The OpenAI cookbook's parallel-processor approach, written here from its published description
(not its code): per provider, two client-side capacity buckets (requests and tokens per minute)
that start full at one minute's worth and refill continuously; each request's token cost is
estimated up front (prompt tokens + max_tokens); a dispatch loop wakes every millisecond, sends
the next request (retries first) when both buckets cover it, and after any rate-limit error pauses
all dispatching for 15 s (time-compressed with the rest of the benchmark); failed requests are
re-queued until 5 attempts are spent. Raw HTTP with aiohttp, as the cookbook does.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections import deque
from typing import Any

import aiohttp
import bpe_openai
from workload import ProviderSpec, Request, Spec

from systems.common import Recorder

MAX_ATTEMPTS = 5
LOOP_SLEEP = 0.001


class _Tokens:
    def __init__(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            self._enc = bpe_openai.get_encoding("o200k_base")

    def estimate(self, r: Request) -> int:
        # per message: a few framing tokens plus its text, then the requested completion
        prompt = sum(4 + len(self._enc.encode(t)) for t in (r.system, r.prompt)) + 2
        return prompt + r.max_tokens


class _Processor:
    def __init__(
        self, name: str, p: ProviderSpec, spec: Spec, session: aiohttp.ClientSession, tokens: _Tokens
    ) -> None:
        self.name, self.p, self.spec, self.session, self.tokens = name, p, spec, session, tokens
        self.max_rpm = float(p.limits.get("rpm") or 1e12)
        self.max_tpm = float(p.limits.get("tpm") or p.limits.get("itpm") or 1e15)
        self.retry: deque[tuple[Request, int]] = deque()
        self.in_flight = 0
        self.last_rate_limit = -1e9
        if p.family == "openai":
            self.url = p.base_url.rstrip("/") + "/chat/completions"
            self.headers = {"Authorization": "Bearer bench"}
        else:
            self.url = p.base_url.rstrip("/") + "/v1/messages"
            self.headers = {"x-api-key": "bench", "anthropic-version": "2023-06-01"}

    async def call(self, r: Request, attempts_left: int, rec: Recorder, t0: float) -> None:
        body = r.openai_body(self.p.model) if self.p.family == "openai" else r.anthropic_body(self.p.model)
        try:
            async with self.session.post(self.url, json=body, headers=self.headers) as resp:
                data: Any = await resp.json(content_type=None)
                status = resp.status
            failed = status >= 400 or (isinstance(data, dict) and "error" in data)
        except (aiohttp.ClientError, TimeoutError, ValueError):
            failed, status = True, 0
        if not failed:
            rec.ok(r.id, (time.perf_counter() - t0) * 1000)
        else:
            if status == 429:
                self.last_rate_limit = time.perf_counter()
            if attempts_left > 0:
                self.retry.append((r, attempts_left))
            else:
                rec.fail(r.id, (time.perf_counter() - t0) * 1000, f"status {status or 'network'}")
        self.in_flight -= 1

    async def run(self, requests: list[Request], rec: Recorder) -> None:
        pending = iter(requests)
        exhausted = False
        req_cap, tok_cap = self.max_rpm, self.max_tpm
        last = time.perf_counter()
        nxt: tuple[Request, int] | None = None
        started: dict[str, float] = {}
        tasks: set[asyncio.Task[None]] = set()
        while True:
            if nxt is None:
                if self.retry:
                    nxt = self.retry.popleft()
                elif not exhausted:
                    try:
                        nxt = (next(pending), MAX_ATTEMPTS)
                    except StopIteration:
                        exhausted = True
            now = time.perf_counter()
            req_cap = min(self.max_rpm, req_cap + (now - last) * self.max_rpm / 60.0)
            tok_cap = min(self.max_tpm, tok_cap + (now - last) * self.max_tpm / 60.0)
            last = now
            if nxt is not None:
                r, attempts = nxt
                cost = self.tokens.estimate(r)
                if req_cap >= 1 and tok_cap >= cost:
                    req_cap -= 1
                    tok_cap -= cost
                    self.in_flight += 1
                    t0 = started.setdefault(r.id, now)
                    task = asyncio.create_task(self.call(r, attempts - 1, rec, t0))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    nxt = None
            if exhausted and nxt is None and not self.retry and self.in_flight == 0:
                return
            await asyncio.sleep(LOOP_SLEEP)
            since = time.perf_counter() - self.last_rate_limit
            if since < self.spec.pause_after_429:
                await asyncio.sleep(self.spec.pause_after_429 - since)


async def _main(spec: Spec, rec: Recorder) -> None:
    timeout = aiohttp.ClientTimeout(total=spec.timeout) if spec.timeout else aiohttp.ClientTimeout(total=300)
    tokens = _Tokens()
    by_provider: dict[str, list[Request]] = {}
    for r in spec.requests:
        by_provider.setdefault(r.provider, []).append(r)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        procs = [_Processor(n, spec.providers[n], spec, session, tokens) for n in by_provider]
        rec.start()
        await asyncio.gather(*(p.run(by_provider[p.name], rec) for p in procs))
        rec.finish()


def run(spec: Spec, rec: Recorder) -> None:
    asyncio.run(_main(spec, rec))
