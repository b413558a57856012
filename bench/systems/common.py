"""What every system runner shares: the `Recorder` of per-request outcomes and the official SDK calls.

A runner gets the `Spec` and a `Recorder`; it calls `rec.start()` just before its first request and
`rec.ok(id, latency_ms)` / `rec.fail(id, latency_ms, kind)` once per request, then returns. The child
entry point (`bench/run_system.py`) writes the recorder to JSON for the parent.
"""

from __future__ import annotations

import time
from typing import Any

import anthropic
import openai
from workload import ProviderSpec, Request, Spec


class Recorder:
    def __init__(self) -> None:
        self.items: dict[str, tuple[bool, float | None, str | None]] = {}
        self.started = time.perf_counter()
        self.finished: float | None = None
        self.notes: list[str] = []
        self.extrapolated_makespan: float | None = None
        self._cpu_started = time.process_time()
        self._cpu_run: float | None = None

    def start(self) -> None:
        self.started = time.perf_counter()
        self._cpu_started = time.process_time()

    def ok(self, rid: str, latency_ms: float | None) -> None:
        self.items[rid] = (True, latency_ms, None)

    def fail(self, rid: str, latency_ms: float | None, kind: str) -> None:
        self.items[rid] = (False, latency_ms, kind)

    def finish(self) -> None:
        if self.finished is None:
            self.finished = time.perf_counter()
            self._cpu_run = time.process_time() - self._cpu_started

    def to_json(self) -> dict[str, Any]:
        self.finish()
        assert self.finished is not None
        kinds: dict[str, int] = {}
        for ok, _, kind in self.items.values():
            if not ok and kind:
                kinds[kind] = kinds.get(kind, 0) + 1
        return {
            "makespan": self.finished - self.started,
            "ok_ids": [rid for rid, (ok, _, _) in self.items.items() if ok],
            "failed": sum(1 for ok, _, _ in self.items.values() if not ok),
            "latencies_ms": [lat for ok, lat, _ in self.items.values() if ok and lat is not None],
            "failure_kinds": kinds,
            "notes": self.notes,
            "extrapolated_makespan": self.extrapolated_makespan,
            "cpu_run_s": self._cpu_run,  # CPU from the first request to the last answer
        }


def error_kind(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    return f"{name}({status})" if status else name


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
