"""LangChain: one chat model per provider with an `InMemoryRateLimiter` at the provider's declared
requests per second (LangChain's documented way to respect a rate limit), and `abatch` over that
provider's requests; the providers' batches run concurrently. The limiter counts requests only —
it has no notion of tokens. Retries are the chat models' defaults (the official SDKs' 2).
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_anthropic import ChatAnthropic
from langchain_core.rate_limiters import InMemoryRateLimiter
from langchain_openai import ChatOpenAI
from workload import Request, Spec

from systems.common import Recorder, error_kind


def _model(spec: Spec, name: str, max_tokens: int) -> Any:
    p = spec.providers[name]
    rpm = p.limits.get("rpm")
    limiter = None
    if rpm:
        rps = rpm / 60.0
        limiter = InMemoryRateLimiter(
            requests_per_second=rps, check_every_n_seconds=0.1, max_bucket_size=max(1.0, rps)
        )
    kw: dict[str, Any] = {"model": p.model, "base_url": p.base_url, "api_key": "bench"}
    kw["max_tokens"] = max_tokens
    if spec.timeout is not None:
        kw["timeout"] = spec.timeout
    if limiter is not None:
        kw["rate_limiter"] = limiter
    return ChatOpenAI(**kw) if p.family == "openai" else ChatAnthropic(**kw)


async def _provider(spec: Spec, name: str, requests: list[Request], rec: Recorder) -> None:
    model = _model(spec, name, requests[0].max_tokens)
    inputs = [[("system", r.system), ("human", r.prompt)] for r in requests]
    outputs = await model.abatch(inputs, return_exceptions=True)
    for r, out in zip(requests, outputs, strict=True):
        if isinstance(out, BaseException):
            rec.fail(r.id, None, error_kind(out))
        else:
            rec.ok(r.id, None)


async def _main(spec: Spec, rec: Recorder) -> None:
    by_provider: dict[str, list[Request]] = {}
    for r in spec.requests:
        by_provider.setdefault(r.provider, []).append(r)
    rec.start()
    await asyncio.gather(*(_provider(spec, n, rs, rec) for n, rs in by_provider.items()))
    rec.finish()


def run(spec: Spec, rec: Recorder) -> None:
    rec.notes.append("per-request latency not observable through abatch")
    asyncio.run(_main(spec, rec))
