"""The official async SDK clients the naive baselines (serial, gather, semaphore) send through."""

from __future__ import annotations

import time
from typing import Any

import anthropic
import openai
from workload import ProviderSpec, Request, Spec

from systems.common import Recorder, error_kind


class SdkClients:
    """One official async SDK client per provider (default retries; the spec's timeout if set)."""

    def __init__(self, spec: Spec, max_retries: int | None = None) -> None:
        self.providers = spec.providers
        self.clients: dict[str, Any] = {}
        for name, p in spec.providers.items():
            kw: dict[str, Any] = {"base_url": p.base_url, "api_key": "bench"}
            if spec.timeout is not None:
                kw["timeout"] = spec.timeout
            if max_retries is not None:
                kw["max_retries"] = max_retries
            self.clients[name] = (
                openai.AsyncOpenAI(**kw) if p.family == "openai" else anthropic.AsyncAnthropic(**kw)
            )

    async def send(self, r: Request) -> Any:
        p: ProviderSpec = self.providers[r.provider]
        client = self.clients[r.provider]
        if p.family == "openai":
            return await client.chat.completions.create(
                model=p.model,
                max_tokens=r.max_tokens,
                messages=[{"role": "system", "content": r.system}, {"role": "user", "content": r.prompt}],
            )
        return await client.messages.create(
            model=p.model,
            max_tokens=r.max_tokens,
            system=r.system,
            messages=[{"role": "user", "content": r.prompt}],
        )

    async def send_recorded(self, r: Request, rec: Recorder) -> None:
        t0 = time.perf_counter()
        try:
            await self.send(r)
        except Exception as exc:  # every failure is an outcome to count, not a crash
            rec.fail(r.id, (time.perf_counter() - t0) * 1000, error_kind(exc))
        else:
            rec.ok(r.id, (time.perf_counter() - t0) * 1000)

    async def close(self) -> None:
        for c in self.clients.values():
            await c.close()
