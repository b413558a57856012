"""batchgate as a library: `Gateway(config, base_urls=...)` and `await gw.abatch(bodies)`.

The config declares each provider's *declared* limits (what its docs and headers claim) and one
route per provider, so every request goes exactly where the workload says (`to-<provider>`).
`gateway_config` is shared with the CLI runner, which writes the same mapping as YAML.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from workload import ProviderSpec, Spec, route_model

from batchgate.config import config_from_dict
from batchgate.gateway import Gateway
from systems.common import Recorder

DEFAULT_TIMEOUT = 60.0


def gateway_config(
    providers: Mapping[str, ProviderSpec],
    timeout: float | None,
    concurrency: int | None = None,
    transport: str | None = None,
) -> dict[str, Any]:
    """`concurrency`: batchgate's `settings.concurrency` (None: its own default), for a bench that
    compares systems at one width (`spec.extra["batchgate_concurrency"]`, bench/overhead.py);
    `transport`: `settings.transport` (None: the default, h1; `spec.extra["batchgate_transport"]`)."""
    settings: dict[str, Any] = {"seed": 1, "timeouts": {"connect": 5, "total": timeout or DEFAULT_TIMEOUT}}
    if concurrency is not None:
        settings["concurrency"] = concurrency
    if transport is not None:
        settings["transport"] = transport
    return {
        "providers": [
            {"name": n, "kind": p.family, "base_url": p.base_url, "limits": dict(p.limits)}
            for n, p in providers.items()
        ],
        "routes": [{"model": route_model(n), "targets": [f"{n}:{p.model}"]} for n, p in providers.items()],
        "settings": settings,
    }


async def _main(spec: Spec, rec: Recorder) -> None:
    width = spec.extra.get("batchgate_concurrency")
    transport = spec.extra.get("batchgate_transport")
    config = config_from_dict(gateway_config(spec.providers, spec.timeout, width, transport), source="bench")
    bodies: list[dict[str, Any]] = [r.openai_body(route_model(r.provider)) for r in spec.requests]
    base_urls = {n: p.base_url for n, p in spec.providers.items()}
    async with Gateway(config, base_urls=base_urls) as gw:
        rec.start()
        results = await gw.abatch(bodies)
        rec.finish()
    for r, res in zip(spec.requests, results, strict=True):
        if res.ok:
            rec.ok(r.id, res.latency_ms)
        else:
            rec.fail(r.id, res.latency_ms, type(res.error).__name__)


def run(spec: Spec, rec: Recorder) -> None:
    asyncio.run(_main(spec, rec))
